// What `dagsim shrink` writes and prints about a search (shrink_search.h): the shrunk file's
// header comment, the before/after table on stdout, and the same as JSON.
//
// Promises: no date, host or wall time in any of it, so the same search gives the same bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "scenarios/shrink/candidate_run.h"
#include "scenarios/shrink/shrink_search.h"

namespace dagsim::shrink {

struct ShrinkReport {
  std::string original;   // FILE as given
  uint64_t seed = 0;
  std::string output;     // the shrunk file's path
  FailureSignature signature;
  SearchResult result;
  uint64_t max_runs = 0;
  // The failing run's swarm mix ([random_faults] swarm = true), said in the header: the faults
  // the shrunk file holds were drawn under it. "" when the run had none.
  std::string swarm_mix;
};

// The shrunk file: a header comment, then the scenario's text.
std::string shrunk_file_text(const ShrinkReport& report);
// Before and after, for a person (stdout).
std::string summary_text(const ShrinkReport& report);
// {before, after, runs, stopped_by, output, check, seed, replay}
nlohmann::json summary_json(const ShrinkReport& report);

}  // namespace dagsim::shrink
