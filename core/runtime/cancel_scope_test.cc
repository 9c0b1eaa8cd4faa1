// Tests of CancelScope: a scope's cancel() unwinds the waits inside it (Future, Channel, Event,
// Mutex, sleep) with `cancelled` and leaves the rest of the node alone; scopes nest; a cancelled
// scope refuses fibers; the node's death wins over a scope; join waits for the scope's fibers;
// stuck reports name the scope.
#include <gtest/gtest.h>

#include <memory>

#include "core/fibers/local_runtime.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/channel.h"
#include "core/runtime/event.h"
#include "core/runtime/mutex.h"

namespace dagsim::runtime {
namespace {

using fibers::LocalRuntime;
using namespace std::chrono_literals;

// How a fiber's wait ended: "ok", or the code's name of the error it threw.
std::string outcome_of(const std::function<void()>& wait) {
  try {
    wait();
    return "ok";
  } catch (const Error& e) {
    return std::string(error_name(e.code()));
  }
}

TEST(CancelScope, CancelUnwindsEveryKindOfWaitInsideAndNoneOutside) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> scope;
  rt.run_on(0, [&] { scope = std::make_unique<CancelScope>("keepalive"); });
  Promise<int> never;
  Future<int> never_f = never.get_future();
  Channel<int> channel;
  Event event;
  Mutex mutex;
  mutex.try_lock();  // held by nobody who will ever unlock it
  std::map<std::string, std::string> ended;
  auto spawn_wait = [&](bool in_scope, std::string what, std::function<void()> wait) {
    auto body = [&ended, what, wait] { ended[what] = outcome_of(wait); };
    if (in_scope) {
      env.spawner.spawn(*scope, what, body);
    } else {
      env.spawner.spawn(what, body);
    }
  };
  spawn_wait(true, "future", [&] { never_f.get(); });
  spawn_wait(true, "channel", [&] { channel.pop(); });
  spawn_wait(true, "event", [&] { event.wait(); });
  spawn_wait(true, "mutex", [&] { mutex.lock(); });
  spawn_wait(true, "sleep", [&] { env.clock.sleep(std::chrono::hours(1)); });
  spawn_wait(false, "outside", [&] { never_f.get(); });
  EXPECT_EQ(rt.run(TimePoint{10min}), LocalRuntime::Outcome::time_limit);
  EXPECT_TRUE(ended.empty());
  EXPECT_EQ(scope->live_fibers(), 5u);

  scope->cancel();
  EXPECT_EQ(rt.run(TimePoint{10min}), LocalRuntime::Outcome::deadlock);  // only "outside" is left
  const std::map<std::string, std::string> expected{
      {"future", "cancelled"}, {"channel", "cancelled"}, {"event", "cancelled"}, {"mutex", "cancelled"}, {"sleep", "cancelled"}};
  EXPECT_EQ(ended, expected);
  EXPECT_EQ(scope->live_fibers(), 0u);
  EXPECT_EQ(rt.live_fibers(), 1u);
  EXPECT_TRUE(rt.is_alive(0));

  never.set_value(7);
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_EQ(ended.at("outside"), "ok");
  EXPECT_TRUE(rt.failures().empty());  // a cancelled fiber ends quietly
  mutex.unlock();
}

TEST(CancelScope, TheErrorNamesTheCancelledScopeAndNode) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> scope;
  rt.run_on(0, [&] { scope = std::make_unique<CancelScope>("round-3"); });
  std::string message;
  env.spawner.spawn(*scope, "waiter", [&] {
    try {
      Event().wait();
    } catch (const Error& e) {
      message = e.what();
    }
  });
  rt.run();
  scope->cancel();
  rt.run();
  EXPECT_NE(message.find("round-3"), std::string::npos) << message;
  EXPECT_NE(message.find("n0"), std::string::npos) << message;
}

TEST(CancelScope, ScopesNest) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> parent, child, other_child;
  rt.run_on(0, [&] {
    parent = std::make_unique<CancelScope>("group");
    child = std::make_unique<CancelScope>("worker-1", *parent);
    CancelScope::Enter in_parent(*parent);
    other_child = std::make_unique<CancelScope>("worker-2");  // made inside parent by Enter
  });
  std::map<std::string, std::string> ended;
  for (CancelScope* s : {parent.get(), child.get(), other_child.get()}) {
    env.spawner.spawn(*s, s->name(), [&ended, s] { ended[s->name()] = outcome_of([] { Event().wait(); }); });
  }
  rt.run();
  child->cancel();
  rt.run();
  EXPECT_EQ(ended, (std::map<std::string, std::string>{{"worker-1", "cancelled"}}));
  EXPECT_FALSE(parent->cancelled());

  parent->cancel();  // reaches the other child too
  rt.run();
  EXPECT_EQ(ended, (std::map<std::string, std::string>{
                       {"group", "cancelled"}, {"worker-1", "cancelled"}, {"worker-2", "cancelled"}}));
  EXPECT_TRUE(other_child->cancelled());
}

TEST(CancelScope, SpawnIntoACancelledScopeThrowsCancelled) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> scope;
  rt.run_on(0, [&] { scope = std::make_unique<CancelScope>("s"); });
  scope->cancel();
  try {
    env.spawner.spawn(*scope, "late", [] {});
    FAIL() << "spawn into a cancelled scope must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::cancelled);
  }
  EXPECT_EQ(rt.live_fibers(), 0u);
  // A child of a cancelled scope cannot be made either.
  EXPECT_THROW(CancelScope("child", *scope), Error);
}

