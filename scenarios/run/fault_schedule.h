// FaultSchedule: a scenario's faults as one timeline, applied to any runtime's Cluster.
//
// Scheduled faults ([[faults]]) are taken as written; random faults ([random_faults]) are drawn
// here, before the run, from the scenario seed: each kind arrives as a Poisson process at its
// rate, hits a seeded random node that is neither excluded nor already faulted, and ends after its
// configured duration (restart, resume, heal). Drawing the whole schedule up front keeps it a
// pure function of (scenario, seed), so it can be printed, compared and replayed.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/format/scenario.h"
#include "core/runtime/cluster.h"

namespace dagsim::scenarios {

// Scheduled and drawn faults together, stably sorted by time. `end` is the workload's end.
std::vector<FaultSpec> fault_timeline(const Scenario& scenario, uint64_t seed, runtime::TimePoint end);

// Arms every fault at a time (and its `until`) as an event of the cluster, at its scenario time.
// Faults with a trigger (`when`) are FaultTriggers' (fault_triggers.h).
void install_faults(runtime::Cluster& cluster, const std::vector<FaultSpec>& faults);

// What a fault does to `cluster` when it strikes, and what its end (restart, resume, heal) does;
// `end` is empty for kinds without one. Named for Cluster::at.
struct FaultActions {
  std::string what;
  std::function<void()> strike;
  std::string end_what;
  std::function<void()> end;
};
FaultActions fault_actions(runtime::Cluster& cluster, const FaultSpec& fault);

std::string fault_kind_name(FaultSpec::Kind kind);
nlohmann::json faults_to_json(const Scenario& scenario, const std::vector<FaultSpec>& faults);

// The scheduled faults ([[faults]]) that can never fire, as the scenario alone tells: at or after
// the workload's fixed end (WorkloadType::fixed_end) or max_virtual_time. One warning line each,
// naming the fault's line, for `dagsim validate` and `dagsim run` to print before the run.
std::vector<std::string> faults_that_cannot_fire(const Scenario& scenario);

// After a run that ended at `end`: marks each fault of `faults` (faults_to_json's) "fired" or not,
// and its end (restart, resume, heal) "until_fired", and returns one line for each that did not,
// so a report says which faults the run never reached.
std::vector<std::string> mark_fired_faults(nlohmann::json& faults, runtime::TimePoint end);

}  // namespace dagsim::scenarios
