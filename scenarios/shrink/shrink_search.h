// The search of `dagsim shrink`: from a scenario's text and a run of it that failed, a smaller
// scenario whose run fails the same way (candidate_run.h FailureSignature), found by passes over
// its TOML tree (toml_edits.h) repeated to a fixpoint under a budget.
//
// The passes, in order, each round:
//  1. checks:      keep only the failing check among [[checks]].
//  2. materialise: [random_faults] written as the [[faults]] the seed drew (fault_materialise.h);
//                  if that run fails otherwise, [random_faults]' numbers shrink instead.
//  3. faults:      ddmin over [[faults]].
//  4. arrays:      ddmin over every other array (statements, late joins, a partition's nodes, ...).
//  5. numbers:     each fault earlier (0, halves, a ladder of sixteenths), shorter and milder; the
//                  faults from each start on moved earlier together with the run's end
//                  (max_virtual_time_ms, duration_ms), their spacing kept; max_virtual_time_ms to
//                  a bit past the failing run's end; every other positive number smaller.
//  6. keys:        ddmin over each table's keys (an optional key back to its default).
//  7. fault ends:  a fault whose end falls after the run's end loses its end (or ends with the
//                  run), so the shrunk file's replay warns of no end that never came.
//
// Promises:
//  - Deterministic: candidates come in a fixed order from the tree alone, and a candidate is taken
//    iff its run fails the same way with no more faults and no longer virtual time than the
//    current one. Only the budget's wall-time cut depends on the clock (stopped_by says so).
//  - A candidate that is not a valid scenario (SearchEnv::validate) is skipped without a run and
//    is not counted; one text is never run twice (a cache of verdicts by text).
//  - Runs stop at max_runs; `out_of_time` is asked before each run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "scenarios/shrink/candidate_run.h"

namespace dagsim::shrink {

// A scenario's size, as shrink reports it before and after.
struct Sizes {
  size_t faults = 0;                        // in the run's fault timeline (drawn ones included)
  std::optional<double> virtual_time_ms;    // of the failing run
  uint32_t nodes = 0;
  size_t lines = 0;                         // non-blank, non-comment lines of the text
  size_t statements = 0;                    // tables in arrays ([[faults]], [[checks]], program statements, ...)
};

// What the search asks of the world: the loader's verdict and a run.
struct SearchEnv {
  // The cluster's node count when `text` is a valid scenario, else nullopt. Never throws.
  std::function<std::optional<uint32_t>(const std::string& text)> validate;
  // One run of `text` (a real run: candidate_run.h).
  std::function<RunOutcome(const std::string& text)> run;
};

struct SearchOptions {
  uint64_t max_runs = 300;
  std::function<bool()> out_of_time;                    // null: never
  std::function<void(const std::string& line)> progress;  // one line per accepted step; null: none
};

struct SearchResult {
  std::string text;      // the smallest scenario found (the original text when none was smaller)
  RunOutcome run;        // its failing run
  uint64_t runs = 0;     // candidate runs made (invalid candidates and cache hits not counted)
  std::string stopped_by;  // "fixpoint", "max_runs" or "max_wall_time"
  Sizes before;
  Sizes after;
};

// Sizes of `text` (REQUIRES: a valid TOML text) with `nodes` nodes and its run `run`.
Sizes sizes_of(const std::string& text, uint32_t nodes, const RunOutcome& run);

// REQUIRES: signature.matches(original_run); env.validate(original_text) has a value.
SearchResult shrink_search(const std::string& original_text, const RunOutcome& original_run,
                           const FailureSignature& signature, const SearchEnv& env, const SearchOptions& options);

}  // namespace dagsim::shrink
