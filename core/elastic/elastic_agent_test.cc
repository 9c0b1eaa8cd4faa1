// Tests of the ElasticAgent (PyTorch's SimpleElasticAgent._invoke_run), on a LocalRuntime with the
// built-in store: a failing group restarts exactly max_restarts times and then fails by name,
// while the peers' restarts for waiting nodes count nothing; success waits at the exit barrier
// for the slowest member (and still succeeds when the barrier times out, as PyTorch does); a
// cancelled agent (SIGTERM) stops its worker group; a closed rendezvous stops the others; a group
// whose member died for good fails (counted) rather than waiting on it for ever.
#include "core/elastic/elastic_agent.h"

#include <gtest/gtest.h>

#include "core/elastic/elastic_agent_test_cluster.h"
#include "core/elastic/worker_ranks.h"

namespace dagsim::elastic {
namespace {

using namespace std::chrono_literals;
using rendezvous::testing::at;
using rendezvous::testing::job;

class ElasticAgentTest : public ::testing::Test, public testing::AgentCluster {};

// A worker that runs until its group is stopped.
void forever(runtime::Clock& clock) {
  for (;;) clock.sleep(1s);
}

TEST_F(ElasticAgentTest, AFailingGroupRestartsMaxRestartsTimesThenFailsByName) {
  start(2, job(2, 2));
  runtime::Clock& clock2 = rt_.env(2).clock;
  agent_at(1, at(0ms), {.max_restarts = 2, .monitor_interval = 100ms, .exit_barrier_timeout = 5s},
           [](const WorkerGroupSpec&) { throw errors::invalid_argument("boom"); });
  agent_at(2, at(0ms), {.max_restarts = 2, .monitor_interval = 100ms, .exit_barrier_timeout = 5s},
           [&clock2](const WorkerGroupSpec&) { forever(clock2); });
  run_until(at(30s));
  ASSERT_TRUE(run_result(1).has_value());
  const AgentResult& r = *run_result(1);
  EXPECT_EQ(r.outcome, AgentOutcome::failed);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->code(), ErrorCode::worker_group_failed);
  EXPECT_NE(std::string(r.error->what()).find("max_restarts = 2 spent: Invalid argument: boom"), std::string::npos) << r.error->what();
  EXPECT_EQ(r.restarts, 2u);
  EXPECT_EQ(r.rounds, 3u) << "the first group and two restarts";
  EXPECT_EQ(count(1, AgentEvent::Kind::group_failed), 3);
  std::vector<uint32_t> remaining;
  for (const AgentEvent& e : events_[1]) {
    if (e.kind == AgentEvent::Kind::group_failed) remaining.push_back(e.remaining);
  }
  EXPECT_EQ(remaining, (std::vector<uint32_t>{2, 1, 0}));
  // The healthy peer restarted for the waiting node each time, and counted none of it.
  EXPECT_EQ(count(2, AgentEvent::Kind::nodes_waiting), 2);
  EXPECT_EQ(agent(2).remaining_restarts(), 2u);
  EXPECT_FALSE(run_result(2).has_value()) << "still training: nobody closed the job";
  // The launcher closes the job; the peer's monitor finds it closed and stops.
  at_time(1, at(31s), [&] { EXPECT_TRUE(agent(1).close_job()); });
  run_until(at(40s));
  ASSERT_TRUE(run_result(2).has_value());
  EXPECT_EQ(run_result(2)->outcome, AgentOutcome::closed);
  EXPECT_EQ(run_result(2)->restarts, 0u);
}

// What an agent publishes every agent must read back: a role decode_role_info would refuse is
// refused where the agent is made, naming the limit, rather than failing every peer's round.
TEST_F(ElasticAgentTest, ARoleLongerThanEveryPeerCanReadIsRefusedAtTheStart) {
  start(1, job(1, 1));
  runtime::Clock& clock = rt_.env(1).clock;
  try {
    agent_at(1, at(0ms), {.role = std::string(kMaxRoleBytes + 1, 'r')}, [&clock](const WorkerGroupSpec&) { forever(clock); });
    ADD_FAILURE() << "a role of " << kMaxRoleBytes + 1 << " bytes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("at most 256 bytes"), std::string::npos) << e.what();
  }
  const AgentRoleInfo longest{std::string(kMaxRoleBytes, 'r'), 0, 1};
  const std::string text = encode_role_info(longest);
  EXPECT_EQ(decode_role_info(std::vector<uint8_t>(text.begin(), text.end()), 0), longest);
}

TEST_F(ElasticAgentTest, SuccessWaitsAtTheExitBarrierForTheSlowestMember) {
  start(2, job(2, 2));
  runtime::Clock& clock1 = rt_.env(1).clock;
  runtime::Clock& clock2 = rt_.env(2).clock;
  const ElasticAgentOptions options{.max_restarts = 0, .monitor_interval = 100ms, .exit_barrier_timeout = 10s};
  agent_at(1, at(0ms), options, [&clock1](const WorkerGroupSpec&) { clock1.sleep(1s); });
  agent_at(2, at(0ms), options, [&clock2](const WorkerGroupSpec& g) {
    EXPECT_EQ(g.members.size(), 2u);
    EXPECT_EQ(g.members[g.info.rank].addr, "worker2");
    clock2.sleep(3s);
  });
  run_until(at(30s));
  for (int i : {1, 2}) {
    ASSERT_TRUE(run_result(i).has_value()) << i;
    EXPECT_EQ(run_result(i)->outcome, AgentOutcome::succeeded);
    EXPECT_FALSE(run_result(i)->barrier_timed_out);
    EXPECT_GE(done_at_[i], at(3s)) << "agent " << i << " left the barrier before the slow member arrived";
  }
}

TEST_F(ElasticAgentTest, ABarrierThatTimesOutStillSucceedsAsPyTorchDoes) {
  start(2, job(2, 2));
  runtime::Clock& clock2 = rt_.env(2).clock;
  agent_at(1, at(0ms), {.max_restarts = 0, .monitor_interval = 100ms, .exit_barrier_timeout = 2s}, [](const WorkerGroupSpec&) {});
  agent_at(2, at(0ms), {.max_restarts = 0, .monitor_interval = 100ms, .exit_barrier_timeout = 2s},
           [&clock2](const WorkerGroupSpec&) { forever(clock2); });
  run_until(at(10s));
  ASSERT_TRUE(run_result(1).has_value());
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded);
  EXPECT_TRUE(run_result(1)->barrier_timed_out);
  EXPECT_LE(done_at_[1], at(2s + 500ms));
}

