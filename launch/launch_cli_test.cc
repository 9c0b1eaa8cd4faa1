// `dagsim launch` run as a user runs torchrun: PyTorch 1.13's run_test.py (ElasticLaunchTest), ported
// by name onto real `dagsim launch` processes with shell-script workers (--no_python), so no torch
// is needed. Each worker writes the variables torchrun's contract gives it to a file named by its
// RANK; the tests read them back. docs/elastic_parity.md maps every run_test.py test.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "net/etcd/etcd_process.h"
#include "launch/launch_test_util.h"
#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli {
namespace {

using namespace testing;

// A worker: writes "NAME=VALUE" lines of its contract to OUT/rank_<RANK>, then exits with the code
// FAIL_RANK_<RANK> names (0 if unset), as a failing training script would.
const fs::path& worker_script() {
  static const fs::path path = [] {
    const fs::path p = temp_dir() / "worker.sh";
    std::ofstream(p) << "#!/bin/sh\n"
                        "out=\"$1\"\n"
                        "for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_NAME ROLE_RANK "
                        "ROLE_WORLD_SIZE "
                        "TORCHELASTIC_RUN_ID TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS MASTER_ADDR; do\n"
                        "  eval \"echo $v=\\$$v\"\n"
                        "done > \"$out/rank_$RANK\"\n"
                        "eval \"code=\\${FAIL_RANK_$RANK:-0}\"\n"
                        "exit $code\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }();
  return path;
}

class LaunchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = temp_dir() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(out_);
  }
  // What each rank wrote: RANK -> (NAME -> VALUE).
  std::map<int, std::map<std::string, std::string>> ranks() const {
    std::map<int, std::map<std::string, std::string>> out;
    for (const auto& entry : fs::directory_iterator(out_)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("rank_")) continue;
      std::istringstream lines(slurp(entry.path()));
      std::map<std::string, std::string> vars;
      for (std::string line; std::getline(lines, line);) {
        const size_t eq = line.find('=');
        if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
      }
      out[std::stoi(name.substr(5))] = vars;
    }
    return out;
  }
  std::vector<std::string> worker() const { return {"--no_python", worker_script().string(), out_.string()}; }
  std::vector<std::string> with(std::vector<std::string> flags) const {
    for (const std::string& w : worker()) flags.push_back(w);
    return flags;
  }
  // Flags for a c10d rendezvous on `port` (this agent hosts the store when is_host).
  static std::vector<std::string> c10d(uint16_t port, bool is_host, const std::string& extra = "") {
    return {"--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:" + std::to_string(port), "--rdzv_id", "job",
            "--rdzv_conf", std::string("is_host=") + (is_host ? "true" : "false") + (extra.empty() ? "" : "," + extra),
            "--monitor_interval", "0.2"};
  }

  fs::path out_;
};

