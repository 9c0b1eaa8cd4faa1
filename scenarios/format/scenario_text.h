// The scenario file as text, before TOML sees it: read with a bound on its size, and pre-scanned
// for nesting depth. Both protect the process from input that is valid for the operating system
// or for TOML but would exhaust this process: /dev/zero or a FIFO read without end, and 100,000
// nested table headers or dotted keys, which toml++ builds (and frees) recursively and so
// overflows the stack on. A file refused here is Error(invalid_scenario) naming the path (and the
// line, for nesting), exactly like any other invalid scenario: exit 2, never a crash.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/bounded_file.h"
#include "core/base/error.h"

namespace dagsim::scenarios::detail {

// A scenario is a few KB; leaf values written out in full stay far below this.
inline constexpr size_t kMaxScenarioBytes = 4u << 20;  // 4 MiB
// Tables, dotted keys, arrays and inline tables together; scenarios nest a handful deep, and
// toml++ handles thousands, so this leaves room on both sides.
inline constexpr int kMaxNestingDepth = 128;

// Every file argument reads through core/base/bounded_file.h.
using dagsim::read_bounded_file;

// read_bounded_file of a scenario: at most kMaxScenarioBytes, refused as invalid_scenario.
std::string read_bounded_text(const std::string& path);

// Throws "FILE:LINE: invalid TOML: nested more than 128 levels deep ..." at the first line whose
// nesting would pass kMaxNestingDepth. A conservative count that needs no TOML parse: every dot
// of a key chain, every table header's level, every open array or inline table counts.
void check_nesting_depth(std::string_view text, std::string_view source_name);

}  // namespace dagsim::scenarios::detail
