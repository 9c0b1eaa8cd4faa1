// A sweep put back together from its shards (shard_merge.h).
#include "scenarios/cli/shard_merge.h"

#include <algorithm>
#include <map>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::cli {
namespace {

std::string range_text(const ShardResults& r) { return std::to_string(r.first) + ".." + std::to_string(r.last); }

// The list "1, 3 and 4", at most `shown` of them.
std::string index_list(const std::vector<uint64_t>& indices, size_t shown = 20) {
  std::string out;
  for (size_t i = 0; i < indices.size() && i < shown; ++i) {
    out += (i == 0 ? "" : i + 1 == indices.size() ? " and " : ", ") + std::to_string(indices[i]);
  }
  if (indices.size() > shown) out += ", ... (" + std::to_string(indices.size() - shown) + " more)";
  return out;
}

}  // namespace

MergedSweep merge_shards(std::vector<std::pair<std::string, ShardResults>> shards) {
  if (shards.empty()) throw errors::invalid_argument("no shards to merge");
  const std::string& first_name = shards.front().first;
  const ShardResults& base = shards.front().second;
  const auto differs = [&](const std::string& name, const std::string& what) {
    return errors::invalid_argument(printable(name, kPathMax) + ": " + what + " than " + printable(first_name, kPathMax) +
                                    "; shards of one sweep must agree");
  };
  std::map<uint64_t, const std::pair<std::string, ShardResults>*> by_index;
  for (const auto& entry : shards) {
    const auto& [name, r] = entry;
    if (r.scenario_sha256 != base.scenario_sha256) {
      throw differs(name, "another scenario (its text's SHA-256 " + r.scenario_sha256.substr(0, 12) + "..., not " +
                              base.scenario_sha256.substr(0, 12) + "...)");
    }
    if (r.first != base.first || r.last != base.last) throw differs(name, "seeds " + range_text(r) + ", other seeds (" + range_text(base) + ")");
    if (r.shard.count != base.shard.count) {
      throw differs(name, "one of " + std::to_string(r.shard.count) + " shards, another count (" + std::to_string(base.shard.count) + ")");
    }
    if (r.probe_names != base.probe_names) throw differs(name, "run by a build with other probes");
    if (r.note != base.note) throw differs(name, "another note");
    if (!r.interrupted.empty()) {
      throw errors::invalid_argument(printable(name, kPathMax) + ": shard " + r.shard.text() + " was cut short by " + printable(r.interrupted) +
                                     " (" + std::to_string(r.outcomes.size()) + " seeds finished): run it again");
    }
    bool every = false;
    const uint64_t expected = shard_seed_count(r.first, r.last, r.shard, &every);
    if (every || r.outcomes.size() != expected) {
      throw errors::invalid_argument(printable(name, kPathMax) + ": shard " + r.shard.text() + " holds " + std::to_string(r.outcomes.size()) +
                                     " seeds, not its " + (every ? std::string("2^64") : std::to_string(expected)));
    }
    const auto [it, inserted] = by_index.emplace(r.shard.index, &entry);
    if (!inserted) {
      throw errors::invalid_argument(printable(name, kPathMax) + ": shard " + r.shard.text() + " again (also " +
                                     printable(it->second->first, kPathMax) + ")");
    }
  }
  std::vector<uint64_t> missing;
  for (uint64_t i = 0; i < base.shard.count && missing.size() <= 20; ++i) {
    if (by_index.count(i) == 0) missing.push_back(i);
  }
  if (!missing.empty()) {
    throw errors::invalid_argument("missing " + std::string(missing.size() == 1 ? "shard " : "shards ") + index_list(missing) + " of " +
                                   std::to_string(base.shard.count) + " (seeds " + range_text(base) + "); given " +
                                   std::to_string(shards.size()));
  }
  MergedSweep merged;
  const ShardResults& zero = by_index.at(0)->second;
  merged.file = zero.file;
  merged.seeds = zero.seeds;
  merged.note = zero.note;
  merged.count = zero.last - zero.first + 1;
  merged.origin = {zero.provenance, zero.probe_names, ""};
  merged.timestamp = zero.started;
  for (auto& [name, r] : shards) {
    if (!r.started.empty() && r.started < merged.timestamp) merged.timestamp = r.started;
    for (SeedOutcome& o : r.outcomes) merged.outcomes.push_back(std::move(o));
  }
  std::sort(merged.outcomes.begin(), merged.outcomes.end(), [](const SeedOutcome& a, const SeedOutcome& b) { return a.seed < b.seed; });
  return merged;
}

}  // namespace dagsim::cli
