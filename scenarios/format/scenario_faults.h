// The [[faults]] and [random_faults] sections of the scenario loader (scenario_faults.cc).
//
// Private to the scenarios library; scenario_loader.cc calls these once [cluster] is known (node
// names resolve against it) and max_virtual_time is read (no fault may be scheduled after it).
#pragma once

#include <string_view>
#include <vector>

#include "scenarios/format/scenario.h"
#include "scenarios/format/toml_reader.h"

namespace dagsim::scenarios::detail {

// "kill", "partition": the kind as a scenario writes it.
std::string_view fault_kind_text(FaultSpec::Kind kind);

// The `faults` array, in file order (the runner sorts stably by time).
std::vector<FaultSpec> read_faults(const TomlReader& reader, const toml::node& faults, Duration max_virtual_time);

// The [random_faults] table; rates are bounded by the faults they could draw before max_virtual_time.
RandomFaultSpec read_random_faults(const TomlReader& reader, const toml::node& random_faults,
                                   Duration max_virtual_time);

// The [buggify] table: every point it names must be one of the build's (buggify::all_point_names).
BuggifySpec read_buggify(const TomlReader& reader, const toml::node& buggify);

}  // namespace dagsim::scenarios::detail
