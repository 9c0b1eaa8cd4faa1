// Tests of NodeFibers, the node plumbing every runtime shares: counts, failure reports, stuck-report
// lines, refusal after death, and join_killed_fibers.
#include "core/fibers/node_fibers.h"

#include <gtest/gtest.h>

#include <boost/fiber/operations.hpp>

#include "core/fibers/scheduler.h"
#include "core/fibers/virtual_clock.h"
#include "core/runtime/event.h"

namespace dagsim::fibers {
namespace {

// A Spawner over one NodeFibers, as a runtime writes it.
class TestSpawner final : public runtime::Spawner {
 public:
  void spawn_in(std::shared_ptr<runtime::ScopeState> scope, std::string name, std::function<void()> fn) override {
    fibers->spawn(std::move(scope), std::move(name), std::move(fn));
  }
  const std::shared_ptr<runtime::ScopeState>& lifetime() const override { return fibers->lifetime(); }
  NodeFibers* fibers = nullptr;
};

struct Failure {
  std::string fiber;
  std::string what;
};

struct Harness {
  DeterministicScheduler& scheduler = DeterministicScheduler::for_this_thread();
  VirtualClock clock;
  TestSpawner spawner;
  size_t live = 0;
  std::vector<Failure> failures;
  NodeFibers fibers{"n7", clock, spawner, live, 256 * 1024,
                    [this](const runtime::FiberContext& f, std::string what) { failures.push_back({f.fiber_name, what}); }};
  Harness() { spawner.fibers = &fibers; }
  ~Harness() {
    fibers.kill();
    join_killed_fibers(live, scheduler, &clock, [this] { return report(); });
  }
  std::string report() const {
    std::string out;
    fibers.describe(out, "n7 (test)");
    return out;
  }
  // Lets every ready fiber run until all are blocked or done.
  void settle() {
    while (true) {
      boost::this_fiber::yield();
      if (scheduler.ready_workers() == 0) return;
    }
  }
};

TEST(NodeFibers, CountsFibersAndReportsOnlyRealFailures) {
  runtime::Event never;  // outlives the harness, which joins the fiber blocked on it
  Harness h;
  h.spawner.spawn("blocked", [&] { never.wait(); });
  h.spawner.spawn("fails", [] { throw errors::invalid_argument("bad input"); });
  h.spawner.spawn("killed-quietly", [] { throw errors::node_killed("n7"); });
  h.spawner.spawn("cancelled-quietly", [] { throw errors::cancelled("scope"); });
  h.spawner.spawn("done", [] {});
  EXPECT_EQ(h.live, 5u);
  EXPECT_EQ(h.fibers.live(), 5u);
  h.settle();
  EXPECT_EQ(h.live, 1u);
  ASSERT_EQ(h.failures.size(), 1u);
  EXPECT_EQ(h.failures[0].fiber, "fails");
  EXPECT_NE(h.failures[0].what.find("bad input"), std::string::npos);
  EXPECT_EQ(h.report(), "  node n7 (test), fiber blocked: waiting on Event::wait\n");
}

TEST(NodeFibers, KillUnwindsWaitsAndRefusesNewFibers) {
  runtime::Event never;
  Harness h;
  std::string ended;
  h.spawner.spawn("waiter", [&] {
    try {
      never.wait();
    } catch (const Error& e) {
      ended = std::string(error_name(e.code()));
      throw;
    }
  });
  h.settle();
  h.fibers.kill();
  EXPECT_TRUE(h.fibers.killed());
  h.settle();
  EXPECT_EQ(ended, "node_killed");
  EXPECT_EQ(h.live, 0u);
  EXPECT_TRUE(h.failures.empty());
  EXPECT_THROW(h.spawner.spawn("late", [] {}), Error);
  EXPECT_EQ(h.live, 0u);
}

TEST(NodeFibers, JoinKilledFibersFiresTimersAKilledFiberStillNeeds) {
  size_t joined_live = 0;
  {
    Harness h;
    // A fiber whose cleanup (after death) is a timer of the runtime, not a wait of the node.
    bool cleaned = false;
    h.clock.call_at(runtime::TimePoint{std::chrono::seconds(5)}, [&] { cleaned = true; });
    h.spawner.spawn("waiter", [&] { runtime::Event().wait(); });
    h.settle();
    h.fibers.kill();
    join_killed_fibers(h.live, h.scheduler, &h.clock, [&] { return h.report(); });
    joined_live = h.live;
    EXPECT_FALSE(cleaned);  // the killed fiber needed no time: no timer fired
  }
  EXPECT_EQ(joined_live, 0u);
}

}  // namespace
}  // namespace dagsim::fibers
