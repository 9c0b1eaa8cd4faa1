// What an unknown key likely meant (key_suggestion.h).
#include "scenarios/format/key_suggestion.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "scenarios/format/scenario_keys.h"

namespace dagsim::scenarios::detail {
namespace {

using Names = std::span<const std::string_view>;

bool contains(Names names, std::string_view name) { return std::find(names.begin(), names.end(), name) != names.end(); }

// Optimal string alignment distance (Levenshtein plus adjacent transpositions: "nmae" is one
// edit from "name"), bounded by the short keys it compares.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The closest of `names` within a quarter of `text`'s length (1 to 3 edits), or "": "nodez" finds
// "nodes", while "axis" does not become "args". The first of equally close ones. Keys only: values
// are short words where one edit is another word ("gelu" is not a misspelt "relu").
std::string_view closest(std::string_view text, Names names) {
  if (text.size() > 100) return {};  // a hostile key: no quadratic distance over a megabyte
  const size_t limit = std::clamp<size_t>(text.size() / 4, 1, 3);
  std::string_view best;
  size_t best_distance = limit + 1;
  for (std::string_view name : names) {
    const size_t d = edit_distance(text, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

// torchrun's names (its flags and rdzv_conf keys) for what a scenario spells otherwise: a user
// coming from torchrun writes them first. Those whose scenario name is the name plus "_ms"
// (join_timeout, close_timeout, keep_alive_interval, monitor_interval...) are found by rule.
struct TorchrunName {
  std::string_view torchrun;
  std::string_view ours;
};
constexpr TorchrunName kTorchrunNames[] = {
    {"last_call_timeout", "last_call_ms"}, {"timeout", "join_timeout_ms"},      {"rdzv_timeout", "join_timeout_ms"},
    {"read_timeout", "store_timeout_ms"},   {"heartbeat", "heartbeat_timeout_ms"}, {"rdzv_backend", "backend"},
    {"rdzv_endpoint", "etcd_endpoint"},     {"rdzv_id", "run_id"},               {"keep_alive_max_attempts", "keep_alive_max_attempt"},
};
// torchrun's durations, all in seconds, where a scenario's _ms keys take milliseconds.
constexpr std::string_view kTorchrunSeconds[] = {"timeout",           "rdzv_timeout",  "join_timeout",     "last_call_timeout",
                                                 "close_timeout",     "heartbeat",     "heartbeat_timeout", "keep_alive_interval",
                                                 "read_timeout",      "monitor_interval", "exit_barrier_timeout"};

// torchrun's names a scenario has no key for, and what to know instead.
struct TorchrunNote {
  std::string_view torchrun;
  std::string_view note;
};
constexpr TorchrunNote kTorchrunWithoutKey[] = {
    {"nproc_per_node", "torchrun's nproc_per_node has no scenario key: an elastic scenario's agent runs one worker, of "
                       "its rank in the round (dagsim launch --nproc_per_node runs several)"},
    {"rdzv_conf", "torchrun's rdzv_conf keys are keys of [rendezvous] (or [elastic.rendezvous]) themselves"},
};

// The key `allowed` has for `key` by torchrun's name or by a missing unit suffix ("restart_at"),
// and a note on the unit for torchrun's seconds.
std::optional<std::pair<std::string, std::string>> renamed_key(std::string_view key, Names allowed) {
  if (key.starts_with("rdzv_") && contains(allowed, key.substr(5))) return std::pair{std::string(key.substr(5)), ""};
  std::string ours;
  for (const TorchrunName& name : kTorchrunNames) {
    if (name.torchrun == key && contains(allowed, name.ours)) ours = name.ours;
  }
  if (ours.empty() && !key.ends_with("_ms") && contains(allowed, std::string(key) + "_ms")) ours = std::string(key) + "_ms";
  if (ours.empty()) return std::nullopt;
  std::string note;
  if (ours.ends_with("_ms") && contains(kTorchrunSeconds, key)) {
    note = " torchrun's " + std::string(key) + " is in seconds, " + ours + " in milliseconds";
  }
  return std::pair{ours, note};
}

}  // namespace

std::string key_suggestion(std::string_view key, Names allowed) {
  if (const auto renamed = renamed_key(key, allowed)) return " (did you mean " + renamed->first + "?" + renamed->second + ")";
  for (const TorchrunNote& name : kTorchrunWithoutKey) {
    if (name.torchrun == key) return " (" + std::string(name.note) + ")";
  }
  std::string out;
  if (const std::string_view best = closest(key, allowed); !best.empty()) out = "did you mean " + std::string(best) + "?";
  // A key this table lacks but another has ("max_restarts" in [elastic.rendezvous]).
  std::vector<std::string> where;
  for (const KeySet& set : scenario_key_sets()) {
    if (!contains(set.keys, key)) continue;
    const std::string place = set.table.empty() ? std::string(set.section) : std::string(set.table);
    if (std::find(where.begin(), where.end(), place) == where.end()) where.push_back(place);
  }
  if (!where.empty()) {
    out += (out.empty() ? "" : " ") + std::string(key) + " is a key of ";
    for (size_t i = 0; i < where.size(); ++i) out += (i == 0 ? "" : i + 1 == where.size() ? " or " : ", ") + where[i];
  }
  return out.empty() ? "" : " (" + out + ")";
}

}  // namespace dagsim::scenarios::detail
