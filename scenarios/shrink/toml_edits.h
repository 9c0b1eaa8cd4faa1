// TOML edits for `dagsim shrink`: the candidate generators work on the scenario's TOML tree, not on
// the Scenario struct, so one shrinker serves every workload (heartbeat, program, rendezvous,
// elastic, job): whatever a workload reads, it reads from keys, arrays and tables.
//
// Promises:
//  - Every function here is pure: it returns a new tree (or text) and leaves its input alone.
//  - Enumerations (arrays_in, tables_in, numbers_in) visit the tree in one fixed order: toml++
//    keeps a table's keys sorted, arrays in their order, parents before children. The same tree
//    always yields the same candidates in the same order.
//  - Nothing here knows whether a candidate is a valid scenario: the loader decides that.
#pragma once

#include <toml++/toml.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dagsim::shrink {

// One step into a TOML tree: a table's key, or an array's index.
struct PathStep {
  std::string key;
  size_t index = 0;
  bool is_index = false;
};
using TomlPath = std::vector<PathStep>;

// "faults[2].at_ms"
std::string path_text(const TomlPath& path);
// The last key of `path` (the key of the table value it names, or of the array it is in).
std::string last_key(const TomlPath& path);

// Parses `text`; throws Error(invalid_scenario) naming `source` on a TOML syntax error.
toml::table parse_toml(std::string_view text, std::string_view source);
// The tree as TOML text (toml++'s formatter): valid TOML that parses back to the same tree.
std::string to_text(const toml::table& root);

// The node at `path`, or nullptr when the path no longer exists.
const toml::node* node_at(const toml::table& root, const TomlPath& path);
toml::node* node_at(toml::table& root, const TomlPath& path);

// Every array of the tree, parents before children.
std::vector<TomlPath> arrays_in(const toml::table& root);
// Every table of the tree with at least one key (the root is the empty path), parents first.
std::vector<TomlPath> tables_in(const toml::table& root);
// Every positive number worth shrinking: a table's integer or float value, or an element of an
// array of at most kMaxNumberArray numbers (a tensor's shape, not its data).
inline constexpr size_t kMaxNumberArray = 4;
std::vector<TomlPath> numbers_in(const toml::table& root);

// A copy of `root` whose array at `array` keeps only the elements at `keep` (ascending).
// REQUIRES: `array` names an array; every index is in range.
toml::table keep_elements(const toml::table& root, const TomlPath& array, const std::vector<size_t>& keep);
// A copy of `root` whose table at `table` keeps only the keys `keys[keep[i]]`.
// REQUIRES: `table` names a table.
toml::table keep_keys(const toml::table& root, const TomlPath& table, const std::vector<std::string>& keys,
                      const std::vector<size_t>& keep);
// The keys of the table at `path`, in order.
std::vector<std::string> keys_of(const toml::table& root, const TomlPath& table);

// The number at `path` (integer or float). REQUIRES: it is one.
double number_at(const toml::table& root, const TomlPath& path);
bool integer_at(const toml::table& root, const TomlPath& path);
// A copy of `root` with the number at `path` set to `value`, written as an integer when it is
// whole (and the old value was an integer, or `value` is whole and below 2^53).
toml::table with_number(const toml::table& root, const TomlPath& path, double value);

// Smaller values to try for `value`, in the order tried: the floor (0, then 1), half, three
// quarters, one less (small integers), a whole number for a fraction. Each strictly smaller than
// `value` and not negative; empty for 0 or less. Floats stop halving below kSmallestFloat.
inline constexpr double kSmallestFloat = 1e-3;
std::vector<double> smaller_numbers(double value, bool integer);

// The time keys of a fault's end (restart_at_ms, resume_at_ms, heal_at_ms).
bool is_fault_end_key(std::string_view key);

// Earlier start times to try for a fault at `at`: 0, half, three quarters, then every sixteenth
// of `at` from the earliest (at/16, 2at/16, ...): a fault that must land in a phase of the run
// misses the first three more often than not. Whole when `at` is; each strictly below `at`, no
// repeats; empty for 0 or less.
inline constexpr int kEarlierSteps = 16;
std::vector<double> earlier_times(double at);
// A fault ([[faults]] table) moved earlier as a whole: at_ms to each of earlier_times (its end
// keys moved by the same amount), in that order. Empty when it has no numeric at_ms > 0.
std::vector<toml::table> earlier_faults(const toml::table& fault);
// The absolute end of a fault: its latest end-at key, or at_ms plus an end-after key; nullopt for
// a fault without an end.
std::optional<double> fault_end(const toml::table& fault);
// A group of faults moved earlier together, their spacing kept: every [[faults]] element with
// at_ms >= from_ms (its end-at keys too) `delta` earlier, and the run's end with them (the
// top-level max_virtual_time_ms and every duration_ms, when past from_ms and still positive).
// REQUIRES: delta > 0.
toml::table shifted_from(const toml::table& root, double from_ms, double delta);
// The shifts to try for the faults at or after `from_ms`, in order: the quiet gap before them (to
// the end of the faults that start before, then to the latest such start, or 0), then 7/8, 3/4,
// 1/2, 1/4 and 1/8 of the gap to that start. Positive, no repeats; whole when from_ms is.
std::vector<double> group_shifts(const toml::table& root, double from_ms);
// A fault whose end falls at or after the run's end (`run_end_ms`), which replay would warn of
// (the loader for an end at or past max_virtual_time_ms or the workload's end, the run for one
// past its end): without its end keys, then with its end at the last whole millisecond before
// the run's end. Empty when its end is before the run's end (or it has none, or it does not
// start before the run's end).
std::vector<toml::table> clipped_ends(const toml::table& fault, double run_end_ms);
// The fault lasting less: each end key (x_at_ms or x_after_ms) brought closer to the start.
std::vector<toml::table> shorter_faults(const toml::table& fault);
// A milder fault: a kill becomes a crash, a kill or crash a pause (its restart keys become resume
// keys); in that order.
std::vector<toml::table> milder_faults(const toml::table& fault);

}  // namespace dagsim::shrink
