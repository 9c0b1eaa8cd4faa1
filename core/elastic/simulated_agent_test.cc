// The elastic agent over simulated worker processes (simulated_worker_processes.h): the agent that
// `dagsim launch` runs over real processes, proven in virtual time first. Each test is one of the
// failures real workers have (a crash, a non-zero exit, a hang that ignores SIGTERM, a slow start)
// and checks what torchrun's agent does with it: the ranks and environment every worker gets, what
// a restart counts (TORCHELASTIC_RESTART_COUNT is the agent's own count of worker failures), how
// long a stop takes, and the group's states.
#include "core/elastic/simulated_worker_processes.h"

#include <gtest/gtest.h>

#include "core/elastic/elastic_agent_test_cluster.h"

namespace dagsim::elastic {
namespace {

using namespace std::chrono_literals;
using rendezvous::testing::at;
using rendezvous::testing::job;
using runtime::TimePoint;

class SimulatedAgentTest : public ::testing::Test, public testing::AgentCluster {
 protected:
  // Agent i with `local_world_size` simulated workers following `script`; its groups land in
  // groups_[i].
  void simulated_agent_at(int i, TimePoint when, ElasticAgentOptions options, SimulatedWorkerScript script,
                          runtime::Duration grace = 30s) {
    runtime::Env& env = rt_.env(static_cast<WorkerId>(i));
    options.master_endpoint = [name = env.name] { return std::make_pair(name, uint16_t{29500}); };
    agent_at(i, when, std::move(options),
             simulated_worker_group(env.clock, std::move(script), grace, {{"PATH", "/usr/bin"}}, &groups_[i]));
  }
  std::map<int, std::vector<SimulatedGroupRecord>> groups_;
};

// Every worker runs `run_time` and exits 0.
SimulatedWorkerScript succeed_after(runtime::Duration run_time) {
  return [run_time](const WorkerGroupSpec&, uint32_t) { return SimulatedWorker{.run_time = run_time}; };
}

TEST_F(SimulatedAgentTest, EveryWorkerGetsTorchrunsRanksAndEnvironment) {
  start(2, job(2, 2));
  simulated_agent_at(1, at(0ms), {.max_restarts = 3, .role = "trainer", .local_world_size = 2}, succeed_after(1s));
  simulated_agent_at(2, at(0ms), {.max_restarts = 3, .role = "trainer", .local_world_size = 3}, succeed_after(1s));
  run_until(at(30s));
  std::set<std::string> ranks;
  for (int i : {1, 2}) {
    ASSERT_TRUE(run_result(i).has_value()) << i;
    EXPECT_EQ(run_result(i)->outcome, AgentOutcome::succeeded) << seen(i);
    EXPECT_EQ(agent(i).state(), WorkerState::succeeded);
    ASSERT_EQ(groups_[i].size(), 1u);
    const SimulatedGroupRecord& group = groups_[i][0];
    ASSERT_EQ(group.environments.size(), i == 1 ? 2u : 3u);
    const uint32_t group_rank = group.spec.info.rank;
    for (size_t local = 0; local < group.environments.size(); ++local) {
      const Environment& env = group.environments[local];
      ranks.insert(env.at("RANK"));
      EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(local));
      EXPECT_EQ(env.at("WORLD_SIZE"), "5");
      EXPECT_EQ(env.at("ROLE_WORLD_SIZE"), "5");
      EXPECT_EQ(env.at("ROLE_NAME"), "trainer");
      EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), std::to_string(group.environments.size()));
      EXPECT_EQ(env.at("GROUP_RANK"), std::to_string(group_rank));
      EXPECT_EQ(env.at("GROUP_WORLD_SIZE"), "2");
      EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "0");
      EXPECT_EQ(env.at("TORCHELASTIC_MAX_RESTARTS"), "3");
      EXPECT_EQ(env.at("TORCHELASTIC_RUN_ID"), "job");
      EXPECT_EQ(env.at("PATH"), "/usr/bin") << "the agent's environment passes through";
      // Group rank 0's master, whichever node that is.
      EXPECT_EQ(env.at("MASTER_ADDR"), group.spec.members[0].addr);
      EXPECT_EQ(env.at("MASTER_PORT"), "29500");
    }
    // The agent of lower group rank holds the lower global ranks.
    const bool first = group_rank == 0;
    EXPECT_EQ(group.environments[0].at("RANK"), first ? "0" : (i == 1 ? "3" : "2"));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3", "4"}));
}

