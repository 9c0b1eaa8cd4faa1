// `dagsim merge SHARD.json... [--json] [--junit OUT.xml] [--html OUT.html] [--probes]`: the shards
// of a sweep run as `dagsim check --shard I/N --results FILE` (on a Slurm job array, a Kubernetes
// Indexed Job, by hand), reported as one sweep: the same summary, failing seeds, JSON, JUnit, HTML
// page and probe table as the unsharded `dagsim check` prints, through the same code
// (report_outcomes). Exit 0: every seed passed; 1: some seed failed; 2: a shard that cannot be
// read, or shards that do not make one sweep (shard_merge.h), the message naming the file.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/check_report.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/shard_merge.h"
#include "scenarios/cli/shard_results.h"

namespace dagsim::cli {

int merge_command(const MergeArgs& args) {
  MergedSweep merged;
  try {
    std::vector<std::pair<std::string, ShardResults>> shards;
    for (const std::string& path : args.shards) shards.emplace_back(path, read_shard_results(path));
    merged = merge_shards(std::move(shards));
  } catch (const Error& e) {
    std::cerr << "dagsim merge: " << e.detail() << "\n";
    return kBadInput;
  }
  for (const std::string* out : {&args.junit, &args.html}) {
    if (out->empty()) continue;
    std::ofstream probe(*out, std::ios::binary | std::ios::trunc);
    if (!probe) {
      std::cerr << "dagsim merge: " << (out == &args.junit ? "--junit " : "--html ") << printable(*out, kPathMax)
                << ": cannot write: " << std::strerror(errno) << "\n";
      return kBadInput;
    }
  }
  // What the unsharded check was given, as the shards recorded it.
  CheckArgs as_check;
  as_check.file = merged.file;
  as_check.seeds = merged.seeds;
  as_check.json = args.json;
  as_check.junit = args.junit;
  as_check.html = args.html;
  as_check.note = merged.note;
  as_check.probes = args.probes;
  return report_outcomes(as_check, merged.outcomes, merged.count, 0, merged.timestamp, merged.origin);
}

}  // namespace dagsim::cli
