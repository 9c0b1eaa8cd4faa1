// Properties of the simulator over generated scenarios (RapidCheck; RC_PARAMS scales them):
// the same seed replays the same run byte for byte, different seeds explore different runs, and
// the heartbeat failure detector holds its bounds under random kill/crash/pause/partition
// schedules, lossy connections, skewed clocks and random schedules; and the network keeps the
// delivery contract's promises about failure notices (delivery_contract.h) on those runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <rapidcheck/gtest.h>

#include "conformance/delivery_contract.h"
#include "conformance/scenario_gen.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"

namespace dagsim::conformance {
namespace {

using runtime::Duration;
using scenarios::RunOptions;
using scenarios::RunResult;
using scenarios::Scenario;

RunResult run(const Scenario& scenario, uint64_t seed) {
  RunOptions options;
  options.seed = seed;
  return scenarios::run_scenario(scenario, options);
}

std::string failures_of(const RunResult& r) {
  std::string out;
  for (const auto& c : r.checks) {
    if (!c.passed) out += c.name + ": " + c.detail + "\n";
  }
  return out;
}

RC_GTEST_PROP(SimProperties, SameSeedSameTrace, ()) {
  const Scenario scenario = *gen_heartbeat_scenario({.latency_within_slack = false});
  const uint64_t seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  const RunResult a = run(scenario, seed);
  const RunResult b = run(scenario, seed);
  RC_ASSERT(a.trace_hash == b.trace_hash);
  RC_ASSERT(a.trace_events == b.trace_events);
  RC_ASSERT(a.messages == b.messages);
  RC_ASSERT(a.workload == b.workload);
  RC_ASSERT(a.faults == b.faults);
}

RC_GTEST_PROP(SimProperties, DifferentSeedsGiveDifferentSchedules, ()) {
  // Randomness in play: a latency with spread, so each seed samples different delays.
  Scenario scenario = *gen_heartbeat_scenario();
  const Duration hi = std::max(scenario.network.latency.max, Duration{std::chrono::microseconds(20)});
  scenario.network.latency = runtime::LatencyModel::uniform(Duration{0}, hi);
  const uint64_t seed = *rc::gen::noShrink(rc::gen::inRange<uint64_t>(0, 1u << 30));
  RC_ASSERT(run(scenario, seed).trace_hash != run(scenario, seed + 1).trace_hash);
}

RC_GTEST_PROP(SimProperties, FailureDetectorHoldsItsBoundsUnderFaults, ()) {
  const Scenario scenario = *gen_heartbeat_scenario();
  const uint64_t seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  const RunResult r = run(scenario, seed);
  RC_LOG() << "seed " << seed << "\n" << failures_of(r);
  RC_ASSERT(r.passed);
  RC_CLASSIFY(r.workload["heartbeat"]["declarations"].empty(), "no declarations");
}

RC_GTEST_PROP(SimProperties, SlowNetworksAreJudgedOnlyWhereTheBoundsApply, ()) {
  // Latency beyond the slack may cause false suspicions; the checks must say "not applicable"
  // rather than fail, and detection of real outages must still hold.
  const Scenario scenario = *gen_heartbeat_scenario({.latency_within_slack = false, .fault_monitor = true, .lossy = true});
  const uint64_t seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  const RunResult r = run(scenario, seed);
  RC_LOG() << "seed " << seed << "\n" << failures_of(r);
  RC_ASSERT(r.passed);
}

// Runs `scenario` and checks the delivery contract's notice rules on its trace.
RunResult run_checking_notices(const Scenario& scenario, uint64_t seed, std::vector<std::string>& violations) {
  RunOptions options;
  options.seed = seed;
  options.inspect_trace = [&](const sim::Trace& trace, const std::vector<std::string>& names) {
    violations = delivery_contract_violations(
        trace, names, {scenario.network.connection_timeout, scenario.network.max_latency()});
  };
  return scenarios::run_scenario(scenario, options);
}

RC_GTEST_PROP(SimProperties, EndsLearnOfEveryFailureAndLoseNothingAfterwards, ()) {
  // Connection failures, partitions, kills, restarts and crashes together: the mix in which an
  // end once stayed "not learned" for seconds after it had been told (issue 14).
  const Scenario scenario = *gen_heartbeat_scenario({.latency_within_slack = false, .fault_monitor = true, .lossy = true});
  const uint64_t seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  std::vector<std::string> violations;
  const RunResult r = run_checking_notices(scenario, seed, violations);
  RC_LOG() << "seed " << seed << "\n";
  for (size_t i = 0; i < std::min<size_t>(violations.size(), 10); ++i) RC_LOG() << violations[i] << "\n";
  RC_ASSERT(violations.empty());
  RC_CLASSIFY(r.connection_failures > 0, "connection failures");
}

TEST(SimProperties, TheReproducersOfTheStaleNoticeKeepTheContract) {
  // Found by a seed search (issue 14): a notice pending from one failure kept a later incarnation
  // "not learned" for 7.3 s (conn_fail_during_partition, seed 34) and 3.5 s (chaos_rapid, 1845).
  for (const auto& [file, seed] : {std::pair<std::string, uint64_t>{"conn_fail_during_partition.toml", 34},
                                   {"chaos_rapid.toml", 1845}}) {
    const Scenario scenario = scenarios::load_scenario_file(std::string(DAGSIM_CONFORMANCE_DIR) + "/repro/" + file);
    std::vector<std::string> violations;
    const RunResult r = run_checking_notices(scenario, seed, violations);
    EXPECT_TRUE(r.passed) << file << "\n" << failures_of(r);
    EXPECT_TRUE(violations.empty()) << file << ": " << violations.size() << " violations, first: " << violations.front();
  }
}

TEST(SimProperties, EveryExampleKeepsTheNoticeRulesOverSeeds) {
  // The RPC and autograd examples too: their failure notices fail calls and abort passes, so a
  // stale or missing one would show there first.
  const int seeds = seeds_from_env(10);
  size_t examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DAGSIM_CONFORMANCE_DIR) + "/../scenarios/examples")) {
    if (entry.path().extension() != ".toml") continue;
    ++examples;
    const Scenario scenario = scenarios::load_scenario_file(entry.path().string());
    for (int seed = 1; seed <= seeds; ++seed) {
      std::vector<std::string> violations;
      run_checking_notices(scenario, static_cast<uint64_t>(seed), violations);
      EXPECT_TRUE(violations.empty()) << entry.path().filename() << " seed " << seed << ": " << violations.front();
    }
  }
  EXPECT_GE(examples, 9u);
}

}  // namespace
}  // namespace dagsim::conformance
