// The optimizer table of the scenario loader (scenario_optimizer.cc): a program's top-level
// `optimizer` and [train].optimizer, `{ kind = "sgd" | "adam", ... }` with PyTorch's defaults and
// only the keys of the chosen kind.
//
// Private to the scenarios library.
#pragma once

#include <string>

#include "scenarios/workloads/program/program_spec.h"
#include "scenarios/format/toml_reader.h"

namespace dagsim::scenarios::detail {

// The optimizer table `node` at key path `path`.
ProgramOptimizer read_optimizer(const TomlReader& reader, const toml::node& node, const std::string& path);

}  // namespace dagsim::scenarios::detail
