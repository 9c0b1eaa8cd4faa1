// TOML edits for `dagsim shrink` (toml_edits.h).
#include "scenarios/shrink/toml_edits.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim::shrink {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

void collect(const toml::node& node, TomlPath& path, std::vector<TomlPath>* arrays, std::vector<TomlPath>* tables,
             std::vector<TomlPath>* numbers) {
  if (const toml::table* t = node.as_table()) {
    if (tables != nullptr && !t->empty()) tables->push_back(path);
    for (const auto& [key, value] : *t) {
      path.push_back({std::string(key.str()), 0, false});
      if (numbers != nullptr && (value.is_integer() || value.is_floating_point())) numbers->push_back(path);
      collect(value, path, arrays, tables, numbers);
      path.pop_back();
    }
  } else if (const toml::array* a = node.as_array()) {
    if (arrays != nullptr) arrays->push_back(path);
    const bool small_numbers = a->size() <= kMaxNumberArray &&
                               std::all_of(a->begin(), a->end(), [](const toml::node& n) { return n.is_number(); });
    for (size_t i = 0; i < a->size(); ++i) {
      path.push_back({"", i, true});
      if (numbers != nullptr && small_numbers) numbers->push_back(path);
      collect(*a->get(i), path, arrays, tables, numbers);
      path.pop_back();
    }
  }
}

double number_of(const toml::node& n) {
  if (const auto* i = n.as_integer()) return static_cast<double>(i->get());
  if (const auto* f = n.as_floating_point()) return f->get();
  DAGSIM_UNREACHABLE();
}

bool whole(double v) { return std::isfinite(v) && std::floor(v) == v && std::fabs(v) < kMaxExactInteger; }

// Sets `key` of `t` to `v`, an integer when whole.
void put_number(toml::table& t, std::string_view key, double v) {
  if (whole(v)) {
    t.insert_or_assign(key, static_cast<int64_t>(v));
  } else {
    t.insert_or_assign(key, v);
  }
}

std::optional<double> number_key(const toml::table& t, std::string_view key) {
  const toml::node* n = t.get(key);
  if (n == nullptr || !n->is_number()) return std::nullopt;
  return number_of(*n);
}

constexpr std::string_view kEndAtKeys[] = {"restart_at_ms", "resume_at_ms", "heal_at_ms"};
constexpr std::string_view kEndAfterKeys[] = {"restart_after_ms", "resume_after_ms", "heal_after_ms"};

}  // namespace

std::string path_text(const TomlPath& path) {
  std::string out;
  for (const PathStep& step : path) {
    if (step.is_index) {
      out += "[" + std::to_string(step.index) + "]";
    } else {
      out += (out.empty() ? "" : ".") + step.key;
    }
  }
  return out;
}

std::string last_key(const TomlPath& path) {
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (!it->is_index) return it->key;
  }
  return "";
}

toml::table parse_toml(std::string_view text, std::string_view source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream what;
    what << source << ":" << e.source().begin.line << ": invalid TOML: " << e.description();
    throw errors::invalid_scenario(what.str());
  }
}

std::string to_text(const toml::table& root) {
  std::ostringstream out;
  // Strings in double quotes, as the examples and docs write them.
  out << toml::toml_formatter(root, toml::toml_formatter::default_flags & ~toml::format_flags::allow_literal_strings);
  out << "\n";
  return out.str();
}

const toml::node* node_at(const toml::table& root, const TomlPath& path) {
  const toml::node* node = &root;
  for (const PathStep& step : path) {
    if (step.is_index) {
      const toml::array* a = node->as_array();
      if (a == nullptr || step.index >= a->size()) return nullptr;
      node = a->get(step.index);
    } else {
      const toml::table* t = node->as_table();
      if (t == nullptr) return nullptr;
      node = t->get(step.key);
      if (node == nullptr) return nullptr;
    }
  }
  return node;
}

