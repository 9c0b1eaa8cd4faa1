// TomlReader: the typed, range-checked reads behind the scenario loader (toml_reader.h).
#include "scenarios/format/toml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <tuple>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/key_suggestion.h"

namespace dagsim::scenarios::detail {
namespace {

std::string_view type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

bool contains(Names names, std::string_view name) { return std::find(names.begin(), names.end(), name) != names.end(); }

// The key's unit in nanoseconds, from its suffix. Only `_ms`, `_us` and `us` (a constant
// latency) keys are durations; any other name here is a loader bug, not bad input.
int64_t unit_ns_of(std::string_view path) {
  if (path.ends_with("_ms")) return 1'000'000;
  DAGSIM_ASSERT(path.ends_with("_us") || path.ends_with(".us"));
  return 1'000;
}

int line_of(const toml::key& key) { return static_cast<int>(key.source().begin.line); }

// The first key of `table` not in `allowed`, in file order: toml++ iterates keys sorted, but
// fixing errors top to bottom should work.
const toml::key* first_key_not_in(const toml::table& table, Names allowed) {
  const toml::key* first = nullptr;
  auto position = [](const toml::key& k) { return std::tuple(k.source().begin.line, k.source().begin.column); };
  for (auto&& [key, value] : table) {
    if (contains(allowed, key.str())) continue;
    if (first == nullptr || position(key) < position(*first)) first = &key;
  }
  return first;
}

}  // namespace

bool Range::contains(double v) const {
  const bool above_lo = lo_open ? v > lo : v >= lo;
  const bool below_hi = hi_open ? v < hi : v <= hi;
  return above_lo && below_hi;
}

std::string Range::to_string() const {
  return std::string(lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + (hi_open ? ")" : "]");
}

std::string format_number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

std::string number_text(const toml::node& n) {
  if (n.is_integer()) return std::to_string(n.as_integer()->get());
  if (n.is_boolean()) return n.as_boolean()->get() ? "true" : "false";
  if (n.is_floating_point()) return format_number(n.as_floating_point()->get());
  return "?";
}

std::string join_names(Names names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string format_duration(Duration d, int64_t unit_ns) {
  return format_number(static_cast<double>(d.count()) / static_cast<double>(unit_ns));
}

int Table::line() const { return static_cast<int>(table.source().begin.line); }

std::string Table::key_path(std::string_view key) const {
  // A user's key may be anything TOML can quote: print it as a key path element, escaped and cut.
  return path.empty() ? key_name(key) : path + "." + key_name(key);
}

void TomlReader::fail(int line, std::string_view key, std::string_view problem) const {
  std::string message = printable(file_, kPathMax) + ":" + std::to_string(line) + ": ";
  if (!key.empty()) message += std::string(key) + ": ";
  message += problem;
  throw errors::invalid_scenario(std::move(message));
}

void TomlReader::warn(int line, std::string_view key, std::string_view problem) const {
  std::string message = printable(file_, kPathMax) + ":" + std::to_string(line) + ": ";
  if (!key.empty()) message += std::string(key) + ": ";
  message += problem;
  warnings_.push_back(std::move(message));
}

void TomlReader::fail(const toml::node& at, std::string_view key, std::string_view problem) const {
  fail(static_cast<int>(at.source().begin.line), key, problem);
}

void TomlReader::check_keys(const Table& t, Names allowed, std::string_view where) const {
  if (const toml::key* key = first_key_not_in(t.table, allowed)) {
    fail(line_of(*key), t.key_path(key->str()),
         "unknown key" + key_suggestion(key->str(), allowed) + "; allowed " + std::string(where) + ": " + join_names(allowed));
  }
}

void TomlReader::check_variant_keys(const Table& t, Names allowed, Names known, std::string_view variant) const {
  const toml::key* key = first_key_not_in(t.table, allowed);
  if (key == nullptr) return;
  const std::string path = t.key_path(key->str());
  if (contains(known, key->str())) {
    fail(line_of(*key), path, "does not apply to " + std::string(variant) + "; allowed: " + join_names(allowed));
  }
  fail(line_of(*key), path,
       "unknown key" + key_suggestion(key->str(), allowed) + "; allowed keys for " + std::string(variant) + ": " +
           join_names(allowed));
}

const toml::node& TomlReader::required(const Table& t, std::string_view key, std::string_view why) const {
  const toml::node* n = t.get(key);
  if (n == nullptr) fail(t.line(), t.key_path(key), "required" + std::string(why));
  return *n;
}

const toml::table& TomlReader::table(const toml::node& n, std::string_view path) const {
  if (!n.is_table()) fail(n, path, "expected a table, got " + std::string(type_name(n.type())));
  return *n.as_table();
}

const toml::array& TomlReader::array(const toml::node& n, std::string_view path) const {
  if (!n.is_array()) fail(n, path, "expected an array, got " + std::string(type_name(n.type())));
  return *n.as_array();
}

std::vector<const toml::table*> TomlReader::tables(const toml::node& n, std::string_view path) const {
  if (!n.is_array()) fail(n, path, "expected an array of tables, got " + std::string(type_name(n.type())));
  std::vector<const toml::table*> out;
  const toml::array& elements = *n.as_array();
  for (size_t i = 0; i < elements.size(); ++i) {
    out.push_back(&table(elements[i], std::string(path) + "[" + std::to_string(i) + "]"));
  }
  return out;
}

std::string TomlReader::string(const toml::node& n, std::string_view path) const {
  if (!n.is_string()) fail(n, path, "expected a string, got " + std::string(type_name(n.type())));
  return n.as_string()->get();
}

bool TomlReader::boolean(const toml::node& n, std::string_view path) const {
  if (!n.is_boolean()) fail(n, path, "expected a boolean, got " + std::string(type_name(n.type())));
  return n.as_boolean()->get();
}

int64_t TomlReader::integer(const toml::node& n, std::string_view path, int64_t lo, int64_t hi) const {
  if (!n.is_integer()) fail(n, path, "expected an integer, got " + std::string(type_name(n.type())));
  const int64_t v = n.as_integer()->get();
  if (v < lo || v > hi) {
    fail(n, path, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

double TomlReader::number(const toml::node& n, std::string_view path, Range range) const {
  double v = 0;
  if (n.is_integer()) {
    v = static_cast<double>(n.as_integer()->get());
  } else if (n.is_floating_point()) {
    v = n.as_floating_point()->get();
  } else {
    fail(n, path, "expected a number, got " + std::string(type_name(n.type())));
  }
  if (!range.contains(v)) fail(n, path, number_text(n) + " is out of range " + range.to_string());
  return v;
}

double TomlReader::number_or_boolean(const toml::node& n, std::string_view path, Range range) const {
  if (n.is_boolean()) return n.as_boolean()->get() ? 1 : 0;
  if (!n.is_integer() && !n.is_floating_point()) {
    fail(n, path, "expected a number or a boolean, got " + std::string(type_name(n.type())));
  }
  return number(n, path, range);
}

Duration TomlReader::duration(const toml::node& n, std::string_view path, Range range_ms) const {
  const int64_t unit_ns = unit_ns_of(path);
  const double per_ms = 1e6 / static_cast<double>(unit_ns);  // 1 for _ms keys, 1000 for _us keys
  const Range range{range_ms.lo * per_ms, range_ms.hi * per_ms, range_ms.lo_open, range_ms.hi_open};
  if (!n.is_integer() && !n.is_floating_point()) {
    const char* unit = unit_ns == 1'000'000 ? "milliseconds" : "microseconds";
    fail(n, path, "expected a number of " + std::string(unit) + ", got " + std::string(type_name(n.type())));
  }
  const double v = number(n, path, range);
  // Integers convert exactly (the range keeps them far below int64's limit in nanoseconds).
  const Duration d = n.is_integer() ? Duration(n.as_integer()->get() * unit_ns)
                                    : Duration(std::llround(v * static_cast<double>(unit_ns)));
  // A positive duration must stay positive once rounded, or a timer would fire at once.
  if (range.lo_open && d <= Duration::zero()) fail(n, path, format_number(v) + " rounds to 0 ns; must be positive");
  return d;
}

size_t TomlReader::choice(const toml::node& n, std::string_view path, Names allowed) const {
  const std::string value = string(n, path);
  const auto it = std::find(allowed.begin(), allowed.end(), value);
  if (it == allowed.end()) fail(n, path, "unknown value " + quote(value) + "; allowed: " + join_names(allowed));
  return static_cast<size_t>(it - allowed.begin());
}

uint32_t TomlReader::node_ref(const toml::node& n, std::string_view path) const {
  const std::string name = string(n, path);
  // Resolve by re-forming the name, so "worker01" or "worker+1" never alias worker1.
  const std::string_view prefix = cluster_.name_prefix;
  if (name.size() > prefix.size() && name.starts_with(prefix)) {
    uint32_t index = 0;
    const char* begin = name.data() + prefix.size();
    const char* end = name.data() + name.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && index < cluster_.nodes && cluster_.node_name(index) == name) {
      return index;
    }
  }
  const std::string nodes = cluster_.nodes == 1
                                ? "the only node is " + cluster_.node_name(0)
                                : "nodes are " + cluster_.node_name(0) + ".." + cluster_.node_name(cluster_.nodes - 1);
  fail(n, path, "unknown node " + quote(name) + "; " + nodes);
}

std::vector<uint32_t> TomlReader::node_list(const toml::node& n, std::string_view path, bool allow_empty) const {
  const toml::array& names = array(n, path);
  if (names.empty() && !allow_empty) fail(n, path, "must name at least one node");
  std::vector<uint32_t> out;
  for (size_t i = 0; i < names.size(); ++i) {
    const uint32_t index = node_ref(names[i], std::string(path) + "[" + std::to_string(i) + "]");
    if (std::find(out.begin(), out.end(), index) != out.end()) {
      fail(names[i], path, cluster_.node_name(index) + " is listed twice");
    }
    out.push_back(index);
  }
  return out;
}

}  // namespace dagsim::scenarios::detail
