// TomlReader: typed, range-checked reads from a toml++ tree for the scenario loader. Every read
// either returns a value the Scenario can hold or throws Error(invalid_scenario) in the loader's
// one message format, "FILE:LINE: KEY: problem" (scenario_loader.h), so the section readers
// (scenario_loader.cc, scenario_faults.cc) check every key the same way and never build messages
// by hand for type or range problems.
//
// Private to the scenarios library: toml++ is a private dependency and must not leak into the
// public headers.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "scenarios/format/scenario.h"

namespace dagsim::scenarios::detail {

using Names = std::span<const std::string_view>;

// An interval of allowed numbers, in the key's own unit. Comparisons are written so that NaN is
// never inside (TOML allows `nan` and `inf`).
struct Range {
  double lo;
  double hi;
  bool lo_open = false;
  bool hi_open = false;

  bool contains(double v) const;
  std::string to_string() const;  // "[0, 1)", "(0, 1000000000]"
};

// Every duration is at most this, in milliseconds (about 11.6 days of virtual time), so that sums
// of a few durations stay far from overflowing int64 nanoseconds.
inline constexpr double kMaxDurationMs = 1e9;
// Ranges for durations in milliseconds; scaled by TomlReader::duration for `_us` keys.
inline constexpr Range kNonNegativeMs{0, kMaxDurationMs};
inline constexpr Range kPositiveMs{0, kMaxDurationMs, /*lo_open=*/true};

// "12", "0.5", "1e+20": integral values print without a fraction or exponent.
std::string format_number(double v);
// A number node as written: integers exactly (2^63 - 1 does not become 2^63 as a double would),
// floats by format_number, booleans as true/false.
std::string number_text(const toml::node& n);
// "a, b, c"
std::string join_names(Names names);
// A duration in a key's unit for messages ("1.5" for 1.5 ms when unit_ns is 1'000'000).
std::string format_duration(Duration d, int64_t unit_ns);

// One table being read, with the key path messages use for it ("faults[2]", "network.latency";
// empty for the top level).
struct Table {
  const toml::table& table;
  std::string path;

  int line() const;
  std::string key_path(std::string_view key) const;
  const toml::node* get(std::string_view key) const { return table.get(key); }
};

class TomlReader {
 public:
  explicit TomlReader(std::string_view file) : file_(file) {}

  // Node references ("worker3") resolve against this cluster; set once [cluster] is read.
  void set_cluster(const ClusterSpec& cluster) { cluster_ = cluster; }
  const ClusterSpec& cluster() const { return cluster_; }
  // How many GPUs [devices] gives each node: `device` keys resolve against it.
  void set_gpus(uint32_t gpus) { gpus_ = gpus; }
  uint32_t gpus() const { return gpus_; }

  // Throws "FILE:LINE: KEY: problem" ("FILE:LINE: problem" when key is empty).
  [[noreturn]] void fail(int line, std::string_view key, std::string_view problem) const;
  [[noreturn]] void fail(const toml::node& at, std::string_view key, std::string_view problem) const;
  // Records "FILE:LINE: KEY: problem" for Scenario::warnings: valid, but likely not what was meant.
  void warn(int line, std::string_view key, std::string_view problem) const;
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Rejects the first key (in file order) of `t` that is not in `allowed`; the message lists
  // them: "unknown key; allowed <where>: a, b" (where = "keys in [cluster]").
  void check_keys(const Table& t, Names allowed, std::string_view where) const;
  // As check_keys for a table whose keys depend on a variant (a fault's kind, a latency's dist):
  // a key in `known` but not in `allowed` "does not apply to <variant>"; any other is unknown.
  void check_variant_keys(const Table& t, Names allowed, Names known, std::string_view variant) const;

  // The key, or "KEY: required<why>" at the table's line (why: "" or " for kind \"kill\"").
  const toml::node& required(const Table& t, std::string_view key, std::string_view why = {}) const;

  // Typed reads of one node at `path`. Wrong type: "expected an integer, got a string".
  const toml::table& table(const toml::node& n, std::string_view path) const;
  const toml::array& array(const toml::node& n, std::string_view path) const;
  // An array whose every element is a table ([[faults]]).
  std::vector<const toml::table*> tables(const toml::node& n, std::string_view path) const;
  std::string string(const toml::node& n, std::string_view path) const;
  bool boolean(const toml::node& n, std::string_view path) const;
  int64_t integer(const toml::node& n, std::string_view path, int64_t lo, int64_t hi) const;
  // An integer or a float.
  double number(const toml::node& n, std::string_view path, Range range) const;
  // A number (as number()) or a boolean, read as 1 or 0.
  double number_or_boolean(const toml::node& n, std::string_view path, Range range) const;
  // An integer or float count of milliseconds or microseconds (from the key's `_ms`/`_us`
  // suffix), rounded to the nearest nanosecond. `range_ms` is in milliseconds.
  Duration duration(const toml::node& n, std::string_view path, Range range_ms) const;
  // The index of the string value in `allowed`; otherwise 'unknown value "x"; allowed: a, b'.
  size_t choice(const toml::node& n, std::string_view path, Names allowed) const;
  // A node name ("worker3") as an index into the cluster.
  uint32_t node_ref(const toml::node& n, std::string_view path) const;
  // An array of distinct node names.
  std::vector<uint32_t> node_list(const toml::node& n, std::string_view path, bool allow_empty) const;

  // The same reads for an optional key of a table: nullopt when the key is absent.
  std::optional<std::string> opt_string(const Table& t, std::string_view key) const {
    return read_optional(t, key, &TomlReader::string);
  }
  std::optional<bool> opt_boolean(const Table& t, std::string_view key) const {
    return read_optional(t, key, &TomlReader::boolean);
  }
  std::optional<int64_t> opt_integer(const Table& t, std::string_view key, int64_t lo, int64_t hi) const {
    return read_optional(t, key, &TomlReader::integer, lo, hi);
  }
  std::optional<double> opt_number(const Table& t, std::string_view key, Range range) const {
    return read_optional(t, key, &TomlReader::number, range);
  }
  std::optional<Duration> opt_duration(const Table& t, std::string_view key, Range range_ms) const {
    return read_optional(t, key, &TomlReader::duration, range_ms);
  }
  std::optional<size_t> opt_choice(const Table& t, std::string_view key, Names allowed) const {
    return read_optional(t, key, &TomlReader::choice, allowed);
  }
  std::optional<uint32_t> opt_node_ref(const Table& t, std::string_view key) const {
    return read_optional(t, key, &TomlReader::node_ref);
  }
  std::optional<std::vector<uint32_t>> opt_node_list(const Table& t, std::string_view key, bool allow_empty) const {
    return read_optional(t, key, &TomlReader::node_list, allow_empty);
  }

 private:
  template <typename T, typename... Args>
  std::optional<T> read_optional(const Table& t, std::string_view key,
                                 T (TomlReader::*read)(const toml::node&, std::string_view, Args...) const,
                                 std::type_identity_t<Args>... args) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return std::nullopt;
    return (this->*read)(*n, t.key_path(key), args...);
  }

  std::string file_;
  // Reads are const (a reader is passed around as const&); the warnings are their log, not state
  // any read depends on.
  mutable std::vector<std::string> warnings_;
  ClusterSpec cluster_;
  uint32_t gpus_ = 0;
};

}  // namespace dagsim::scenarios::detail