TEST_F(SimulatedAgentTest, ACrashedWorkerRestartsItsAgentCountedAndThePeerNotCounted) {
  start(2, job(2, 2));
  // Agent 1's local rank 1 is killed by signal 9 (an OOM kill) 2 s into its first attempt.
  simulated_agent_at(1, at(0ms), {.max_restarts = 3, .local_world_size = 2},
                     [](const WorkerGroupSpec& spec, uint32_t local) {
                       if (spec.round.restart_count == 0 && local == 1) {
                         return SimulatedWorker{.run_time = 2s, .end = SimulatedWorker::End::signal, .signal = 9};
                       }
                       return SimulatedWorker{.run_time = 5s};
                     });
  simulated_agent_at(2, at(0ms), {.max_restarts = 3, .local_world_size = 2}, succeed_after(5s));
  run_until(at(60s));
  for (int i : {1, 2}) {
    ASSERT_TRUE(run_result(i).has_value()) << i;
    EXPECT_EQ(run_result(i)->outcome, AgentOutcome::succeeded) << seen(i);
    ASSERT_EQ(groups_[i].size(), 2u) << seen(i);
  }
  ASSERT_EQ(count(1, AgentEvent::Kind::group_failed), 1) << seen(1);
  for (const AgentEvent& e : events_[1]) {
    if (e.kind != AgentEvent::Kind::group_failed) continue;
    EXPECT_NE(e.detail.find("worker 1 (rank "), std::string::npos) << e.detail;
    EXPECT_NE(e.detail.find("was killed by signal 9"), std::string::npos) << e.detail;
  }
  EXPECT_EQ(run_result(1)->restarts, 1u);
  EXPECT_EQ(run_result(2)->restarts, 0u) << "a peer's failure is nodes waiting, not counted";
  EXPECT_EQ(groups_[1][1].environments[0].at("TORCHELASTIC_RESTART_COUNT"), "1");
  EXPECT_EQ(groups_[2][1].environments[0].at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(groups_[1][1].spec.info.round, groups_[2][1].spec.info.round);
  // The peer's first group was stopped when the failed agent rejoined, not run to its end.
  ASSERT_TRUE(groups_[2][0].stopped.has_value());
  EXPECT_LT(*groups_[2][0].stopped, groups_[2][0].started + 5s);
}

TEST_F(SimulatedAgentTest, AWorkerThatAlwaysExitsNonZeroSpendsMaxRestartsThenTheJobFailsNamingIt) {
  start(2, job(2, 2));
  simulated_agent_at(1, at(0ms), {.max_restarts = 2},
                     [](const WorkerGroupSpec&, uint32_t) { return SimulatedWorker{.run_time = 1s, .exit_code = 3}; });
  simulated_agent_at(2, at(0ms), {.max_restarts = 2}, succeed_after(1h));
  run_until(at(120s));
  ASSERT_TRUE(run_result(1).has_value());
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::failed);
  EXPECT_EQ(agent(1).state(), WorkerState::failed);
  EXPECT_EQ(groups_[1].size(), 3u) << "the first attempt and max_restarts = 2 more";
  ASSERT_TRUE(run_result(1)->error.has_value());
  const std::string what = run_result(1)->error->what();
  EXPECT_EQ(run_result(1)->error->code(), ErrorCode::worker_group_failed);
  EXPECT_NE(what.find("max_restarts = 2 spent"), std::string::npos) << what;
  EXPECT_NE(what.find("worker 0 (rank "), std::string::npos) << what;
  EXPECT_NE(what.find("exited with code 3"), std::string::npos) << what;
  EXPECT_EQ(groups_[1][2].environments[0].at("TORCHELASTIC_RESTART_COUNT"), "2");
}

// PyTorch's api_test.py test_run_max_retries_exceeded, for both states it runs: a group that
// reports UNHEALTHY is restarted as a FAILED one is, counted, and fails the job once max_restarts
// are spent (the agent used to monitor it for ever).
TEST_F(SimulatedAgentTest, AnUnhealthyGroupIsRestartedAsAFailedOneUntilMaxRestartsAreSpent) {
  start(1, job(1, 1));
  simulated_agent_at(1, at(0ms), {.max_restarts = 2},
                     [](const WorkerGroupSpec&, uint32_t) { return SimulatedWorker{.run_time = 1s, .end = SimulatedWorker::End::unhealthy}; });
  run_until(at(120s));
  ASSERT_TRUE(run_result(1).has_value()) << "the agent still monitors an UNHEALTHY group: " << seen(1);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::failed);
  EXPECT_EQ(run_result(1)->restarts, 2u);
  EXPECT_EQ(agent(1).state(), WorkerState::failed);
  EXPECT_EQ(groups_[1].size(), 3u) << "the first attempt and max_restarts = 2 more";
  EXPECT_EQ(count(1, AgentEvent::Kind::group_failed), 3) << seen(1);
  ASSERT_TRUE(run_result(1)->error.has_value());
  EXPECT_EQ(run_result(1)->error->code(), ErrorCode::worker_group_failed);
  const std::string what = run_result(1)->error->what();
  EXPECT_NE(what.find("max_restarts = 2 spent"), std::string::npos) << what;
  EXPECT_NE(what.find("was reported UNHEALTHY"), std::string::npos) << what;
  for (const SimulatedGroupRecord& g : groups_[1]) EXPECT_TRUE(g.stopped.has_value()) << "an UNHEALTHY group is stopped before the next";
}