toml::node* node_at(toml::table& root, const TomlPath& path) {
  return const_cast<toml::node*>(node_at(static_cast<const toml::table&>(root), path));
}

std::vector<TomlPath> arrays_in(const toml::table& root) {
  std::vector<TomlPath> out;
  TomlPath path;
  collect(root, path, &out, nullptr, nullptr);
  return out;
}

std::vector<TomlPath> tables_in(const toml::table& root) {
  std::vector<TomlPath> out;
  TomlPath path;
  collect(root, path, nullptr, &out, nullptr);
  return out;
}

std::vector<TomlPath> numbers_in(const toml::table& root) {
  std::vector<TomlPath> out;
  TomlPath path;
  collect(root, path, nullptr, nullptr, &out);
  std::vector<TomlPath> positive;
  for (TomlPath& p : out) {
    if (number_at(root, p) > 0) positive.push_back(std::move(p));
  }
  return positive;
}

toml::table keep_elements(const toml::table& root, const TomlPath& array, const std::vector<size_t>& keep) {
  toml::table out = root;
  toml::node* node = node_at(out, array);
  DAGSIM_ASSERT(node != nullptr && node->is_array());
  toml::array& a = *node->as_array();
  toml::array kept;
  for (size_t i : keep) {
    DAGSIM_ASSERT(i < a.size());
    kept.push_back(*a.get(i));
  }
  a = std::move(kept);
  return out;
}

std::vector<std::string> keys_of(const toml::table& root, const TomlPath& table) {
  const toml::node* node = node_at(root, table);
  DAGSIM_ASSERT(node != nullptr && node->is_table());
  std::vector<std::string> keys;
  for (const auto& [key, value] : *node->as_table()) keys.emplace_back(key.str());
  return keys;
}

toml::table keep_keys(const toml::table& root, const TomlPath& table, const std::vector<std::string>& keys,
                      const std::vector<size_t>& keep) {
  toml::table out = root;
  toml::node* node = node_at(out, table);
  DAGSIM_ASSERT(node != nullptr && node->is_table());
  toml::table& t = *node->as_table();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (std::find(keep.begin(), keep.end(), i) == keep.end()) t.erase(keys[i]);
  }
  return out;
}

double number_at(const toml::table& root, const TomlPath& path) {
  const toml::node* node = node_at(root, path);
  DAGSIM_ASSERT(node != nullptr && node->is_number());
  return number_of(*node);
}

bool integer_at(const toml::table& root, const TomlPath& path) {
  const toml::node* node = node_at(root, path);
  return node != nullptr && node->is_integer();
}

toml::table with_number(const toml::table& root, const TomlPath& path, double value) {
  DAGSIM_ASSERT(!path.empty());
  toml::table out = root;
  TomlPath parent_path(path.begin(), path.end() - 1);
  toml::node* parent = node_at(out, parent_path);
  DAGSIM_ASSERT(parent != nullptr);
  if (path.back().is_index) {
    toml::array& a = *parent->as_array();
    DAGSIM_ASSERT(path.back().index < a.size());
    const auto at = a.cbegin() + static_cast<std::ptrdiff_t>(path.back().index);
    if (whole(value)) {
      a.replace(at, static_cast<int64_t>(value));
    } else {
      a.replace(at, value);
    }
  } else {
    DAGSIM_ASSERT(parent->is_table());
    put_number(*parent->as_table(), path.back().key, value);
  }
  return out;
}

std::vector<double> smaller_numbers(double value, bool integer) {
  std::vector<double> out;
  if (!(value > 0) || !std::isfinite(value)) return out;
  auto add = [&](double v) {
    if (integer) v = std::floor(v);
    if (!(v >= 0) || !(v < value)) return;
    if (std::find(out.begin(), out.end(), v) != out.end()) return;
    out.push_back(v);
  };
  add(0);
  if (integer || value > 1) add(1);
  if (!integer && !whole(value)) add(std::floor(value));
  if (integer || value / 2 >= kSmallestFloat) {
    add(value / 2);
    add(value * 3 / 4);
  }
  if (integer && value <= 32) add(value - 1);
  return out;
}

