#include "net/tcpstore/store_faults.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net::tcpstore {

namespace {

using nlohmann::json;

// In QueryType's order: the names the store's record gives them (store_recorder.h).
constexpr std::array<std::string_view, kLastQueryType + 1> kOps = {
    "set", "compare_set", "get", "add", "check", "wait", "get_num_keys", "watch_key", "delete_key"};
constexpr std::array<std::string_view, 3> kKinds = {"delay", "drop", "reset"};

[[noreturn]] void bad(const std::string& why) { throw errors::invalid_argument("store faults: " + why); }

// Refuses text nested deeper than kMaxFaultDepth before the parser builds it (strings skipped).
void check_depth(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxFaultDepth) bad("nested deeper than " + std::to_string(kMaxFaultDepth));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string kinds_listed() { return "\"delay\", \"drop\" or \"reset\""; }

StoreFaultRule read_rule(const json& r, size_t index) {
  const std::string at = "faults[" + std::to_string(index) + "]";
  if (!r.is_object()) bad(at + " is not an object");
  for (const auto& [key, value] : r.items()) {
    if (key != "kind" && key != "ops" && key != "probability" && key != "delay_ms" && key != "name") {
      bad(at + ": unknown key " + quote(printable(key, 64)) + " (kind, ops, probability, delay_ms, name)");
    }
  }
  StoreFaultRule rule;
  const auto kind = r.find("kind");
  if (kind == r.end() || !kind->is_string()) bad(at + ".kind: required, one of " + kinds_listed());
  const std::string k = kind->get<std::string>();
  size_t ki = 0;
  while (ki < kKinds.size() && kKinds[ki] != k) ++ki;
  if (ki == kKinds.size()) bad(at + ".kind: " + quote(printable(k, 64)) + " is not " + kinds_listed());
  rule.kind = static_cast<StoreFaultRule::Kind>(ki);
  if (const auto ops = r.find("ops"); ops != r.end()) {
    if (!ops->is_array()) bad(at + ".ops: not an array of query names");
    for (size_t i = 0; i < ops->size(); ++i) {
      const json& op = (*ops)[i];
      const std::string oat = at + ".ops[" + std::to_string(i) + "]";
      if (!op.is_string()) bad(oat + ": not a string");
      const std::optional<QueryType> type = query_type_named(op.get<std::string>());
      if (!type) bad(oat + ": " + quote(printable(op.get<std::string>(), 64)) + " names no TCPStore query");
      const uint16_t bit = static_cast<uint16_t>(1u << static_cast<unsigned>(*type));
      if ((rule.ops & bit) != 0) bad(oat + ": " + quote(op.get<std::string>()) + " is named twice");
      rule.ops |= bit;
    }
  }
  if (const auto p = r.find("probability"); p != r.end()) {
    if (!p->is_number()) bad(at + ".probability: not a number");
    rule.probability = p->get<double>();
    if (!std::isfinite(rule.probability) || rule.probability < 0 || rule.probability > 1) {
      bad(at + ".probability: must be in [0, 1]");
    }
  }
  const auto delay = r.find("delay_ms");
  if (rule.kind == StoreFaultRule::Kind::delay) {
    if (delay == r.end() || !delay->is_number_integer()) bad(at + ".delay_ms: required for kind \"delay\", a whole number");
    const int64_t ms = delay->is_number_unsigned() && delay->get<uint64_t>() > static_cast<uint64_t>(kMaxFaultDelayMs)
                           ? kMaxFaultDelayMs + 1
                           : delay->get<int64_t>();
    if (ms < 1 || ms > kMaxFaultDelayMs) bad(at + ".delay_ms: must be 1 .. " + std::to_string(kMaxFaultDelayMs));
    rule.delay = std::chrono::milliseconds(ms);
  } else if (delay != r.end()) {
    bad(at + ".delay_ms: applies only to kind \"delay\"");
  }
  if (const auto name = r.find("name"); name != r.end()) {
    if (!name->is_string()) bad(at + ".name: not a string");
    rule.name = printable(name->get<std::string>(), 200);
  }
  return rule;
}

}  // namespace

const char* fault_kind_name(StoreFaultRule::Kind kind) { return kKinds[static_cast<size_t>(kind)].data(); }

std::optional<QueryType> query_type_named(std::string_view name) {
  for (size_t i = 0; i < kOps.size(); ++i) {
    if (kOps[i] == name) return static_cast<QueryType>(i);
  }
  return std::nullopt;
}

std::vector<StoreFaultRule> parse_store_faults(std::string_view text) {
  if (text.size() > kMaxFaultFileBytes) {
    bad(std::to_string(text.size()) + " bytes; at most " + std::to_string(kMaxFaultFileBytes));
  }
  if (std::memchr(text.data(), '\0', text.size()) != nullptr) bad("holds a NUL byte");
  check_depth(text);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    bad(std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object()) bad("not a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "faults") bad("unknown key " + quote(printable(key, 64)) + " (only \"faults\")");
  }
  const auto faults = doc.find("faults");
  if (faults == doc.end() || !faults->is_array()) bad("\"faults\": required, an array");
  if (faults->size() > kMaxFaultRules) {
    bad(std::to_string(faults->size()) + " faults; at most " + std::to_string(kMaxFaultRules));
  }
  std::vector<StoreFaultRule> rules;
  for (size_t i = 0; i < faults->size(); ++i) rules.push_back(read_rule((*faults)[i], i));
  return rules;
}

std::vector<StoreFaultRule> read_store_faults(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  // Its errors name the path already.
  const std::string text = read_bounded_file(path, kMaxFaultFileBytes, ErrorCode::invalid_argument, "a store's fault file");
  try {
    return parse_store_faults(text);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    throw errors::invalid_argument(printable(path, 256) + ": " + e.detail());
  }
}

FaultDecision StoreFaults::decide(QueryType type) {
  for (const StoreFaultRule& rule : rules_) {
    if (!rule.matches(type) || rule.probability <= 0) continue;
    if (rule.probability >= 1 || prng_.bernoulli(rule.probability)) {
      ++hits_;
      return FaultDecision{&rule};
    }
  }
  return {};
}

}  // namespace dagsim::net::tcpstore
