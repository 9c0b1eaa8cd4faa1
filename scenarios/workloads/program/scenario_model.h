// The `model` + `train` workload of the scenario loader (scenario_model.cc): the [model] and
// [train] tables, read into a ModelSpec (model_spec.h) that the loader compiles into its Program.
//
// Private to the scenarios library; scenario_loader.cc calls read_model once [cluster] is known.
#pragma once

#include <array>
#include <string_view>

#include "scenarios/workloads/program/model_spec.h"
#include "scenarios/format/toml_reader.h"

namespace dagsim::scenarios::detail {

// The top-level keys of a model workload; it needs both.
inline constexpr std::array<std::string_view, 2> kModelKeys = {"model", "train"};

ModelSpec read_model(const TomlReader& reader, const toml::node& model, const toml::node& train);

}  // namespace dagsim::scenarios::detail
