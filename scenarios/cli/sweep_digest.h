// SweepDigest: what a `dagsim check` sweep found, in the few figures a reader wants before the
// fifty rows: the pass rate, the failures grouped by check and message, the slowest seeds, and a
// histogram of the seeds' run times. `dagsim report SUMMARY.json` opens the sweep's page with it.
//
// Grouping: a failing seed's failures are its failed checks (the summary's `failed_checks`, each
// {check, message}; for a summary without them, the check named before the first ": " of its
// one-line summary, else its verdict, e.g. CRASHED). Two failures are in one group when their
// check is the same and their messages are the same with every number taken out: "worker3 was
// declared dead at 5.000 s" and "worker2 was declared dead at 1.900 s" are one group, "worker#
// was declared dead at # s". A seed counts once per group however many times it fails there.
//
// Promises: deterministic (groups by most seeds, then check, then pattern; slowest by seconds
// then seed); every seed with a verdict lands in exactly one histogram bin; an interrupted seed
// (no verdict) is in neither the rate, the groups nor the histogram; a time that is negative,
// infinite or NaN (the file is anyone's) counts as 0 s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scenarios/cli/sweep_summary.h"

namespace dagsim::cli {

struct SweepFailureGroup {
  std::string check;    // "never_declared_dead"
  std::string pattern;  // the message with its numbers as "#"
  std::string example;  // the first seed's message, whole
  std::vector<uint64_t> seeds;
};

struct SweepTimeBin {
  double from = 0, to = 0;  // seconds, [from, to); the last bin includes `to`
  uint64_t passed = 0, failed = 0;
};

struct SweepDigest {
  uint64_t judged = 0;  // seeds with a verdict
  uint64_t passed = 0;
  double pass_rate = 0;  // passed / judged, 0 when none
  std::vector<SweepFailureGroup> failures;
  std::vector<SweepSeed> slowest;  // at most `slowest` of them, slowest first
  std::vector<SweepTimeBin> histogram;
  double median_seconds = 0;
};

// `message` with every run of digits (and the decimal point inside one) as "#".
std::string message_pattern(std::string_view message);

SweepDigest digest_sweep(const SweepSummary& summary, size_t slowest = 5, size_t bins = 12);

}  // namespace dagsim::cli
