// The `program` workload of the scenario loader (scenario_program.cc): the top-level keys
// `tensors`, `parameters`, `program`, `backward` and `optimizer`, read into a Program
// (program_spec.h), with the names' types (tensor or RRef, and an RRef's owner) checked.
//
// Private to the scenarios library; scenario_loader.cc calls read_program once [cluster] is known
// (node names resolve against it) and it has made sure the required keys are present.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "scenarios/workloads/program/program_spec.h"
#include "scenarios/format/toml_reader.h"

namespace dagsim::scenarios::detail {

// The top-level keys of a program workload, and those it needs (tensors and parameters are both
// optional: a program may have either kind of leaf, or both).
inline constexpr std::array<std::string_view, 6> kProgramKeys = {"tensors",  "parameters", "program",
                                                                 "backward", "optimizer",  "message_faults"};
inline constexpr std::array<std::string_view, 2> kProgramRequiredKeys = {"program", "backward"};

// Every function a statement's `call` may name: the ops of the op table (core/rpc/op_table.h),
// then the relays and mlp_layer of add_program_functions (program.h), then the pseudo-call
// to_here (an RRef's value fetched to the driver). Derived: an op added to the table is callable.
std::span<const std::string_view> program_functions();
// Whether a statement may carry attribute `name` (every attribute an op of the table reads is one).
bool is_attribute_key(std::string_view name);


// The program workload of `top` (the file's top level). The driver is node 0; every leaf tensor
// lives on it.
Program read_program(const TomlReader& reader, const Table& top);

}  // namespace dagsim::scenarios::detail
