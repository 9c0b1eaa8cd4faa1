// RapidCheck generators of whole heartbeat scenarios, as data (DESIGN.md: properties generate the
// scenario, run the world to its end, then assert on results; never RC_ASSERT in a node fiber).
//
// A generated scenario prints as TOML (operator<<), so a failing case that RapidCheck shrinks
// and reports can be saved to a file and replayed with `dagsim run FILE --seed N`.
#pragma once

#include <rapidcheck.h>

#include <ostream>

#include "scenarios/format/scenario.h"
#include "scenarios/workloads/heartbeat/heartbeat_spec.h"

namespace dagsim::conformance {

struct GenOptions {
  // Keep the latency maximum below the detector's slack (so no_false_suspicion is meaningful).
  bool latency_within_slack = true;
  // Allow faults on the monitor itself.
  bool fault_monitor = true;
  // Allow injected connection failures and random faults.
  bool lossy = true;
};

// A heartbeat scenario with a random cluster, network, clocks, schedule and fault timeline, and
// the detector's three checks.
rc::Gen<scenarios::Scenario> gen_heartbeat_scenario(GenOptions options = {});

// The scenario as a TOML file the loader accepts.
std::string to_toml(const scenarios::Scenario& scenario);

// Seeds for the CLI-level suites: DAGSIM_SEEDS (default `fallback`) scales them for long runs.
int seeds_from_env(int fallback);

}  // namespace dagsim::conformance

namespace dagsim::scenarios {
inline std::ostream& operator<<(std::ostream& out, const Scenario& scenario) {
  return out << "\n" << conformance::to_toml(scenario);
}
}  // namespace dagsim::scenarios
