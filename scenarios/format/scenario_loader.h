// Scenario loader: turns a scenario's TOML text into a validated Scenario (docs/scenarios.md).
//
// It is strict, so a typo never silently becomes a default: an unknown key, a value of the wrong
// type, an out-of-range number, an unknown enum value or node name, a key that does not apply to
// the chosen kind or distribution, and a missing required key are all errors. Every error is a
// dagsim::Error with code invalid_scenario whose detail reads "FILE:LINE: KEY: problem" (plus, for
// unknown keys and values, what is allowed), so `dagsim validate` can print it verbatim and exit 2.
// A Scenario returned from here needs no further validation by the runner.
#pragma once

#include <string>
#include <string_view>

#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

// Parses and validates `toml_text`; `source_name` (usually the path) prefixes every message and
// becomes Scenario::file. Throws Error(invalid_scenario) on any problem.
Scenario parse_scenario(std::string_view toml_text, std::string_view source_name);

// Reads `path` and parses it. An unreadable file is Error(invalid_scenario) naming the path.
Scenario load_scenario_file(const std::string& path);

// The text of the scenario file `path` (what a records directory keeps as scenario.toml).
// An unreadable file is Error(invalid_scenario) naming the path.
std::string read_scenario_text(const std::string& path);

}  // namespace dagsim::scenarios
