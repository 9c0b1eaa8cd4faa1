// The `message_faults` key of a program workload (scenario_message_faults.cc): PyTorch's faulty
// agent, per node and message type, as scenario faults.
//
//   message_faults = [
//     { node = "worker0", message = "cleanup_autograd_context_req", fail = 2 },
//     { node = "worker1", message = "backward_autograd_req", delay_ms = 50, count = 3 },
//   ]
//
// Private to the scenarios library.
#pragma once

#include <vector>

#include "scenarios/format/toml_reader.h"
#include "scenarios/workloads/program/program_spec.h"

namespace dagsim::scenarios::detail {

std::vector<ProgramMessageFault> read_message_faults(const TomlReader& reader, const toml::node& node);

}  // namespace dagsim::scenarios::detail