TEST_F(ElasticAgentTest, ACancelledAgentStopsItsWorkerGroup) {
  start(2, job(2, 2));
  runtime::Env& env1 = rt_.env(1);
  runtime::Clock& clock2 = rt_.env(2).clock;
  bool unwound = false;
  struct Flag {
    bool& set;
    ~Flag() { set = true; }
  };
  auto scope = std::make_unique<runtime::CancelScope>("agent", env1.spawner);
  ElasticAgent a(env1, handler(1), *clients_[0], "job", {}, [&env1, &unwound](const WorkerGroupSpec&) {
    Flag flag{unwound};
    forever(env1.clock);
  });
  std::optional<ErrorCode> ended;
  env1.spawner.spawn("agent", [&] {
    try {
      runtime::CancelScope::Enter in(*scope);
      a.run();
    } catch (const Error& e) {
      ended = e.code();
    }
  });
  agent_at(2, at(0ms), {}, [&clock2](const WorkerGroupSpec&) { forever(clock2); });
  at_time(1, at(5s), [&] { scope->cancel(); });
  run_until(at(6s));
  EXPECT_EQ(ended, ErrorCode::cancelled);
  EXPECT_TRUE(unwound) << "the worker group outlived its agent";
  rt_.kill(1);
  rt_.run();
}

// A member gone for good, with nobody joining after it: the survivor's workers would wait on it for
// ever (PyTorch's find out when a collective with it fails). Once the member has been in none of
// the state's lists for the keep-alive expiry, the survivor's group fails, counted against
// max_restarts.
void expect_survivor_fails(const std::vector<std::vector<AgentEvent>>& events, const std::string& how) {
  std::string seen;
  for (const AgentEvent& e : events[1]) seen += std::string(event_name(e.kind)) + " " + e.detail + "; ";
  int failed = 0;
  for (const AgentEvent& e : events[1]) {
    if (e.kind != AgentEvent::Kind::group_failed) continue;
    ++failed;
    EXPECT_NE(e.detail.find("member worker2_0_0 (rank"), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("left the rendezvous for good"), std::string::npos) << e.detail;
    EXPECT_EQ(e.remaining, 1u);
  }
  EXPECT_EQ(failed, 1) << how << ": the survivor's group went on without its member: " << seen;
}