TEST(CancelScope, TheNodesDeathWinsOverItsScopes) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> outer, inner;
  rt.run_on(0, [&] {
    outer = std::make_unique<CancelScope>("outer");
    inner = std::make_unique<CancelScope>("inner", *outer);
  });
  std::map<std::string, std::string> ended;
  env.spawner.spawn(*inner, "a", [&] { ended["a"] = outcome_of([] { Event().wait(); }); });
  env.spawner.spawn(*outer, "b", [&] { ended["b"] = outcome_of([] { Event().wait(); }); });
  rt.run();
  // Cancelled and killed in the same instant, before the fibers run: they see the death.
  inner->cancel();
  rt.kill(0);
  rt.run();
  EXPECT_EQ(ended, (std::map<std::string, std::string>{{"a", "node_killed"}, {"b", "node_killed"}}));
  EXPECT_TRUE(outer->cancelled());  // the death cancelled every scope of the node
  EXPECT_THROW(env.spawner.spawn(*outer, "late", [] {}), Error);
}

TEST(CancelScope, JoinWaitsUntilTheScopesFibersHaveUnwound) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::vector<std::string> order;
  rt.run_on(0, [&] {
    CancelScope scope("workers");
    for (int i = 0; i < 3; ++i) {
      env.spawner.spawn(scope, "worker", [&order, &env, i] {
        try {
          env.clock.sleep(std::chrono::hours(1));
        } catch (const Error&) {
          order.push_back("unwound " + std::to_string(i));
          throw;
        }
      });
    }
    env.clock.sleep(1s);
    EXPECT_EQ(scope.live_fibers(), 3u);
    scope.cancel();
    scope.join();
    order.push_back("joined");
    EXPECT_EQ(scope.live_fibers(), 0u);
  });
  EXPECT_EQ(order, (std::vector<std::string>{"unwound 0", "unwound 1", "unwound 2", "joined"}));
  EXPECT_EQ(rt.now().since_epoch, std::chrono::seconds(1));  // nobody waited for the hour
}

TEST(CancelScope, JoinUntilTimesOutWhileFibersRun) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  const bool joined = rt.run_on(0, [&] {
    CancelScope scope("slow");
    env.spawner.spawn(scope, "sleeper", [&env] { env.clock.sleep(std::chrono::minutes(5)); });
    return scope.join_until(env.clock.now() + std::chrono::minutes(1));
  });
  EXPECT_FALSE(joined);
}

TEST(CancelScope, EnterPutsABlockOfTheFibersWaitsInTheScope) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> scope;
  rt.run_on(0, [&] { scope = std::make_unique<CancelScope>("call"); });
  std::vector<std::string> seen;
  Event later;
  env.spawner.spawn("caller", [&] {
    {
      CancelScope::Enter enter(*scope);
      seen.push_back(outcome_of([] { Event().wait(); }));
    }
    // Out of the block, the fiber's waits are the node's again.
    seen.push_back(outcome_of([&] { later.wait(); }));
  });
  rt.run();
  scope->cancel();
  rt.run();
  later.set();
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_EQ(seen, (std::vector<std::string>{"cancelled", "ok"}));
}

TEST(CancelScope, ThenContinuationsRunInTheCallersScope) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> scope;
  rt.run_on(0, [&] { scope = std::make_unique<CancelScope>("s"); });
  Promise<int> p;
  Future<int> chained;
  env.spawner.spawn(*scope, "chainer", [&] {
    chained = p.get_future().then([](Future<int> f) { return f.get() + 1; });
  });
  rt.run();
  EXPECT_EQ(scope->live_fibers(), 0u);
  scope->cancel();
  p.set_value(1);  // the continuation's scope is gone: it cannot run
  rt.run();
  ASSERT_TRUE(chained.is_ready());
  EXPECT_EQ(outcome_of([&] { chained.get(); }), "cancelled");
}

TEST(CancelScope, StuckReportNamesTheScopeOfABlockedFiber) {
  Event never;  // outlives the runtime, which unwinds the fibers blocked on it
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  std::unique_ptr<CancelScope> scope;
  rt.run_on(0, [&] { scope = std::make_unique<CancelScope>("keepalive"); });
  env.spawner.spawn(*scope, "heartbeat", [&] { never.wait(); });
  env.spawner.spawn("plain", [&] { never.wait(); });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::deadlock);
  const std::string report = rt.stuck_report();
  EXPECT_NE(report.find("fiber heartbeat in scope keepalive: waiting on Event::wait"), std::string::npos) << report;
  EXPECT_NE(report.find("fiber plain: waiting on Event::wait"), std::string::npos) << report;
}

TEST(CancelScope, RethrowIfUnwindingKeepsDeathAndCancellationGoing) {
  auto classify = [](const Error& error) {
    try {
      try {
        throw error;
      } catch (const Error& e) {
        rethrow_if_unwinding(e);
        return std::string("handled");
      }
    } catch (const Error& e) {
      return "rethrown " + std::string(error_name(e.code()));
    }
  };
  EXPECT_EQ(classify(errors::node_killed("n")), "rethrown node_killed");
  EXPECT_EQ(classify(errors::cancelled("s")), "rethrown cancelled");
  EXPECT_EQ(classify(errors::timed_out("t")), "handled");
  EXPECT_EQ(classify(errors::connection_failed("c")), "handled");
}

}  // namespace
}  // namespace dagsim::runtime