TEST_F(SimulatedAgentTest, AHungWorkerThatIgnoresSigtermHoldsTheStopForTheGraceThenIsKilled) {
  start(2, job(2, 2));
  // Agent 2's workers hang and ignore SIGTERM; agent 1's first attempt fails at 3 s.
  simulated_agent_at(1, at(0ms), {.max_restarts = 1},
                     [](const WorkerGroupSpec& spec, uint32_t) {
                       return SimulatedWorker{.run_time = spec.round.restart_count == 0 ? 3s : 1s,
                                              .exit_code = spec.round.restart_count == 0 ? 1 : 0};
                     });
  auto first_round = std::make_shared<std::optional<uint64_t>>();
  simulated_agent_at(
      2, at(0ms), {.max_restarts = 1},
      [first_round](const WorkerGroupSpec& spec, uint32_t) {
        if (!*first_round) *first_round = spec.info.round;
        if (spec.info.round == **first_round) return SimulatedWorker{.end = SimulatedWorker::End::hang, .ignores_sigterm = true};
        return SimulatedWorker{.run_time = 1s};
      },
      /*grace=*/7s);
  run_until(at(30s));
  ASSERT_EQ(groups_[2].size(), 2u) << seen(2);
  const SimulatedGroupRecord& hung = groups_[2][0];
  ASSERT_TRUE(hung.stopped.has_value());
  // The peer rejoined at about 3 s; agent 2 saw it waiting within a monitor interval and stopped
  // its group, which took the whole grace.
  EXPECT_GE(*hung.stopped, at(10s));
  EXPECT_LE(*hung.stopped, at(11s));
  EXPECT_GE(groups_[2][1].started, *hung.stopped) << "the next group started before the hung one was killed";
  for (int i : {1, 2}) {
    ASSERT_TRUE(run_result(i).has_value()) << i;
    EXPECT_EQ(run_result(i)->outcome, AgentOutcome::succeeded) << seen(i);
  }
}

TEST_F(SimulatedAgentTest, ASlowStartKeepsTheGroupHealthyUntilItsWorkersEnd) {
  start(1, job(1, 1));
  simulated_agent_at(1, at(0ms), {.max_restarts = 0},
                     [](const WorkerGroupSpec&, uint32_t) { return SimulatedWorker{.start_delay = 20s, .run_time = 1s}; });
  run_until(at(15s));
  EXPECT_FALSE(run_result(1).has_value());
  EXPECT_EQ(agent(1).state(), WorkerState::healthy);
  run_until(at(30s));
  ASSERT_TRUE(run_result(1).has_value());
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded);
  EXPECT_GE(done_at_[1], at(21s));
}

TEST_F(SimulatedAgentTest, AnAgentWhosePeerNeverPublishesItsRoleRendezvousesAgainNotCounted) {
  start(2, job(1, 2));
  simulated_agent_at(1, at(0ms), {.max_restarts = 0}, succeed_after(1s));
  join_at(2, at(0ms));  // a member that completes the round but runs no agent: it never publishes
  at_time(2, at(5s), [&] { EXPECT_TRUE(handler(2).shutdown()); });
  run_until(at(120s));
  EXPECT_GE(count(1, AgentEvent::Kind::round_lost), 1) << seen(1);
  ASSERT_TRUE(run_result(1).has_value()) << seen(1);
  EXPECT_EQ(run_result(1)->outcome, AgentOutcome::succeeded) << seen(1);
  EXPECT_EQ(run_result(1)->restarts, 0u);
  ASSERT_EQ(groups_[1].size(), 1u);
  EXPECT_EQ(groups_[1][0].environments[0].at("WORLD_SIZE"), "1") << "it went on alone, in a later round";
}

// PyTorch's WorkerStateTest.test_is_running and SimpleElasticAgentTest.test_agent_constructor.
TEST(WorkerState, OnlyHealthyAndUnhealthyAreRunningAndTheNamesArePyTorchs) {
  const std::vector<std::pair<WorkerState, const char*>> states = {
      {WorkerState::unknown, "UNKNOWN"}, {WorkerState::init, "INIT"},           {WorkerState::healthy, "HEALTHY"},
      {WorkerState::unhealthy, "UNHEALTHY"}, {WorkerState::stopped, "STOPPED"}, {WorkerState::succeeded, "SUCCEEDED"},
      {WorkerState::failed, "FAILED"}};
  for (const auto& [state, name] : states) {
    EXPECT_STREQ(worker_state_name(state), name);
    EXPECT_EQ(is_running(state), state == WorkerState::healthy || state == WorkerState::unhealthy) << name;
  }
}

TEST_F(SimulatedAgentTest, ANewAgentIsInitWithEveryRestartLeft) {
  start(1, job(1, 1));
  simulated_agent_at(1, at(1h), {.max_restarts = 7}, succeed_after(1s));
  EXPECT_EQ(agent(1).state(), WorkerState::init);
  EXPECT_EQ(agent(1).remaining_restarts(), 7u);
  EXPECT_FALSE(agent(1).group_spec().has_value());
}

}  // namespace
}  // namespace dagsim::elastic
