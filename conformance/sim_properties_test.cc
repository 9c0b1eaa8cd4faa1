// Properties of the simulator over generated scenarios (RapidCheck; RC_PARAMS scales them):
// the same seed replays the same run byte for byte, different seeds explore different runs, and
// the heartbeat failure detector holds its bounds under random kill/crash/pause/partition
// schedules, lossy connections, skewed clocks and random schedules.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "conformance/scenario_gen.h"
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

}  // namespace
}  // namespace dagsim::conformance