// test_launch_user_script_bash: --no_python runs the command itself, one process per local rank;
// with --module too it is refused before anything starts. test_is_torchelastic_launched: the
// workers see TORCHELASTIC_RUN_ID (what torch.distributed.is_torchelastic_launched() reads).
TEST_F(LaunchCli, UserScriptBashRunsEachWorkerWithItsRank) {
  Launch launch(with({"--standalone", "--nproc_per_node", "4", "--monitor_interval", "0.2"}));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto r = ranks();
  ASSERT_EQ(r.size(), 4u) << launch.err();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(r.at(rank).at("LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(r.at(rank).at("WORLD_SIZE"), "4");
    EXPECT_EQ(r.at(rank).at("LOCAL_WORLD_SIZE"), "4");
    EXPECT_EQ(r.at(rank).at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(r.at(rank).at("TORCHELASTIC_RUN_ID").size(), 32u) << "--standalone's fresh run id";
  }
  Launch refused(with({"--standalone", "--module", "--monitor_interval", "0.2"}));
  EXPECT_EQ(refused.wait(), 2);
  EXPECT_NE(refused.err().find("--no_python and --module"), std::string::npos) << refused.err();
}

// test_launch_user_script_default_nproc: one worker unless told otherwise.
TEST_F(LaunchCli, DefaultNprocIsOne) {
  Launch launch(with({"--standalone", "--monitor_interval", "0.2"}));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto r = ranks();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.at(0).at("WORLD_SIZE"), "1");
}

// test_launch_with_env_vars: PET_<FLAG> stands for each flag.
TEST_F(LaunchCli, PetVariablesStandForFlags) {
  const uint16_t port = free_port();
  Launch launch(worker(), {{"PET_NNODES", "1"},
                           {"PET_NPROC_PER_NODE", "3"},
                           {"PET_RDZV_BACKEND", "c10d"},
                           {"PET_RDZV_ENDPOINT", "127.0.0.1:" + std::to_string(port)},
                           {"PET_RDZV_ID", "petjob"},
                           {"PET_RDZV_CONF", "is_host=true"},
                           {"PET_MAX_RESTARTS", "2"},
                           {"PET_MONITOR_INTERVAL", "0.2"},
                           {"PET_ROLE", "trainer"}});
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto r = ranks();
  ASSERT_EQ(r.size(), 3u) << launch.err();
  EXPECT_EQ(r.at(2).at("TORCHELASTIC_RUN_ID"), "petjob");
  EXPECT_EQ(r.at(2).at("TORCHELASTIC_MAX_RESTARTS"), "2");
  EXPECT_EQ(r.at(2).at("ROLE_NAME"), "trainer");
}

// test_launch_elastic: --nnodes 1:2 with one agent forms a round of one once the last call ends.
TEST_F(LaunchCli, ElasticRangeWithOneAgentFormsAfterTheLastCall) {
  const uint16_t port = free_port();
  std::vector<std::string> flags = c10d(port, true, "last_call_timeout=1");
  flags.insert(flags.end(), {"--nnodes", "1:2", "--nproc_per_node", "2"});
  Launch launch(with(flags));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto r = ranks();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.at(1).at("GROUP_WORLD_SIZE"), "1");
  EXPECT_EQ(r.at(1).at("WORLD_SIZE"), "2");
}

// test_launch_elastic_worker_raise_exception: a worker that fails fails the launch (after its
// restarts), exit 1, naming the rank and its exit code.
TEST_F(LaunchCli, AFailingWorkerFailsTheLaunchNamingItsRank) {
  const fs::path events = out_ / "events.jsonl";
  Launch launch(with({"--standalone", "--nproc_per_node", "2", "--max_restarts", "1", "--monitor_interval", "0.2",
                      "--events", events.string()}),
                {{"FAIL_RANK_1", "3"}});
  EXPECT_EQ(launch.wait(), 1) << launch.err();
  const std::string err = launch.err();
  EXPECT_NE(err.find("max_restarts = 1 spent"), std::string::npos) << err;
  EXPECT_NE(err.find("worker 1 (rank 1) of round 1 exited with code 3"), std::string::npos) << err;
  EXPECT_EQ(ranks().at(1).at("TORCHELASTIC_RESTART_COUNT"), "1") << "restarted once, then failed";
  // The events: the agent's with PyTorch's metadata (SimpleElasticAgentTest.test_get_event), one
  // WORKER event per worker of the last group (test_get_worker_status_event: agent_restarts is
  // max_restarts - remaining), then the run's metrics, as PyTorch's agent puts them.
  std::istringstream lines(slurp(events));
  std::vector<nlohmann::json> all;
  for (std::string line; std::getline(lines, line);) all.push_back(nlohmann::json::parse(line));
  ASSERT_GE(all.size(), 4u);
  const nlohmann::json& first = all.front();
  EXPECT_EQ(first["source"], "AGENT") << first;
  EXPECT_EQ(first["rdzv_backend"], "c10d") << first;
  EXPECT_EQ(first["role"], "default") << first;
  EXPECT_EQ(first["agent_restarts"], 0) << first;
  std::set<uint64_t> worker_ranks;
  for (const nlohmann::json& e : all) {
    if (e.value("source", "") != "WORKER") continue;
    EXPECT_EQ(e["event"], "torchelastic.worker.status.FAILED") << e;
    EXPECT_EQ(e["agent_restarts"], 1) << e;
    EXPECT_NE(e["raw_error"].get<std::string>().find("exited with code 3"), std::string::npos) << e;
    worker_ranks.insert(e["global_rank"].get<uint64_t>());
  }
  EXPECT_EQ(worker_ranks, (std::set<uint64_t>{0, 1}));
  const std::string last = all.back().dump();
  const nlohmann::json metrics = all.back();
  EXPECT_EQ(metrics["event"], "metrics") << last;
  EXPECT_EQ(metrics["metrics"]["workers.default.run_failed_with_retries"], 1) << last;
  EXPECT_EQ(metrics["metrics"]["workers.default.flakiness"], 100) << last;
}

