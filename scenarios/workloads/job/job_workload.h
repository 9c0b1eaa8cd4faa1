// The [job] workload's registry entry (job_workload.cc): a scenario whose workload is a real
// training job (job_spec.h). Its reader is job_reader.cc, its judge job_judge.cc; its processes
// are started by the job runner, not by a Workload's node_main.
#pragma once

#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

extern const WorkloadType kJobWorkload;

}  // namespace dagsim::scenarios
