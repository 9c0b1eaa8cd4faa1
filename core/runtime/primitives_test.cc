// Tests of the blocking primitives: deadlines through the virtual Clock, cancellation by node
// death, `then` chains and broken promises. Everything runs under a LocalRuntime, so times are
// exact virtual times.
#include <gtest/gtest.h>

#include "core/fibers/local_runtime.h"
#include "core/runtime/channel.h"
#include "core/runtime/event.h"
#include "core/runtime/future.h"
#include "core/runtime/mutex.h"

namespace dagsim::runtime {
namespace {

using fibers::LocalRuntime;
using namespace std::chrono_literals;

TimePoint at(Duration d) { return TimePoint{d}; }

TEST(Event, WaitUntilTimesOutAtTheDeadline) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Event event;
  bool woke = true;
  TimePoint woke_at;
  rt.run_on(0, [&] {
    woke = event.wait_until(env.clock.now() + 5ms);
    woke_at = env.clock.now();
  });
  EXPECT_FALSE(woke);
  EXPECT_EQ(woke_at, at(5ms));
}

TEST(Event, SetReleasesEveryWaiter) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Event event;
  int released = 0;
  for (int i = 0; i < 3; ++i) env.spawner.spawn("waiter", [&] { event.wait(); ++released; });
  env.spawner.spawn("setter", [&] { env.clock.sleep(1ms); event.set(); });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_EQ(released, 3);
  EXPECT_EQ(rt.now(), at(1ms));
}

TEST(Future, GetUntilThrowsTimedOut) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Promise<int> promise;
  Future<int> future = promise.get_future();
  ErrorCode code = ErrorCode::internal_error;
  rt.run_on(0, [&] {
    try {
      future.get_until(env.clock.now() + 10ms);
    } catch (const Error& e) {
      code = e.code();
    }
  });
  EXPECT_EQ(code, ErrorCode::timed_out);
  EXPECT_EQ(rt.now(), at(10ms));
}

TEST(Future, ValueArrivesBeforeTheDeadline) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Promise<int> promise;
  Future<int> future = promise.get_future();
  env.spawner.spawn("producer", [&] { env.clock.sleep(3ms); promise.set_value(42); });
  int value = rt.run_on(0, [&] { return future.get_until(env.clock.now() + 10ms); });
  EXPECT_EQ(value, 42);
}

TEST(Future, ThenChainsRunOnNodeFibers) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Promise<int> promise;
  int result = rt.run_on(0, [&] {
    Future<int> chained = promise.get_future()
                              .then([](Future<int> f) { return f.get() + 1; })
                              .then([](Future<int> f) { return f.get() * 10; });
    env.spawner.spawn("producer", [&] { promise.set_value(4); });
    return chained.get();
  });
  EXPECT_EQ(result, 50);
}

TEST(Future, ThenOnAReadyFutureAndErrorsPropagate) {
  LocalRuntime rt;
  rt.add_node("n0");
  auto [value, code] = rt.run_on(0, [&] {
    Future<int> ready = make_ready_future(7);
    int v = ready.then([](Future<int> f) { return f.get() * 2; }).get();
    Future<int> failing = ready.then([](Future<int>) -> int { throw errors::invalid_argument("boom"); });
    Future<int> after = failing.then([](Future<int> f) { return f.get() + 1; });
    ErrorCode c = ErrorCode::internal_error;
    try {
      after.get();
    } catch (const Error& e) {
      c = e.code();
    }
    return std::make_pair(v, c);
  });
  EXPECT_EQ(value, 14);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
}

TEST(Future, VoidFutures) {
  LocalRuntime rt;
  rt.add_node("n0");
  bool ran = false;
  rt.run_on(0, [&] {
    Promise<void> p;
    Future<void> done = p.get_future().then([&](Future<void> f) { f.get(); ran = true; });
    p.set_value();
    done.get();
  });
  EXPECT_TRUE(ran);
}

TEST(Future, DestroyedPromiseBreaksTheFuture) {
  LocalRuntime rt;
  rt.add_node("n0");
  Future<int> future;
  {
    Promise<int> promise;
    future = promise.get_future();
  }
  ASSERT_TRUE(future.is_ready());
  EXPECT_TRUE(is_error(future.error(), ErrorCode::broken_promise));
}

