// ShardResults: one shard of a `dagsim check` sweep as data (`check --shard I/N --results FILE`),
// what `dagsim merge` reads back to report the whole sweep as the unsharded check would.
//
// The file holds what the merge needs and nothing it must trust blindly: the format and its
// version; the scenario as check was given it and the SHA-256 of its text (shards of different
// scenarios are refused by that, not by the path); the whole seed range and the shard I/N; the
// build that ran the seeds (provenance, every probe it has); when the shard started and whether a
// signal cut it short; and every seed's result as the unsharded check holds it: its exit code,
// verdict, seconds, one-line summary, every check it ran with its detail, and the probes it hit.
//
// Reading it back: the file may come from anywhere (a shared volume, another user's job). It is
// read through read_bounded_file() (a regular file of at most kMaxShardResultsBytes) and
// parse_bounded_json() (nested at most kMaxShardResultsDepth deep), and every field is checked
// for its type and range here, once: each seed must belong to the shard and appear once.
//
// Promises: parse_shard_results returns results or throws Error(invalid_argument) whose message
// is one printable line starting with the file's name, naming a wrong field by its path
// ("s.json: results[3].exit_code: expected an integer from 0 to 255, got a string");
// shard_results_json and parse_shard_results are inverses on every ShardResults they accept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenarios/cli/check_report.h"
#include "scenarios/cli/shard_plan.h"

namespace dagsim::cli {

inline constexpr const char* kShardResultsFormat = "dagsim-check-shard";
inline constexpr uint64_t kShardResultsVersion = 1;
// A shard of a million seeds with every check's detail is a few hundred MB at the most.
inline constexpr size_t kMaxShardResultsBytes = size_t{1} << 30;
// The file nests four deep (the file, results, a seed, its checks and probes); room to spare.
inline constexpr size_t kMaxShardResultsDepth = 16;

struct ShardResults {
  std::string file;             // the scenario, as check was given it (what replay lines name)
  std::string scenario_sha256;  // of its text, 64 lowercase hex digits
  std::string seeds;            // the whole sweep's range as given ("1..20")
  uint64_t first = 0;
  uint64_t last = 0;
  SeedShard shard;
  std::string note;             // check's note on every seed (a [job] scenario's)
  nlohmann::json provenance = nlohmann::json::object();  // the build that ran the seeds
  std::vector<std::string> probe_names;                  // every probe of that build, sorted
  std::string started;          // ISO 8601 UTC, when the shard's check started
  std::string interrupted;      // the signal that cut it short ("SIGTERM"); "" when it ran to its end
  std::vector<SeedOutcome> outcomes;  // in seed order
};

nlohmann::json shard_results_json(const ShardResults& results);

// Writes the file whole or not at all (a temporary beside it, renamed into place), so a merge
// never reads half a shard. Error(invalid_argument) naming the path when it cannot.
void write_shard_results(const std::string& path, const ShardResults& results);

// The results in `text`; `name` (the file's path) starts every error.
ShardResults parse_shard_results(std::string_view text, const std::string& name);
ShardResults read_shard_results(const std::string& path);

}  // namespace dagsim::cli
