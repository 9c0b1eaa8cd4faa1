// The one table of workloads (registry.h). A new workload adds its folder and one line below.
#include "scenarios/workloads/registry.h"

#include "core/base/assert.h"
#include "scenarios/workloads/elastic/elastic_workload.h"
#include "scenarios/workloads/heartbeat/heartbeat_workload.h"
#include "scenarios/workloads/job/job_workload.h"
#include "scenarios/workloads/program/program_workload.h"
#include "scenarios/workloads/rendezvous/rendezvous_workload.h"

namespace dagsim::scenarios {

namespace {
const WorkloadType* const kWorkloadTypes[] = {
    &kHeartbeatWorkload,
    &kProgramWorkload,
    &kModelWorkload,
    &kRendezvousWorkload,
    &kElasticWorkload,
    &kJobWorkload,
};
}  // namespace

const CheckKind* WorkloadType::find_check(std::string_view kind) const {
  for (const CheckKind& check : checks) {
    if (check.name == kind) return &check;
  }
  return nullptr;
}

std::span<const WorkloadType* const> workload_types() { return kWorkloadTypes; }

const WorkloadType* find_workload_type(std::string_view name) {
  for (const WorkloadType* type : kWorkloadTypes) {
    if (type->name == name) return type;
  }
  return nullptr;
}

const WorkloadType& workload_type(const Scenario& scenario) {
  const WorkloadType* type = find_workload_type(scenario.workload.name());
  DAGSIM_ASSERT_MSG(type != nullptr, "scenario " + scenario.name + " has no registered workload (\"" +
                                         scenario.workload.name() + "\")");
  return *type;
}

}  // namespace dagsim::scenarios