TEST(Channel, PopUntilTimesOutAndItemsArriveInOrder) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Channel<int> channel;
  std::vector<int> got;
  bool timed_out = false;
  env.spawner.spawn("producer", [&] {
    for (int i = 0; i < 3; ++i) {
      env.clock.sleep(1ms);
      channel.push(i);
    }
  });
  rt.run_on(0, [&] {
    for (int i = 0; i < 3; ++i) got.push_back(channel.pop());
    timed_out = !channel.pop_until(env.clock.now() + 2ms).has_value();
  });
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(rt.now(), at(5ms));
}

TEST(Channel, CloseDrainsThenThrows) {
  LocalRuntime rt;
  rt.add_node("n0");
  Channel<int> channel;
  channel.push(1);
  channel.close();
  rt.run_on(0, [&] {
    EXPECT_EQ(channel.pop(), 1);
    EXPECT_THROW(channel.pop(), Error);
  });
  EXPECT_THROW(channel.push(2), Error);
}

TEST(Channel, BoundedPushWaitsForRoom) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Channel<int> channel(1);
  TimePoint second_push_done;
  env.spawner.spawn("producer", [&] {
    channel.push(1);
    channel.push(2);  // waits until the consumer takes 1
    second_push_done = env.clock.now();
  });
  rt.run_on(0, [&] {
    env.clock.sleep(4ms);
    EXPECT_EQ(channel.pop(), 1);
    EXPECT_EQ(channel.pop(), 2);
  });
  EXPECT_EQ(second_push_done, at(4ms));
}

TEST(Mutex, SerialisesAndLockUntilTimesOut) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Mutex mutex;
  std::vector<std::string> order;
  bool got_it = true;
  env.spawner.spawn("holder", [&] {
    std::lock_guard<Mutex> guard(mutex);
    order.push_back("holder in");
    env.clock.sleep(10ms);
    order.push_back("holder out");
  });
  env.spawner.spawn("impatient", [&] {
    got_it = mutex.lock_until(env.clock.now() + 2ms);
    if (got_it) mutex.unlock();
  });
  env.spawner.spawn("patient", [&] {
    std::lock_guard<Mutex> guard(mutex);
    order.push_back("patient in");
  });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_FALSE(got_it);
  EXPECT_EQ(order, (std::vector<std::string>{"holder in", "holder out", "patient in"}));
}

// Node death unwinds a fiber from whichever primitive it blocks in, and RAII runs.
TEST(Cancellation, KillUnwindsEveryPrimitive) {
  LocalRuntime rt;
  Env& env = rt.add_node("victim");
  rt.add_node("killer");
  Event event;
  Promise<int> promise;
  Future<int> future = promise.get_future();
  Channel<int> channel;
  Mutex mutex;
  mutex.lock();
  int unwound = 0;
  struct Counter {
    int* n;
    ~Counter() { ++*n; }
  };
  env.spawner.spawn("event", [&] { Counter c{&unwound}; event.wait(); });
  env.spawner.spawn("future", [&] { Counter c{&unwound}; future.get(); });
  env.spawner.spawn("channel", [&] { Counter c{&unwound}; channel.pop(); });
  env.spawner.spawn("mutex", [&] { Counter c{&unwound}; mutex.lock(); });
  env.spawner.spawn("sleep", [&] { Counter c{&unwound}; env.clock.sleep(1h); });
  rt.env(1).spawner.spawn("killer", [&] {
    rt.env(1).clock.sleep(1ms);
    rt.kill(0);
  });
  EXPECT_EQ(rt.run(), LocalRuntime::Outcome::finished);
  EXPECT_EQ(unwound, 5);
  EXPECT_TRUE(rt.failures().empty());  // node_killed is a quiet end, not a failure
  EXPECT_THROW(env.spawner.spawn("late", [] {}), Error);
  mutex.unlock();
}

TEST(Cancellation, KilledNodeStopsAtItsNextBlockingPointEvenIfReady) {
  LocalRuntime rt;
  Env& env = rt.add_node("n0");
  Event event;
  event.set();
  bool passed = false;
  env.spawner.spawn("f", [&] {
    rt.kill(0);
    event.wait();  // would not block, but the node is dead
    passed = true;
  });
  rt.run();
  EXPECT_FALSE(passed);
}

}  // namespace
}  // namespace dagsim::runtime
