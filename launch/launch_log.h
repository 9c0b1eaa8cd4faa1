// What `dagsim launch` writes for its operator on standard error, and how it dates it: every line
// starts with the host's local time as Python's logging writes asctime ("[2026-11-29 08:43:54,276]
// dagsim launch: ..."), so a launcher's lines read beside torchrun's and beside each other when
// several agents share a terminal or a log collector; times a line names ("until 08:45:12") are
// the same clock, to the second. docs/cli.md documents the format.
//
// Promises: one write per line (a line is never interleaved with another of this process), and
// text that holds a control character is printed escaped and quoted (core/base/printable.h), never
// as the raw bytes a terminal would act on: what a flag, the store or a worker chose reaches this
// layer unescaped at worst, and this is the last guard.
//
// Wall time is read here, outside core/, as a launcher's lines are for people: nothing the agent
// decides depends on it.
#pragma once

#include <chrono>
#include <string>

#include "core/runtime/clock.h"

namespace dagsim::launch {

using WallTime = std::chrono::system_clock::time_point;

// "2026-11-29 08:43:54,276": local time, milliseconds after a comma (Python's asctime).
std::string wall_stamp(WallTime t);
// "2026-11-29T08:43:54.276Z": UTC, ISO 8601, for records (--events' "time").
std::string utc_iso(WallTime t);
// "08:45:12": local time of day, to the second.
std::string wall_clock(WallTime t);
// The wall time at which `clock` will read `at` (a deadline on the agent's clock, shown to people).
WallTime wall_time_of(runtime::Clock& clock, runtime::TimePoint at);

// Writes "[<wall_stamp(now)>] dagsim launch: <line>\n" to standard error, escaped where needed.
void say(const std::string& line);
// Writes `block` (several lines, already escaped by its maker) after one dated heading line, so a
// formatted block (the root-cause report) keeps its layout.
void say_block(const std::string& heading, const std::string& block);

}  // namespace dagsim::launch
