// merge_shards(): the shards of one `dagsim check` sweep (shard_results.h) put back together as the
// sweep the unsharded check would have run, for `dagsim merge` to report through check's own
// report_outcomes (check_report.h): one verdict, one JUnit file, one HTML page, one probe table.
//
// What it refuses, each as Error(invalid_argument) naming the file: shards of another scenario
// (its text's SHA-256), of another seed range or shard count, or from a build with other probes;
// a shard given twice (naming both files); a shard cut short by a signal; and missing shards
// (naming their indices). So a merge either covers every seed of the range once, or says why not.
//
// Promises: the outcomes are in seed order, each seed of the range exactly once; the origin is the
// shards' build (shard 0's provenance) and probe list; the timestamp the earliest shard's start.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scenarios/cli/check_report.h"
#include "scenarios/cli/shard_results.h"

namespace dagsim::cli {

struct MergedSweep {
  std::string file;
  std::string seeds;
  std::string note;
  uint64_t count = 0;  // seeds in the range; 0: all 2^64
  std::string timestamp;
  SweepOrigin origin;
  std::vector<SeedOutcome> outcomes;
};

// `shards`: each file's name and what it holds, in any order.
MergedSweep merge_shards(std::vector<std::pair<std::string, ShardResults>> shards);

}  // namespace dagsim::cli
