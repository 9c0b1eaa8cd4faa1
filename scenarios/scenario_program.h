// The `program` workload of the scenario loader (scenario_program.cc): the top-level keys
// `tensors`, `program` and `backward`, read into a Program (program_spec.h).
//
// Private to the scenarios library; scenario_loader.cc calls read_program once [cluster] is known
// (node names resolve against it) and it has made sure all three keys are present.
#pragma once

#include <array>
#include <string_view>

#include "scenarios/program_spec.h"
#include "scenarios/toml_reader.h"

namespace dagsim::scenarios::detail {

// The top-level keys of a program workload; a program needs all three.
inline constexpr std::array<std::string_view, 3> kProgramKeys = {"tensors", "program", "backward"};

// Every function a statement's `call` may name: the built-ins of the function registry
// (core/rpc/function_registry.cc) and the relays of add_program_functions (program.h). The one
// list of them; a function added there is added here.
inline constexpr std::array<std::string_view, 26> kProgramFunctions = {
    "add",     "sub",       "mul",       "div",       "matmul",  "mse_loss",    "neg",
    "exp",     "log",       "tanh",      "sigmoid",   "relu",    "clone",       "pow",
    "sum",     "mean",      "softmax",   "log_softmax", "transpose", "narrow",  "cat",
    "linear",  "relay_add", "relay_sub", "relay_mul", "relay_div",
};

// The prefix of the relay functions, which (only they) take the node attribute `to`.
inline constexpr std::string_view kRelayPrefix = "relay_";

// The program workload. The driver is node 0; every leaf lives on it.
Program read_program(const TomlReader& reader, const toml::node& tensors, const toml::node& program,
                     const toml::node& backward);

}  // namespace dagsim::scenarios::detail