TEST_F(ElasticAgentTest, AGroupWhoseMemberLeftFailsAfterTheKeepAliveExpiry) {
  start(2, job(2, 2));
  runtime::Clock& clock1 = rt_.env(1).clock;
  runtime::Clock& clock2 = rt_.env(2).clock;
  agent_at(1, at(0ms), {.max_restarts = 1, .monitor_interval = 100ms, .exit_barrier_timeout = 5s},
           [&clock1](const WorkerGroupSpec&) { forever(clock1); });
  agent_at(2, at(0ms), {.max_restarts = 1, .monitor_interval = 100ms, .exit_barrier_timeout = 5s},
           [&clock2](const WorkerGroupSpec&) { forever(clock2); });
  at_time(2, at(5s), [&] {  // its agent was stopped (SIGTERM): it leaves without closing
    stop_agent(2);
    EXPECT_TRUE(handler(2).shutdown());
  });
  run_until(at(19s));
  EXPECT_EQ(count(1, AgentEvent::Kind::group_failed), 0) << "failed before the expiry (15 s) had passed";
  run_until(at(60s));
  expect_survivor_fails(events_, "left");
  EXPECT_EQ(agent(1).remaining_restarts(), 0u) << "a member gone for good is a worker failure: counted";
}

TEST_F(ElasticAgentTest, AGroupWhoseMemberDiedFailsWithoutReRendezvousOnExpiry) {
  rendezvous::RendezvousSettings settings = job(2, 2);
  settings.rerendezvous_on_expiry = false;  // PyTorch before the re-rendezvous note: the round goes on
  start(2, settings);
  runtime::Clock& clock1 = rt_.env(1).clock;
  runtime::Clock& clock2 = rt_.env(2).clock;
  const ElasticAgentOptions options{.max_restarts = 1, .monitor_interval = 100ms, .exit_barrier_timeout = 5s};
  agent_at(1, at(0ms), options, [&clock1](const WorkerGroupSpec&) { forever(clock1); });
  agent_at(2, at(0ms), options, [&clock2](const WorkerGroupSpec&) { forever(clock2); });
  at_time(1, at(5s), [&] { rt_.kill(2); });
  run_until(at(60s));
  expect_survivor_fails(events_, "killed");
  EXPECT_EQ(agent(1).remaining_restarts(), 0u);
}

// PyTorch's SimpleElasticAgentTest.test_record_metrics_{success,failed}_{no,with}_retries,
// test_record_flakiness_metric{,_zero_restarts,_user_exception} and test_invoke_run's "metrics
// recorded once": each run of one agent ends with the outcome's metrics, put once each, and
// flakiness by PyTorch's formula, 100 - 100 * (remaining + 1) / (max_restarts + 1).
class AgentMetrics : public ElasticAgentTest {
 protected:
  // One agent alone (min = max = 1); its worker fails its first `failures` groups, then returns.
  std::map<std::string, int64_t> run_one(uint32_t max_restarts, int failures) {
    start(1, job(1, 1));
    agent_at(1, at(0ms), {.max_restarts = max_restarts, .monitor_interval = 100ms, .exit_barrier_timeout = 2s},
             [this, failures](const WorkerGroupSpec&) {
               if (groups_++ < failures) throw errors::invalid_argument("boom");
             });
    agent(1).set_metric_listener([this](const std::string& name, int64_t) { ++puts_[name]; });
    run_until(at(30s));
    EXPECT_TRUE(run_result(1).has_value());
    return run_result(1) ? run_result(1)->metrics : std::map<std::string, int64_t>{};
  }
  // The run's outcome metrics, in PyTorch's order.
  static std::vector<int64_t> outcome(const std::map<std::string, int64_t>& m) {
    return {m.at("workers.default.run_success_with_retries"), m.at("workers.default.run_success_no_retries"),
            m.at("workers.default.run_failed_with_retries"), m.at("workers.default.run_failed_no_retries")};
  }
  int groups_ = 0;
  std::map<std::string, int> puts_;
};

TEST_F(AgentMetrics, SuccessWithNoRetries) {
  const auto m = run_one(3, 0);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded);
  EXPECT_EQ(outcome(m), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(m.at("workers.default.flakiness"), 0) << "test_record_flakiness_metric_zero_restarts";
  EXPECT_EQ(m.at("workers.default.run_total"), 1);
  EXPECT_EQ(m.at("workers.default.remaining_restarts"), 3);
  EXPECT_EQ(m.at("workers.default.succeeded"), 1) << "the monitor tick that saw the group succeed";
  EXPECT_EQ(puts_["workers.default.run_total"], 1) << "recorded once per run (test_invoke_run)";
  EXPECT_EQ(puts_["workers.default.flakiness"], 1);
}

TEST_F(AgentMetrics, SuccessWithRetries) {
  const auto m = run_one(3, 1);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded);
  EXPECT_EQ(outcome(m), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(m.at("workers.default.flakiness"), 25) << "100 - 100 * (2 + 1) / (3 + 1)";
  EXPECT_EQ(m.at("workers.default.failed"), 1) << "the tick that saw the first group fail";
}