// Issue 49: --events /dev/full exited 0 with every event lost. A write of the events that fails
// is said at once naming the file, the job goes on (its workers run), and the launch exits 2, as
// any output that cannot be written does (docs/cli.md).
TEST_F(LaunchCli, EventsThatCannotBeWrittenFailTheLaunchNamingTheFile) {
  Launch launch(with({"--standalone", "--nproc_per_node", "2", "--monitor_interval", "0.2", "--events", "/dev/full"}));
  EXPECT_EQ(launch.wait(), 2) << launch.err();
  const std::string err = launch.err();
  EXPECT_NE(err.find("cannot write the events to \"/dev/full\": No space left on device"), std::string::npos) << err;
  EXPECT_NE(err.find("exit 2: the events were not all written to \"/dev/full\""), std::string::npos) << err;
  EXPECT_EQ(ranks().size(), 2u) << "the job itself went on";
}

// test_launch_elastic_agent_raise_exception: the agent's own failure (here: no store at the
// endpoint) ends the launch with an error naming it.
TEST_F(LaunchCli, AnAgentThatCannotReachItsStoreFailsNamingTheEndpoint) {
  const uint16_t port = free_port();
  Launch launch(with(c10d(port, false, "read_timeout=2,join_timeout=3")));
  EXPECT_NE(launch.wait(), 0);
  const std::string err = launch.err();
  EXPECT_NE(err.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << err;
  EXPECT_TRUE(ranks().empty()) << "no worker started";
}

// Issue 49: --rdzv_id names the run's log folder, <log_dir>/<id>_<random>; torchrun's "../../x"
// writes above the log folder. Refused here with exit 2 naming the flag, before any folder or
// worker exists.
TEST_F(LaunchCli, APathLikeRdzvIdIsRefusedBeforeAnythingIsMade) {
  const fs::path logs = out_ / "logs" / "deep";
  for (const std::string id : {"../../x", "/x", "sub/x"}) {
    std::vector<std::string> flags = c10d(free_port(), true);
    flags[5] = id;  // c10d()'s --rdzv_id value
    flags.insert(flags.end(), {"--log_dir", logs.string()});
    Launch launch(with(flags));
    EXPECT_EQ(launch.wait(), 2) << launch.err();
    EXPECT_NE(launch.err().find("--rdzv_id \"" + id + "\": the run id names the log folder"), std::string::npos) << launch.err();
  }
  EXPECT_FALSE(fs::exists(out_ / "logs")) << "a log folder was made";
  for (const auto& entry : fs::directory_iterator(out_)) ADD_FAILURE() << "made: " << entry.path();
}

// Issue 49: a run id (or any text a flag chose) reaches the terminal escaped, never as the bytes a
// terminal acts on; the workers still get it byte for byte (it is the store's key prefix too).
TEST_F(LaunchCli, ARdzvIdWithControlCharactersIsPrintedEscapedAndGivenToWorkersAsIs) {
  const std::string id = "job\x1b]0;owned\x07\x1b[31mred";
  std::vector<std::string> flags = c10d(free_port(), true);
  flags[5] = id;
  flags.insert(flags.end(), {"--log_dir", (out_ / "logs").string()});
  Launch launch(with(flags));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const std::string err = launch.err();
  EXPECT_EQ(err.find('\x1b'), std::string::npos) << "a raw escape reached the terminal: " << err;
  EXPECT_EQ(err.find('\x07'), std::string::npos) << err;
  EXPECT_NE(err.find("run \"job\\u001b]0;owned\\u0007\\u001b[31mred\""), std::string::npos) << err;
  const auto r = ranks();
  ASSERT_EQ(r.size(), 1u) << err;
  EXPECT_EQ(r.at(0).at("TORCHELASTIC_RUN_ID"), id);
  // Its log folder is inside --log_dir, named by the id as it is.
  size_t folders = 0;
  for (const auto& entry : fs::directory_iterator(out_ / "logs")) folders += entry.path().filename().string().starts_with(id + "_");
  EXPECT_EQ(folders, 1u);
}

// test_launch_elastic_multiple_agents: two agents x four workers form one world of eight, with
// group ranks 0 and 1 and global ranks 0..7.
TEST_F(LaunchCli, TwoAgentsFormOneWorldOfEight) {
  const uint16_t port = free_port();
  std::vector<std::string> host = c10d(port, true), guest = c10d(port, false);
  for (auto* f : {&host, &guest}) f->insert(f->end(), {"--nnodes", "2", "--nproc_per_node", "4"});
  Launch a(with(host));
  Launch b(with(guest));
  ASSERT_EQ(a.wait(), 0) << a.err();
  ASSERT_EQ(b.wait(), 0) << b.err();
  const auto r = ranks();
  ASSERT_EQ(r.size(), 8u);
  std::set<std::string> groups;
  for (const auto& [rank, vars] : r) {
    EXPECT_EQ(vars.at("WORLD_SIZE"), "8");
    EXPECT_EQ(vars.at("GROUP_WORLD_SIZE"), "2");
    groups.insert(vars.at("GROUP_RANK"));
  }
  EXPECT_EQ(groups, (std::set<std::string>{"0", "1"}));
}

// What a store holds is anyone's to write (a TCPStore has no authentication, a file store is a
// file): a value that does not read is the job's failure, exit 1 naming it, never exit 3 and no
// worker started (issue 49: launch_corrupt_state_exit3, filestore_sparse_bad_alloc). Here through
// a file store, whose content the test writes: a corrupt rendezvous state, a last version at
// 2^64-1, a sparse 64 GiB file, a FIFO.
TEST_F(LaunchCli, ABadValueInTheStoreFailsTheLaunchNamingIt) {
  const auto store_file = [](uint64_t last_version, const std::string& key, const std::string& value) {
    const auto u64 = [](std::string& out, uint64_t v) {
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
    };
    std::string out = "DGFS0001";
    u64(out, last_version);
    u64(out, key.empty() ? 0 : 1);
    if (!key.empty()) {
      u64(out, last_version);
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(key.size() >> (8 * i)));
      u64(out, value.size());
      out += key + value;
    }
    return out;
  };
  const fs::path corrupt = out_ / "corrupt", top = out_ / "top", sparse = out_ / "sparse", fifo = out_ / "fifo";
  std::ofstream(corrupt, std::ios::binary) << store_file(1, "torch.rendezvous.job", "garbage");
  std::ofstream(top, std::ios::binary) << store_file(UINT64_MAX, "", "");
  std::ofstream(sparse).close();
  fs::resize_file(sparse, uint64_t{64} << 30);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::pair<fs::path, std::vector<std::string>> cases[] = {
      {corrupt, {"the state under key torch.rendezvous.job (version 1) is corrupt"}},
      {top, {"file store " + top.string(), "its last version is 2^64-1"}},
      {sparse, {"file store " + sparse.string(), "68719476736 bytes, over the limit of 512 MiB"}},
      {fifo, {"file store " + fifo.string(), "not a regular file"}},
  };
  for (const auto& [path, says] : cases) {
    Launch launch(with({"--rdzv_backend", "c10d", "--rdzv_endpoint", path.string(), "--rdzv_id", "job", "--rdzv_conf",
                        "store_type=file,join_timeout=8"}));
    EXPECT_EQ(launch.wait(), 1) << launch.err();
    const std::string err = launch.err();
    for (const std::string& s : says) EXPECT_NE(err.find(s), std::string::npos) << path << ": " << err;
    EXPECT_EQ(err.find("internal error"), std::string::npos) << err;
  }
  EXPECT_TRUE(ranks().empty()) << "no worker started";
}

