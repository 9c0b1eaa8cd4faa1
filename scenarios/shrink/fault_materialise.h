// Materialising [random_faults] for `dagsim shrink`: the faults a seed drew, read back from the
// run's JSON fault timeline ("faults", scenarios/run/fault_schedule.h faults_to_json), written as
// explicit [[faults]] tables, so that ddmin can then remove them one by one.
//
// Promises:
//  - The new [[faults]] array follows the timeline's order: scheduled faults (the timeline names
//    their source line) keep their own tables unchanged, drawn faults (no line) become tables with
//    kind, at_ms, node or groups, and their end as restart_at_ms, resume_at_ms or heal_at_ms.
//  - [random_faults] is removed. Nothing else of the tree changes.
//  - A timeline this cannot write as [[faults]] (a [job]'s, whose entries name targets, or an
//    older binary's of another shape) gives nullopt and says why; the caller then shrinks the
//    rates instead.
#pragma once

#include <toml++/toml.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dagsim::shrink {

// REQUIRES: `root` was parsed from the text of the run whose timeline this is (its [[faults]]
// tables' source lines are the timeline's "line"s).
std::optional<toml::table> materialise_random_faults(const toml::table& root, const nlohmann::json& timeline,
                                                     std::string* why);

// The same drawn fault as a [[faults]] table (exposed for tests); nullopt when it is not one.
std::optional<toml::table> fault_table_of(const nlohmann::json& fault);

}  // namespace dagsim::shrink
