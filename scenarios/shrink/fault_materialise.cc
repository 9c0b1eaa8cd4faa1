// Materialising [random_faults] (fault_materialise.h).
#include "scenarios/shrink/fault_materialise.h"

#include <cmath>
#include <map>

#include "core/base/assert.h"

namespace dagsim::shrink {
namespace {

void put_time(toml::table& t, std::string_view key, double ms) {
  if (std::floor(ms) == ms && std::fabs(ms) < 9007199254740992.0) {
    t.insert_or_assign(key, static_cast<int64_t>(ms));
  } else {
    t.insert_or_assign(key, ms);
  }
}

std::optional<toml::array> names_of(const nlohmann::json& list) {
  if (!list.is_array() || list.empty()) return std::nullopt;
  toml::array out;
  for (const nlohmann::json& name : list) {
    if (!name.is_string()) return std::nullopt;
    out.push_back(name.get<std::string>());
  }
  return out;
}

}  // namespace

std::optional<toml::table> fault_table_of(const nlohmann::json& f) {
  if (!f.is_object() || !f.contains("kind") || !f["kind"].is_string()) return std::nullopt;
  if (!f.contains("at_ms") || !f["at_ms"].is_number() || f.contains("when")) return std::nullopt;
  const std::string kind = f["kind"].get<std::string>();
  toml::table t;
  t.insert_or_assign("kind", kind);
  put_time(t, "at_ms", f["at_ms"].get<double>());
  std::string end_key;
  if (kind == "kill" || kind == "crash" || kind == "pause") {
    if (!f.contains("node") || !f["node"].is_string()) return std::nullopt;
    t.insert_or_assign("node", f["node"].get<std::string>());
    end_key = kind == "pause" ? "resume_at_ms" : "restart_at_ms";
  } else if (kind == "partition") {
    if (f.contains("groups")) {
      if (!f["groups"].is_array()) return std::nullopt;
      toml::array groups;
      for (const nlohmann::json& g : f["groups"]) {
        std::optional<toml::array> names = names_of(g);
        // A drawn partition cuts one node off from all the others; with one node there are none.
        if (!names) return std::nullopt;
        groups.push_back(std::move(*names));
      }
      t.insert_or_assign("groups", std::move(groups));
    } else {
      std::optional<toml::array> from = f.contains("from") ? names_of(f["from"]) : std::nullopt;
      std::optional<toml::array> to = f.contains("to") ? names_of(f["to"]) : std::nullopt;
      if (!from || !to) return std::nullopt;
      t.insert_or_assign("from", std::move(*from));
      t.insert_or_assign("to", std::move(*to));
    }
    end_key = "heal_at_ms";
  } else {
    return std::nullopt;  // restart, resume, heal are never drawn
  }
  if (f.contains("until_ms")) {
    if (!f["until_ms"].is_number()) return std::nullopt;
    put_time(t, end_key, f["until_ms"].get<double>());
  }
  return t;
}

std::optional<toml::table> materialise_random_faults(const toml::table& root, const nlohmann::json& timeline,
                                                     std::string* why) {
  DAGSIM_ASSERT(why != nullptr);
  if (!timeline.is_array()) {
    *why = "the run's report has no fault timeline";
    return std::nullopt;
  }
  // The scheduled faults by the line of their table.
  std::map<int64_t, const toml::table*> scheduled;
  if (const toml::array* faults = root["faults"].as_array()) {
    for (const toml::node& f : *faults) {
      if (const toml::table* t = f.as_table()) scheduled[static_cast<int64_t>(t->source().begin.line)] = t;
    }
  }
  toml::array out;
  size_t used = 0;
  for (const nlohmann::json& f : timeline) {
    if (f.is_object() && f.contains("line") && f["line"].is_number_integer()) {
      const auto it = scheduled.find(f["line"].get<int64_t>());
      if (it == scheduled.end()) {
        *why = "the timeline names a fault at line " + std::to_string(f["line"].get<int64_t>()) + " that is not a [[faults]] table";
        return std::nullopt;
      }
      out.push_back(*it->second);
      ++used;
      continue;
    }
    std::optional<toml::table> drawn = fault_table_of(f);
    if (!drawn) {
      *why = "a drawn fault of the timeline cannot be written as [[faults]]: " + f.dump();
      return std::nullopt;
    }
    out.push_back(std::move(*drawn));
  }
  if (used != scheduled.size()) {
    *why = "the timeline lists " + std::to_string(used) + " of the " + std::to_string(scheduled.size()) + " scheduled faults";
    return std::nullopt;
  }
  toml::table result = root;
  result.erase("random_faults");
  if (out.empty()) {
    result.erase("faults");
  } else {
    result.insert_or_assign("faults", std::move(out));
  }
  return result;
}

}  // namespace dagsim::shrink