// The close rule on real processes (docs/invariants.md, "When the job is closed", the same
// AgentLife the simulator proves): an agent whose join timed out fails (exit 1) but does not close
// the job, so the agents that come later form it with the one still waiting and finish. Under
// torchrun's rule (close on every end but a signal) the waiting agent would end with the
// rendezvous closed and the later ones would find it closed.
TEST_F(LaunchCli, AnAgentWhoseJoinTimedOutLeavesTheJobOpenForTheOthers) {
  const uint16_t port = free_port();
  std::vector<std::string> host = c10d(port, true, "join_timeout=120"), early = c10d(port, false, "join_timeout=2");
  for (auto* f : {&host, &early}) f->insert(f->end(), {"--nnodes", "3"});
  Launch a(with(host));
  Launch timed_out(with(early));
  ASSERT_EQ(timed_out.wait(), 1) << timed_out.err();
  EXPECT_NE(timed_out.err().find("failed after"), std::string::npos) << timed_out.err();
  std::vector<std::string> late = c10d(port, false, "join_timeout=120");
  late.insert(late.end(), {"--nnodes", "3"});
  Launch b(with(late));
  Launch c(with(late));
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_EQ(b.wait(), 0) << b.err();
  EXPECT_EQ(c.wait(), 0) << c.err();
  EXPECT_EQ(ranks().size(), 3u);
}