bool is_fault_end_key(std::string_view key) {
  return std::find(std::begin(kEndAtKeys), std::end(kEndAtKeys), key) != std::end(kEndAtKeys);
}

std::vector<double> earlier_times(double at) {
  std::vector<double> out;
  if (!(at > 0) || !std::isfinite(at)) return out;
  const bool integer = whole(at);
  auto add = [&](double v) {
    if (integer) v = std::floor(v);
    if (!(v >= 0) || !(v < at)) return;
    if (std::find(out.begin(), out.end(), v) != out.end()) return;
    out.push_back(v);
  };
  for (double target : smaller_numbers(at, integer)) {
    if (target != 1) add(target);  // 0 and the fractions are enough for a start time
  }
  // A fault that must land in a phase of the run (during a backward, say) misses all three: a
  // ladder of sixteenths, earliest first.
  for (int j = 1; j < kEarlierSteps; ++j) add(at * j / kEarlierSteps);
  return out;
}

std::vector<toml::table> earlier_faults(const toml::table& fault) {
  std::vector<toml::table> out;
  const std::optional<double> at = number_key(fault, "at_ms");
  if (!at || !(*at > 0)) return out;
  for (double target : earlier_times(*at)) {
    toml::table moved = fault;
    put_number(moved, "at_ms", target);
    for (std::string_view key : kEndAtKeys) {
      if (const std::optional<double> end = number_key(fault, key)) put_number(moved, key, *end - (*at - target));
    }
    out.push_back(std::move(moved));
  }
  return out;
}

std::optional<double> fault_end(const toml::table& fault) {
  std::optional<double> end;
  for (std::string_view key : kEndAtKeys) {
    if (const std::optional<double> v = number_key(fault, key)) end = std::max(end.value_or(*v), *v);
  }
  const std::optional<double> at = number_key(fault, "at_ms");
  for (std::string_view key : kEndAfterKeys) {
    const std::optional<double> v = number_key(fault, key);
    if (v && at) end = std::max(end.value_or(*at + *v), *at + *v);
  }
  return end;
}

toml::table shifted_from(const toml::table& root, double from_ms, double delta) {
  DAGSIM_ASSERT(delta > 0);
  toml::table out = root;
  if (toml::array* faults = out["faults"].as_array()) {
    for (toml::node& node : *faults) {
      toml::table* fault = node.as_table();
      if (fault == nullptr) continue;
      const std::optional<double> at = number_key(*fault, "at_ms");
      if (!at || *at < from_ms) continue;
      put_number(*fault, "at_ms", *at - delta);
      for (std::string_view key : kEndAtKeys) {
        if (const std::optional<double> end = number_key(*fault, key)) put_number(*fault, key, *end - delta);
      }
    }
  }
  // The run's end: the time bound, and every workload's duration, when they lie past the shift.
  std::vector<TomlPath> numbers;
  TomlPath path;
  collect(out, path, nullptr, nullptr, &numbers);
  for (const TomlPath& p : numbers) {
    if (p.empty() || p.back().is_index || p[0].key == "faults") continue;
    const bool bound = p.size() == 1 && p[0].key == "max_virtual_time_ms";
    if (!bound && p.back().key != "duration_ms") continue;
    const double v = number_at(out, p);
    if (v > from_ms && v - delta > 0) out = with_number(out, p, v - delta);
  }
  return out;
}

