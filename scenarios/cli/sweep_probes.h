// The probe table of a sweep (`dagsim check --probes`, `dagsim merge --probes`): for every code
// probe (DAGSIM_PROBE, core/base/probe.h) how many seeds hit it and how often in all, and which
// probes no seed reached. FoundationDB checks that its nightly runs reach their CODE_PROBEs; this
// is the same question for one sweep.
//
// Each seed's probes come from its run's JSON report ({"probes": {name: hits}}); the list of every
// probe comes from the build that ran the seeds (all_probe_names() for check's own, the shards'
// results for merge), so a merged table equals the unsharded one.
//
// Promises: rows sorted by name; a probe is in `hit` or in `never_hit`, never both; a probe a seed
// reports that the build does not list is still a row (a report from another build); hits add up
// without overflow (saturating at 2^64 - 1); interrupted seeds count for nothing.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dagsim::cli {

struct SeedOutcome;

// Hits per probe, as one run reports them.
using ProbeCounts = std::map<std::string, uint64_t>;

struct ProbeRow {
  std::string name;
  uint64_t seeds = 0;  // seeds that hit it at least once
  uint64_t hits = 0;   // over all seeds
};

struct ProbeTable {
  uint64_t seeds = 0;  // seeds with a verdict, over which the table counts
  std::vector<ProbeRow> hit;
  std::vector<std::string> never_hit;
};

// Every probe of this build (core/base/probe.h), sorted.
std::vector<std::string> build_probe_names();

// A run report's "probes" object; empty when it has none. A value that is not a count is refused
// with Error(invalid_argument) naming it.
ProbeCounts probes_of_report(const nlohmann::json& report);

ProbeTable probe_table(const std::vector<SeedOutcome>& outcomes, const std::vector<std::string>& known);

// {"probes": {name: {"seeds", "hits"}}, "probes_never_hit": [...]}, added to `summary`.
void add_probe_table(nlohmann::json& summary, const ProbeTable& table);

// The table as text, after check's summary line.
void print_probe_table(std::ostream& out, const ProbeTable& table);

}  // namespace dagsim::cli