// test_launch_user_script_python: four workers on an etcd rendezvous (Debian's etcd-server).
TEST_F(LaunchCli, FourWorkersOnEtcd) {
  if (const auto why = net::etcd::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  net::etcd::EtcdProcess etcd;
  Launch launch(with({"--rdzv_backend", "etcd", "--rdzv_endpoint",
                      etcd.endpoint().host + ":" + std::to_string(etcd.endpoint().port), "--rdzv_id", "etcdjob",
                      "--nproc_per_node", "4", "--monitor_interval", "0.2"}));
  ASSERT_EQ(launch.wait(), 0) << launch.err();
  const auto r = ranks();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.at(3).at("TORCHELASTIC_RUN_ID"), "etcdjob");
}

// local_elastic_agent_test.py's correct_rank_assignment_{heterogeneous,homogeneous}: agents of
// several roles and sizes form one world. Per role, ROLE_WORLD_SIZE is the role's workers and the
// role ranks are 0..n-1; the global ranks are 0..N-1; each agent's global and role ranks are
// consecutive in its local ranks.
class RoleAssignment : public LaunchCli {
 protected:
  void check(const std::vector<std::pair<std::string, int>>& agents) {
    const uint16_t port = free_port();
    const std::string n = std::to_string(agents.size());
    std::vector<std::unique_ptr<Launch>> launches;
    int total = 0;
    std::map<std::string, int> role_size;
    for (size_t i = 0; i < agents.size(); ++i) {
      std::vector<std::string> flags = c10d(port, i == 0, "join_timeout=60");
      flags.insert(flags.end(), {"--nnodes", n, "--nproc_per_node", std::to_string(agents[i].second), "--role", agents[i].first});
      launches.push_back(std::make_unique<Launch>(with(flags)));
      total += agents[i].second;
      role_size[agents[i].first] += agents[i].second;
    }
    for (auto& l : launches) ASSERT_EQ(l->wait(), 0) << l->err();
    const auto r = ranks();
    ASSERT_EQ(static_cast<int>(r.size()), total);
    std::map<std::string, std::set<int>> role_ranks;
    std::map<std::string, std::vector<std::pair<int, std::pair<int, int>>>> by_agent;  // group rank -> (local, (global, role))
    for (const auto& [rank, vars] : r) {
      EXPECT_EQ(vars.at("WORLD_SIZE"), std::to_string(total));
      const std::string role = vars.at("ROLE_NAME");
      EXPECT_EQ(vars.at("ROLE_WORLD_SIZE"), std::to_string(role_size.at(role))) << role;
      role_ranks[role].insert(std::stoi(vars.at("ROLE_RANK")));
      by_agent[vars.at("GROUP_RANK")].push_back({std::stoi(vars.at("LOCAL_RANK")), {rank, std::stoi(vars.at("ROLE_RANK"))}});
    }
    EXPECT_EQ(r.begin()->first, 0);
    EXPECT_EQ(r.rbegin()->first, total - 1);
    for (const auto& [role, got] : role_ranks) {
      EXPECT_EQ(static_cast<int>(got.size()), role_size.at(role)) << role;
      EXPECT_EQ(*got.begin(), 0) << role;
      EXPECT_EQ(*got.rbegin(), role_size.at(role) - 1) << role;
    }
    for (auto& [group, workers] : by_agent) {
      std::sort(workers.begin(), workers.end());
      for (size_t i = 1; i < workers.size(); ++i) {
        EXPECT_EQ(workers[i].second.first, workers[i - 1].second.first + 1) << "group rank " << group << ": global ranks";
        EXPECT_EQ(workers[i].second.second, workers[i - 1].second.second + 1) << "group rank " << group << ": role ranks";
      }
    }
  }
};

TEST_F(RoleAssignment, Heterogeneous) {
  check({{"master", 8}, {"trainer", 1}, {"trainer", 2}, {"trainer", 3}, {"trainer", 4}, {"ps", 5}, {"ps", 2}});
}

TEST_F(RoleAssignment, Homogeneous) {
  check({{"master", 1}, {"trainer", 4}, {"trainer", 4}, {"trainer", 4}, {"trainer", 4}, {"ps", 3}, {"ps", 3}});
}

}  // namespace
}  // namespace dagsim::cli