std::vector<double> group_shifts(const toml::table& root, double from_ms) {
  std::vector<double> out;
  const toml::array* faults = root["faults"].as_array();
  if (faults == nullptr || !(from_ms > 0)) return out;
  double prev_start = 0;
  std::optional<double> prev_end;
  for (const toml::node& node : *faults) {
    const toml::table* fault = node.as_table();
    if (fault == nullptr) continue;
    const std::optional<double> at = number_key(*fault, "at_ms");
    if (!at || *at >= from_ms) continue;
    prev_start = std::max(prev_start, *at);
    const std::optional<double> end = fault_end(*fault);
    prev_end = std::max(prev_end.value_or(*at), end.value_or(*at));
  }
  const bool integer = whole(from_ms);
  auto add = [&](double v) {
    if (integer) v = std::floor(v);
    if (!(v > 0) || std::find(out.begin(), out.end(), v) != out.end()) return;
    out.push_back(v);
  };
  const double gap = from_ms - prev_start;
  // The whole quiet gap first (to just after the faults before have ended, then to their start),
  // then fractions of it.
  if (prev_end && *prev_end < from_ms) add(from_ms - *prev_end);
  for (double f : {1.0, 7.0 / 8, 3.0 / 4, 1.0 / 2, 1.0 / 4, 1.0 / 8}) add(gap * f);
  return out;
}

std::vector<toml::table> clipped_ends(const toml::table& fault, double run_end_ms) {
  std::vector<toml::table> out;
  const std::optional<double> end = fault_end(fault);
  const std::optional<double> at = number_key(fault, "at_ms");
  if (!end || !(*end >= run_end_ms) || !at || !(*at < run_end_ms)) return out;
  // Without its end the fault lasts to the run's end, as it did.
  toml::table dropped = fault;
  for (std::string_view key : kEndAtKeys) dropped.erase(key);
  for (std::string_view key : kEndAfterKeys) dropped.erase(key);
  out.push_back(std::move(dropped));
  // Or it ends just before the run's end (the loader warns of an end at the bound too).
  const double clip = std::ceil(run_end_ms) - 1;
  if (clip > *at) {
    toml::table clipped = fault;
    for (std::string_view key : kEndAtKeys) {
      if (number_key(fault, key)) put_number(clipped, key, clip);
    }
    for (std::string_view key : kEndAfterKeys) {
      if (number_key(fault, key)) put_number(clipped, key, clip - *at);
    }
    out.push_back(std::move(clipped));
  }
  return out;
}

std::vector<toml::table> shorter_faults(const toml::table& fault) {
  std::vector<toml::table> out;
  const double at = number_key(fault, "at_ms").value_or(0);
  for (std::string_view key : kEndAtKeys) {
    const std::optional<double> end = number_key(fault, key);
    if (!end || !(*end > at)) continue;
    for (double lasts : smaller_numbers(*end - at, whole(*end - at))) {
      if (lasts <= 0) continue;
      toml::table shorter = fault;
      put_number(shorter, key, at + lasts);
      out.push_back(std::move(shorter));
    }
  }
  for (std::string_view key : kEndAfterKeys) {
    const std::optional<double> lasts = number_key(fault, key);
    if (!lasts) continue;
    for (double v : smaller_numbers(*lasts, whole(*lasts))) {
      if (v <= 0) continue;
      toml::table shorter = fault;
      put_number(shorter, key, v);
      out.push_back(std::move(shorter));
    }
  }
  return out;
}

std::vector<toml::table> milder_faults(const toml::table& fault) {
  std::vector<toml::table> out;
  const toml::node* kind_node = fault.get("kind");
  if (kind_node == nullptr || !kind_node->is_string()) return out;
  const std::string kind = kind_node->as_string()->get();
  if (kind == "kill") {
    toml::table crash = fault;
    crash.insert_or_assign("kind", "crash");
    out.push_back(std::move(crash));
  }
  if (kind == "kill" || kind == "crash") {
    toml::table pause = fault;
    pause.insert_or_assign("kind", "pause");
    for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"restart_at_ms", "resume_at_ms"},
                                   {"restart_after_ms", "resume_after_ms"}}) {
      if (const toml::node* n = fault.get(from)) {
        pause.insert_or_assign(to, *n);
        pause.erase(from);
      }
    }
    out.push_back(std::move(pause));
  }
  return out;
}

}  // namespace dagsim::shrink