TEST_F(AgentMetrics, FailedWithRetries) {
  const auto m = run_one(2, 100);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::failed);
  EXPECT_EQ(outcome(m), (std::vector<int64_t>{0, 0, 1, 0}));
  EXPECT_EQ(m.at("workers.default.flakiness"), 100) << "test_record_flakiness_metric_user_exception";
  EXPECT_EQ(m.at("workers.default.remaining_restarts"), 0);
}

TEST_F(AgentMetrics, FailedWithNoRetries) {
  const auto m = run_one(0, 100);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::failed);
  EXPECT_EQ(outcome(m), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(m.at("workers.default.flakiness"), 100);
}

// test_record_flakiness_metric: a partial spend of the restarts, in between.
TEST_F(AgentMetrics, FlakinessGrowsWithTheRestartsSpent) {
  const auto m = run_one(7, 4);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded);
  EXPECT_EQ(m.at("workers.default.flakiness"), 50) << "100 - 100 * (3 + 1) / (7 + 1)";
}

// SimpleElasticAgentTest.test_run_initialization_failure: a first rendezvous that fails ends run()
// failed with its error (PyTorch raises it; dagsim returns it), the state still INIT, no restart
// spent and no metrics recorded.
TEST_F(ElasticAgentTest, AFailedFirstRendezvousEndsTheRunWithItsErrorStillInInit) {
  start(1, job(1, 1));
  rt_.kill(0);  // the store is gone before anyone joins
  agent_at(1, at(0ms), {.max_restarts = 3, .monitor_interval = 100ms}, [](const WorkerGroupSpec&) {});
  (void)rt_.run(at(60s));  // idle once the agent gave up
  ASSERT_TRUE(run_result(1).has_value());
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::failed);
  ASSERT_TRUE(run_result(1)->error.has_value());
  EXPECT_EQ(run_result(1)->error->code(), ErrorCode::rendezvous_connection_failed) << run_result(1)->error->what();
  EXPECT_EQ(agent(1).state(), WorkerState::init);
  EXPECT_EQ(agent(1).remaining_restarts(), 3u);
  EXPECT_TRUE(run_result(1)->metrics.empty());
}

// SimpleElasticAgentTest.test_run_unknown_state: a group whose monitor answers a state the agent
// cannot act on ends the run (PyTorch raises), in that state, with the restarts untouched.
class UnknownGroup final : public WorkerGroup {
 public:
  WorkerGroupStatus poll() override { return {WorkerState::unknown, std::nullopt}; }
  void stop() override {}
};

TEST_F(ElasticAgentTest, AGroupInAStateTheAgentCannotActOnEndsTheRun) {
  start(1, job(1, 1));
  agent_at(1, at(0ms), {.max_restarts = 3, .monitor_interval = 100ms},
           WorkerGroupFactory([](const WorkerGroupSpec&) { return std::make_unique<UnknownGroup>(); }));
  (void)rt_.run(at(10s));
  ASSERT_TRUE(run_result(1).has_value());
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::failed);
  ASSERT_TRUE(run_result(1)->error.has_value());
  EXPECT_NE(std::string(run_result(1)->error->what()).find("in state UNKNOWN"), std::string::npos) << run_result(1)->error->what();
  EXPECT_EQ(agent(1).state(), WorkerState::unknown);
  EXPECT_EQ(agent(1).remaining_restarts(), 3u);
}

// local_elastic_agent_test.py's shutdown_called: on success the agent starts its workers once and
// stops them exactly once.
class CountingGroup final : public WorkerGroup {
 public:
  explicit CountingGroup(int& stops) : stops_(stops) {}
  WorkerGroupStatus poll() override { return {WorkerState::succeeded, std::nullopt}; }
  void stop() override { ++stops_; }

 private:
  int& stops_;
};

TEST_F(ElasticAgentTest, OnSuccessTheWorkersAreStoppedExactlyOnce) {
  start(1, job(1, 1));
  int starts = 0, stops = 0;
  agent_at(1, at(0ms), {.max_restarts = 3, .monitor_interval = 100ms, .exit_barrier_timeout = 2s},
           WorkerGroupFactory([&starts, &stops](const WorkerGroupSpec&) {
             ++starts;
             return std::make_unique<CountingGroup>(stops);
           }));
  (void)rt_.run(at(10s));
  ASSERT_TRUE(run_result(1).has_value());
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded);
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(stops, 1);
}

}  // namespace
}  // namespace dagsim::elastic
