// What `dagsim check` found: each seed's verdict read from its run's JSON report, and the check's
// summary of them in text, JSON and JUnit XML (junit.h). A seed that was interrupted has no
// verdict and is reported apart, so a partial summary after ^C never calls a cut-short seed a crash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenarios/cli/commands.h"
#include "scenarios/cli/sweep_probes.h"

namespace dagsim::cli {

struct CheckVerdict {
  std::string name;
  bool passed = false;
  std::string detail;
};

struct SeedOutcome {
  uint64_t seed;
  int exit_code;  // 0, 1, 2, 3, 4; a signal counts as 3
  std::string summary;
  double seconds = 0;
  std::vector<CheckVerdict> checks;  // from the seed's report, when it wrote one
  bool interrupted = false;          // stopped by the check's own interrupt, so no verdict
  ProbeCounts probes;                // the probes its run hit (sweep_probes.h)
};
// PASSED, FAILED, INVALID, LIMIT, CRASHED or INTERRUPTED.
inline const char* verdict_of(const SeedOutcome& o) {
  if (o.interrupted) return "INTERRUPTED";
  return o.exit_code == kPassed           ? "PASSED"
         : o.exit_code == kCheckFailed    ? "FAILED"
         : o.exit_code == kBadInput       ? "INVALID"
         : o.exit_code == kResourceLimit  ? "LIMIT"
                                          : "CRASHED";
}

// The checks of a seed's JSON report; empty, with `*unreadable` set, when it cannot be read. With
// `probes`, also the probes it hit.
std::vector<CheckVerdict> read_checks(const std::string& stdout_text, std::string* unreadable, ProbeCounts* probes = nullptr);

// Where a sweep's seeds ran: the build (its provenance and every probe it has) and, for one shard
// of a sweep, which ("1/4"). check's own seeds ran on this binary (this_origin()); `dagsim merge`
// gives the shards' build, from their results files, so its report equals the unsharded one.
struct SweepOrigin {
  nlohmann::json provenance;
  std::vector<std::string> probe_names;
  std::string shard;  // "" for a whole sweep
};
SweepOrigin this_origin();

// Why a seed failed, in one line: the failing checks' names and first lines, or the run's error.
std::string summarise(const std::vector<CheckVerdict>& checks, const std::string& unreadable,
                      const std::string& stderr_text, int exit_code);

// Prints the failing seeds and the summary (text or JSON), writes --junit's file, and returns the
// exit code. `outcomes` in seed order; `count` seeds were asked for (0: all 2^64); with
// `stopped_by` (a signal) set it is a partial summary of the seeds that finished. `timestamp`:
// when the check started, ISO 8601 UTC.
// `origin`: where the seeds ran (this_origin() for check's own).
int report_outcomes(const CheckArgs& args, const std::vector<SeedOutcome>& outcomes, uint64_t count,
                    int stopped_by, const std::string& timestamp, const SweepOrigin& origin);

}  // namespace dagsim::cli
