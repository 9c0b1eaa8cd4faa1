// Transport equivalence (issue 10): the same scenario means the same thing on both transports.
// Every program example that makes sense over TCP gives, over `--transport tcp`, the gradients and
// parameters the simulator gives (and so local autograd's); a scenario with kills, a crash and a
// partition ends with the simulator's verdicts; and no node process outlives its launcher, whether
// the run passed, failed, or the launcher was killed or interrupted.
//
// These run the `dagsim` binary, as a user does: node processes are real processes on loopback.
#include <gtest/gtest.h>

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
                                           "unused_rpc"));

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
