// Generated programs for the distributed autograd properties: a random program of 5 to 40
// statements over the op set, placed on 2 to 6 workers with random `via`, nested calls (relays),
// remote results used by to_here or as RRef arguments of calls on any worker (forks), shared
// inputs and unused local branches, where every RPC result reaches the loss; plus the
// network, schedule and termination-detection settings it runs under. Shared by the gradient
// properties and the error-path properties.
#pragma once

#include <rapidcheck.h>

#include <ostream>

#include "scenarios/workloads/program/program_spec.h"
#include "core/runtime/clock.h"
#include "core/tensor/tensor.h"

namespace dagsim::conformance {

struct ProgramCase {
  scenarios::Program program;
  uint32_t workers = 2;
  runtime::Duration latency_max{0};
  // How long an idle backward waits before termination detection probes: from constantly
  // (100 us, below the latency) to rarely, so detection runs beside healthy passes too.
  runtime::Duration probe_interval{std::chrono::milliseconds(100)};
  bool random_schedule = false;
  uint64_t seed = 1;
};

std::ostream& operator<<(std::ostream& out, const ProgramCase& c);

rc::Gen<ProgramCase> gen_program_case();

}  // namespace dagsim::conformance
