#include "scenarios/workload.h"

#include "core/base/assert.h"
#include "scenarios/heartbeat_workload.h"
#include "scenarios/program_workload.h"

namespace dagsim::scenarios {

std::unique_ptr<Workload> make_workload(const Scenario& scenario, uint64_t seed) {
  if (scenario.program) return std::make_unique<ProgramWorkload>(scenario, seed);
  DAGSIM_ASSERT_MSG(scenario.heartbeat.has_value(), "the loader guarantees exactly one workload");
  return std::make_unique<HeartbeatWorkload>(scenario);
}

}  // namespace dagsim::scenarios
