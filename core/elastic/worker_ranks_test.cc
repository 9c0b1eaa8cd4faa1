// Worker ranks and environment (worker_ranks.h) against PyTorch 1.13's rules and against what
// torchrun gave a worker on this project's machines.
#include "core/elastic/worker_ranks.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/base/throws_error_test_util.h"

namespace dagsim::elastic {
namespace {

std::vector<uint64_t> global_ranks(const std::vector<WorkerRanks>& workers) {
  std::vector<uint64_t> out;
  for (const WorkerRanks& w : workers) out.push_back(w.global_rank);
  return out;
}

std::vector<uint64_t> role_ranks(const std::vector<WorkerRanks>& workers) {
  std::vector<uint64_t> out;
  for (const WorkerRanks& w : workers) out.push_back(w.role_rank);
  return out;
}

TEST(WorkerRanks, OneRoleNumbersWorkersByGroupRankThenLocalRank) {
  const std::vector<AgentRoleInfo> agents = {{"default", 0, 2}, {"default", 1, 3}, {"default", 2, 1}};
  const std::vector<WorkerRanks> w = assign_worker_ranks(agents, 1);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(global_ranks(w), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(role_ranks(w), (std::vector<uint64_t>{2, 3, 4}));
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(w[i].local_rank, i);
    EXPECT_EQ(w[i].world_size, 6u);
    EXPECT_EQ(w[i].role_world_size, 6u);
  }
  EXPECT_EQ(global_ranks(assign_worker_ranks(agents, 0)), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(global_ranks(assign_worker_ranks(agents, 2)), (std::vector<uint64_t>{5}));
}

TEST(WorkerRanks, RolesRankTheirWorkersAmongThemselvesInGroupRankOrder) {
  // Global ranks follow group ranks whatever the roles; role ranks count the role's agents only.
  const std::vector<AgentRoleInfo> agents = {{"trainer", 0, 2}, {"ps", 1, 1}, {"trainer", 2, 3}, {"ps", 3, 2}};
  const std::vector<WorkerRanks> trainer = assign_worker_ranks(agents, 2);
  EXPECT_EQ(global_ranks(trainer), (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_EQ(role_ranks(trainer), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(trainer[0].world_size, 8u);
  EXPECT_EQ(trainer[0].role_world_size, 5u);
  const std::vector<WorkerRanks> ps = assign_worker_ranks(agents, 3);
  EXPECT_EQ(global_ranks(ps), (std::vector<uint64_t>{6, 7}));
  EXPECT_EQ(role_ranks(ps), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(ps[0].role_world_size, 3u);
  EXPECT_EQ(role_ranks(assign_worker_ranks(agents, 1)), (std::vector<uint64_t>{0}));
  EXPECT_EQ(role_ranks(assign_worker_ranks(agents, 0)), (std::vector<uint64_t>{0, 1}));
}

TEST(WorkerRanks, AgentsThatDisagreeWithTheirPlaceAreRefusedNamingThem) {
  const std::vector<AgentRoleInfo> swapped = {{"default", 1, 2}, {"default", 0, 2}};
  EXPECT_TRUE(throws_error([&] { assign_worker_ranks(swapped, 0); }, ErrorCode::invalid_argument,
                           {"agent 0 (role \"default\") says it has group rank 1"}));
  const std::vector<AgentRoleInfo> empty_agent = {{"default", 0, 2}, {"default", 1, 0}};
  EXPECT_TRUE(throws_error([&] { assign_worker_ranks(empty_agent, 0); }, ErrorCode::invalid_argument,
                           {"agent 1", "has 0 workers"}));
  const std::vector<AgentRoleInfo> one = {{"default", 0, 1}};
  EXPECT_TRUE(throws_error([&] { assign_worker_ranks(one, 1); }, ErrorCode::invalid_argument,
                           {"group rank 1 is not among the 1 agents"}));
}

// What torchrun 1.13.1 (Debian 12's python3-torch) gave its worker of local rank 1 for
// `--nnodes 1:2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_id job1 --max_restarts 3`, beyond
// the launching shell's own variables (measured 2026-11-26; the port is free-chosen and the error
// file's folder random, so they are set here from the round).
TEST(WorkerEnvironment, EqualsTorchrunsForTheSameJob) {
  const Environment shell = {{"HOME", "/root"}, {"PATH", "/usr/bin:/bin"}};
  const Environment agent = launcher_environment(shell, 2);
  WorkerRound round;
  round.run_id = "job1";
  round.local_world_size = 2;
  round.master_addr = "localhost";
  round.master_port = 56875;
  round.max_restarts = 3;
  round.attempt_dir = "/tmp/trun/logs/job1_jcwo7pw0/attempt_0";
  const std::vector<WorkerRanks> workers = assign_worker_ranks(std::vector<AgentRoleInfo>{{"default", 0, 2}}, 0);
  Environment expected = shell;
  expected.insert({{"GROUP_RANK", "0"},
                   {"GROUP_WORLD_SIZE", "1"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "localhost"},
                   {"MASTER_PORT", "56875"},
                   {"NCCL_ASYNC_ERROR_HANDLING", "1"},
                   {"OMP_NUM_THREADS", "1"},
                   {"RANK", "1"},
                   {"ROLE_NAME", "default"},
                   {"ROLE_RANK", "1"},
                   {"ROLE_WORLD_SIZE", "2"},
                   {"TORCHELASTIC_ERROR_FILE", "/tmp/trun/logs/job1_jcwo7pw0/attempt_0/1/error.json"},
                   {"TORCHELASTIC_MAX_RESTARTS", "3"},
                   {"TORCHELASTIC_RESTART_COUNT", "0"},
                   {"TORCHELASTIC_RUN_ID", "job1"},
                   {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                   {"WORLD_SIZE", "2"}});
  EXPECT_EQ(worker_environment(agent, round, workers.at(1)), expected);
}

TEST(WorkerEnvironment, TheAgentsOwnSettingsPassThroughAndTheWorkersOverrideTheRest) {
  const Environment agent = {{"NCCL_ASYNC_ERROR_HANDLING", "0"}, {"OMP_NUM_THREADS", "8"}, {"RANK", "99"},
                             {"TORCHELASTIC_TIMER_FILE", "/tmp/t"}};
  // torchrun leaves an OMP_NUM_THREADS it was given alone, and sets none for one worker per node.
  EXPECT_EQ(launcher_environment(agent, 4).at("OMP_NUM_THREADS"), "8");
  EXPECT_FALSE(launcher_environment({}, 1).contains("OMP_NUM_THREADS"));
  WorkerRound round;
  round.restart_count = 2;
  round.use_agent_store = true;
  const Environment env = worker_environment(agent, round, WorkerRanks{});
  EXPECT_EQ(env.at("NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(env.at("TORCHELASTIC_TIMER_FILE"), "/tmp/t");
  EXPECT_EQ(env.at("RANK"), "0");
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
}

TEST(WorkerEnvironment, AProcessEnvironmentRoundTrips) {
  char a[] = "A=1";
  char b[] = "B=x=y";
  char bad[] = "NOEQUALS";
  char empty[] = "E=";
  char* environ[] = {a, b, bad, empty, nullptr};
  const Environment env = environment_of(environ);
  EXPECT_EQ(env, (Environment{{"A", "1"}, {"B", "x=y"}, {"E", ""}}));
  EXPECT_EQ(environ_strings(env), (std::vector<std::string>{"A=1", "B=x=y", "E="}));
}

// PyTorch: RoleInstanceInfoTest.test_compare. By role, then by group rank.
TEST(RoleInfo, OrdersByRoleThenGroupRank) {
  const AgentRoleInfo a{"trainer", 0, 4}, b{"trainer", 1, 1}, c{"master", 2, 8};
  EXPECT_TRUE(role_order(a, b));
  EXPECT_FALSE(role_order(b, a));
  EXPECT_TRUE(role_order(c, a)) << "\"master\" < \"trainer\" whatever the ranks";
  EXPECT_FALSE(role_order(a, a));
}

// PyTorch: RoleInstanceInfoTest.test_serde. What an agent publishes reads back as itself (here
// "<local world size> <role>", not PyTorch's JSON: only dagsim agents read it), and what another
// process wrote is checked, never trusted.
TEST(RoleInfo, RoundTripsThroughTheStoresBytesAndRefusesAnythingElse) {
  const AgentRoleInfo info{"parameter server", 3, 12};
  const std::string text = encode_role_info(info);
  const std::vector<uint8_t> bytes(text.begin(), text.end());
  EXPECT_EQ(decode_role_info(bytes, 3), info);
  for (const std::string& bad : std::vector<std::string>{"", "12", "12 ", " trainer", "0 trainer", "x trainer", "65537 trainer", "1234567 t",
                                "1 " + std::string(257, 'r')}) {
    const std::vector<uint8_t> b(bad.begin(), bad.end());
    try {
      (void)decode_role_info(b, 5);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("group rank 5"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dagsim::elastic
