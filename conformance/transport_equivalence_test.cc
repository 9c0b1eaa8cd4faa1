// Transport equivalence (issue 10): the same scenario means the same thing on both transports.
// Every program example that makes sense over TCP gives, over `--transport tcp`, the gradients and
// parameters the simulator gives (and so local autograd's); a scenario with kills, a crash and a
// partition ends with the simulator's verdicts; and no node process outlives its launcher, whether
// the run passed, failed, or the launcher was killed or interrupted.
//
// These run the `dagsim` binary, as a user does: node processes are real processes on loopback.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string example(const std::string& name) { return std::string(DAGSIM_EXAMPLES) + "/" + name + ".toml"; }

json run_json(const std::string& file, const std::string& transport, int expected_exit = 0) {
  const Output o = dagsim("run " + file + " --json --transport " + transport);
  EXPECT_EQ(o.exit_code, expected_exit) << transport << " " << file << "\n" << o.out << o.err;
  const json j = json::parse(o.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << o.out;
  return j;
}

// Nested lists of numbers, equal up to `rtol` (summation order may differ between transports:
// gradients from several workers are accumulated in the order they arrive).
void expect_close(const json& a, const json& b, const std::string& where, double rtol = 1e-12) {
  ASSERT_EQ(a.type(), b.type()) << where;
  if (a.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    EXPECT_LE(std::abs(x - y), rtol * std::max(std::abs(x), std::abs(y)) + 1e-300) << where << ": " << x << " vs " << y;
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (size_t i = 0; i < a.size(); ++i) expect_close(a[i], b[i], where + "[" + std::to_string(i) + "]", rtol);
  } else if (a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (const auto& [key, value] : a.items()) {
      ASSERT_TRUE(b.contains(key)) << where << "." << key;
      expect_close(value, b[key], where + "." + key, rtol);
    }
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

std::vector<std::pair<std::string, bool>> verdicts(const json& j) {
  std::vector<std::pair<std::string, bool>> out;
  for (const json& c : j["checks"]) out.emplace_back(c["name"].get<std::string>(), c["passed"].get<bool>());
  return out;
}

class ProgramExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(ProgramExamples, GiveTheSimulatorsGradientsAndParametersOverTcp) {
  const json sim = run_json(example(GetParam()), "sim");
  const json tcp = run_json(example(GetParam()), "tcp");
  EXPECT_EQ(tcp["transport"], "tcp");
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp.dump(1);
  EXPECT_EQ(verdicts(sim), verdicts(tcp));
  expect_close(sim["gradients"], tcp["gradients"], "gradients");
  expect_close(sim["params"], tcp["params"], "params");
  // unused_rpc fails as it expects (termination detection over TCP): nothing to compare there.
  size_t tensors = 0;
  for (const auto& [worker, named] : tcp["gradients"].items()) tensors += named.size();
  if (tensors > 0) expect_close(tcp["local_gradients"], tcp["gradients"], "tcp vs local", 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Tcp, ProgramExamples,
                         ::testing::Values("seed_example", "seed_end_to_end", "mlp_partition", "remote_rref", "nested_rpc",
                                           "unused_rpc", "smart_mode", "mixed_dtypes", "faulty_messages", "rref_forks"));

// Each round as (store life, round, [(member, rank)]): what the rendezvous decided, without times.
std::vector<std::string> rounds(const json& j) {
  std::vector<std::string> out;
  for (const json& r : j["rendezvous"]) {
    std::string line = std::to_string(r["store_life"].get<uint32_t>()) + "/" + std::to_string(r["round"].get<uint64_t>()) + ":";
    for (const json& m : r["members"]) line += " " + m["node"].get<std::string>() + "=" + std::to_string(m["rank"].get<uint32_t>());
    out.push_back(line);
  }
  return out;
}

// The rendezvous examples over TCP (issue 11): real processes, the built-in store a process of
// its own, wall clocks; the same checks pass (the invariant checker reads the nodes' records, so
// it judges TCP runs as it judges the simulator's) and the same rounds form with the same ranks.
class RendezvousExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(RendezvousExamples, PassOverTcpWithTheSimulatorsRounds) {
  const json sim = run_json(example(GetParam()), "sim");
  const json tcp = run_json(example(GetParam()), "tcp");
  EXPECT_EQ(tcp["transport"], "tcp");
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp["checks"].dump(1);
  EXPECT_EQ(verdicts(sim), verdicts(tcp));
  EXPECT_EQ(rounds(sim), rounds(tcp));
  EXPECT_FALSE(rounds(tcp).empty());
}

INSTANTIATE_TEST_SUITE_P(Tcp, RendezvousExamples,
                         ::testing::Values("rendezvous_formation", "rendezvous_dead_participant", "rendezvous_last_call",
                                           "rendezvous_redundant", "rendezvous_close", "rendezvous_store_death"));

// The elastic examples over TCP (issue 12): real processes train through the same deaths, late
// join, restarts and store faults, with the simulator's verdicts; a job that trained to its end
// has the simulator's parameters (both equal local training: params_match_local), and each
// round reports its members, ranks and the committed step it started from. Timings differ, so
// the rounds and the steps each committed may too.
class ElasticExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(ElasticExamples, PassOverTcpWithTheSimulatorsVerdicts) {
  const json sim = run_json(example(GetParam()), "sim");
  const json tcp = run_json(example(GetParam()), "tcp");
  EXPECT_EQ(tcp["transport"], "tcp");
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp["checks"].dump(1) << tcp["timeline"].dump(1);
  EXPECT_EQ(verdicts(sim), verdicts(tcp));
  ASSERT_FALSE(tcp["rendezvous"].empty());
  for (const json& r : tcp["rendezvous"]) {
    EXPECT_EQ(r["members"].size(), r["world"].get<size_t>()) << r.dump();
    for (size_t rank = 0; rank < r["members"].size(); ++rank) EXPECT_EQ(r["members"][rank]["rank"], rank) << r.dump();
  }
  if (tcp["elastic"]["committed"] == tcp["elastic"]["steps"]) {
    EXPECT_EQ(sim["elastic"]["committed"], sim["elastic"]["steps"]);
    expect_close(sim["params"], tcp["params"], "params", 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Tcp, ElasticExamples,
                         ::testing::Values("elastic_training", "elastic_max_restarts", "elastic_store_outage",
                                           "elastic_store_death"));

// The formation on etcd (issue 11 item 6): the store node starts a throwaway etcd and names it to
// the agents, which form the round through etcd's v3 API; the checker judges their acknowledged
// writes. In the simulator, which has no outside services, the run fails saying so.
TEST(TransportEquivalence, TheFormationOnEtcdPassesOverTcpAndIsRefusedInTheSimulator) {
  const std::string file = std::string(DAGSIM_EXAMPLES) + "/tcp/rendezvous_etcd_formation.toml";
  const json sim = run_json(file, "sim", 1);
  EXPECT_NE(sim["checks"].dump().find("the etcd backend needs --transport tcp"), std::string::npos) << sim["checks"].dump(1);
  if (access("/usr/bin/etcd", X_OK) != 0) GTEST_SKIP() << "/usr/bin/etcd is not installed (scripts/deps.sh test)";
  const json tcp = run_json(file, "tcp");
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp["checks"].dump(1);
  ASSERT_EQ(rounds(tcp).size(), 1u);
  EXPECT_EQ(rounds(tcp)[0], "0/0: worker1=0 worker2=1 worker3=2 worker4=3");
}

TEST(TransportEquivalence, KillsACrashAndAPartitionEndWithTheSimulatorsVerdicts) {
  const std::string file = std::string(DAGSIM_CONFORMANCE) + "/tcp/kill_restart.toml";
  const json sim = run_json(file, "sim");
  const json tcp = run_json(file, "tcp");
  EXPECT_EQ(verdicts(sim), verdicts(tcp));
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp.dump(1);
  // The same nodes were declared dead over TCP, each by the monitor's first life.
  std::set<std::string> dead;
  for (const json& d : tcp["heartbeat"]["declarations"]) {
    if (d["declared"] == "dead") dead.insert(d["node"].get<std::string>());
  }
  EXPECT_EQ(dead, (std::set<std::string>{"worker1", "worker2", "worker3"}));
}

// Processes (not zombies) whose command line contains `token`.
std::vector<int> processes_with(const std::string& token) {
  std::vector<int> out;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string cmdline = slurp(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(token) == std::string::npos) continue;
    const std::string stat = slurp(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') continue;
    out.push_back(std::stoi(name));
  }
  return out;
}

std::vector<int> wait_for_processes(const std::string& token, size_t n) {
  for (int i = 0; i < 400; ++i) {
    std::vector<int> found = processes_with(token);
    if (found.size() >= n) return found;
    std::this_thread::sleep_for(50ms);
  }
  return processes_with(token);
}

// A run that lasts a minute unless stopped, with a records folder unique to the test: every node
// process carries the folder on its command line.
std::string long_scenario() {
  return write_scenario("long.toml", R"(name = "long"
[cluster]
nodes = 3
[heartbeat]
monitor = "worker0"
interval_ms = 100
max_attempts = 3
duration_ms = 60000
)").string();
}

class LauncherSignals : public ::testing::TestWithParam<int> {};

TEST_P(LauncherSignals, LeaveNoNodeProcessBehind) {
  const int signal = GetParam();
  const std::string records = (temp_dir() / ("signal-" + std::to_string(signal))).string();
  std::vector<std::string> args = {DAGSIM_BINARY, "run", long_scenario(), "--transport", "tcp", "--records", records};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t launcher = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  ASSERT_EQ(posix_spawn(&launcher, DAGSIM_BINARY, &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  const std::vector<int> before = wait_for_processes(records, 4);
  ASSERT_EQ(before.size(), 4u) << "the launcher and its three node processes";
  ::kill(launcher, signal);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the launcher ends by the signal it got";
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(processes_with(records), std::vector<int>{}) << "node processes outlived the launcher";
}

INSTANTIATE_TEST_SUITE_P(Tcp, LauncherSignals, ::testing::Values(SIGKILL, SIGTERM, SIGINT));

TEST(TransportEquivalence, PassedAndFailedRunsLeaveNoNodeProcessBehind) {
  const std::string failing = write_scenario("failing.toml", R"(name = "failing"
tensors = [{ name = "a", shape = [2], init = "uniform" }]
program = [{ out = "b", call = "mul", args = ["a", "a"], on = "worker1", via = "rpc_sync" },
           { out = "loss", call = "sum", args = ["b"] }]
backward = { roots = ["loss"] }
[cluster]
nodes = 2
[[checks]]
kind = "expect_error"
message = "an error that never comes"
)").string();
  for (const auto& [file, code] : {std::pair{example("seed_example"), 0}, std::pair{failing, 1}}) {
    const std::string records = (temp_dir() / ("end-" + std::to_string(code))).string();
    const Output o = dagsim("run " + file + " --transport tcp --records " + records);
    EXPECT_EQ(o.exit_code, code) << o.out << o.err;
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(processes_with(records), std::vector<int>{}) << file;
    // What was gathered is judged the same by `dagsim judge`.
    const Output judged = dagsim("judge " + records);
    EXPECT_EQ(judged.exit_code, code) << judged.out << judged.err;
  }
}

}  // namespace
}  // namespace dagsim::cli::testing

namespace dagsim::cli::testing {
namespace {

// A port nobody listens on right now, below Linux's ephemeral range (32768 and up): a port the OS
// picked would be free for the next outgoing connection of any test running beside this one.
uint16_t free_port() {
  static uint16_t next = static_cast<uint16_t>(20000 + (::getpid() % 600) * 20);
  for (int tries = 0; tries < 2000; ++tries) {
    const uint16_t port = next++;
    if (next >= 32000) next = 20000;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return port;
  }
  ADD_FAILURE() << "no free port in 20000..31999";
  return 0;
}

// The run of docs/tcp.md's two hosts, on one: the launcher waits on its control port, each node is
// started by hand with its own records folder (as on its own host), and the gathered records give
// the simulator's gradients, and the same verdict again through `dagsim judge`.
TEST(TransportEquivalence, NodesStartedByHandJoinALauncherThroughItsControlPort) {
  const fs::path dir = temp_dir() / "two-hosts";
  fs::create_directories(dir);
  const uint16_t control = free_port();
  const std::string peers = (dir / "peers.json").string();
  std::ofstream(peers) << R"({"cluster_id": "0x0123456789abcdef", "nodes": [)"
                       << R"({"name": "worker0", "host": "127.0.0.1", "port": )" << free_port() << "},"
                       << R"({"name": "worker1", "host": "127.0.0.1", "port": )" << free_port() << "}]}";
  const std::string env = "DAGSIM_SECRET=a-secret-both-hosts-share ";
  const std::string node = env + DAGSIM_BINARY + " node --scenario " + example("seed_example") + " --peers " + peers +
                           " --control 127.0.0.1:" + std::to_string(control);
  const std::string command = "(" + node + " --name worker0 --records " + (dir / "host0").string() + " & " + node +
                              " --name worker1 --records " + (dir / "host1").string() + " & " + env + "timeout 60 " +
                              DAGSIM_BINARY + " run " + example("seed_example") + " --transport tcp --json --peers " + peers +
                              " --control-port " + std::to_string(control) + " --records " + (dir / "run").string() +
                              " > " + (dir / "out.json").string() + " 2>/dev/null; echo $? > " +
                              (dir / "code").string() + "; wait)";
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(slurp(dir / "code"), "0\n");
  const json tcp = json::parse(slurp(dir / "out.json"), nullptr, false);
  ASSERT_TRUE(tcp.is_object()) << slurp(dir / "out.json");
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp.dump(1);
  const json sim = run_json(example("seed_example"), "sim");
  expect_close(sim["gradients"], tcp["gradients"], "gradients");
  EXPECT_EQ(dagsim("judge " + (dir / "run").string()).exit_code, 0);
}

TEST(TransportEquivalence, WithNodesOnOtherHostsAPauseIsRefusedBeforeTheRun) {
  const std::string file = write_scenario("paused.toml", R"(name = "paused"
[cluster]
nodes = 2
[[faults]]
at_ms = 10
kind = "pause"
node = "worker1"
resume_at_ms = 20
[heartbeat]
monitor = "worker0"
interval_ms = 100
max_attempts = 3
duration_ms = 500
)").string();
  const std::string peers = write_scenario("peers.json", R"({"cluster_id": "0x1", "nodes": [
    {"name": "worker0", "host": "127.0.0.1", "port": 1}, {"name": "worker1", "host": "127.0.0.1", "port": 2}]})").string();
  const Output o = dagsim("run " + file + " --transport tcp --peers " + peers);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("paused.toml:4: a pause (stopping and continuing a process) needs the node's own host"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace dagsim::cli::testing

namespace dagsim::cli::testing {
namespace {

// Real latency from the kernel: the nodes run in a network namespace of their own whose loopback
// delays every packet by 2 ms (netem), and the seed example still gives the simulator's gradients,
// now taking at least the round trips it needs. Skips, saying why, where the kernel or the
// container does not allow namespaces or netem.
TEST(TransportEquivalence, TheSeedExampleHoldsUnderRealNetemLatency) {
  const std::string probe = "unshare -rn sh -c 'ip link set lo up && tc qdisc add dev lo root netem delay 2ms' 2>&1";
  FILE* pipe = popen(probe.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string why;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) why += buffer;
  if (pclose(pipe) != 0) GTEST_SKIP() << "no network namespace with netem here (" << why << "); nothing to measure";
  const std::string command = "unshare -rn sh -c 'ip link set lo up && tc qdisc add dev lo root netem delay 2ms && " +
                              std::string(DAGSIM_BINARY) + " run " + example("seed_example") + " --transport tcp --json'";
  pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  EXPECT_EQ(pclose(pipe), 0) << out;
  const json tcp = json::parse(out, nullptr, false);
  ASSERT_TRUE(tcp.is_object()) << out;
  EXPECT_TRUE(tcp["passed"].get<bool>()) << out;
  expect_close(run_json(example("seed_example"), "sim")["gradients"], tcp["gradients"], "gradients");
  // The forward call and the backward pass: two round trips of at least 4 ms each.
  EXPECT_GE(tcp["virtual_time_ms"].get<double>(), 8.0);
}

}  // namespace
}  // namespace dagsim::cli::testing
