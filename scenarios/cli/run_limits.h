// The host's limits on one `dagsim run`: wall time and memory (max_wall_time_ms, max_memory_mib;
// --max-wall-time, --max-memory). They live here, in the CLI, because the simulation must never
// read the wall clock or depend on the host: a run stopped by one of them has no verdict, only
// its own outcome (`wall_time_limit`, `memory_limit`) and exit code 4 (kResourceLimit).
//
// How each is enforced:
//  - wall time: a watchdog timer (ITIMER_REAL). At the limit its handler writes the report that
//    was formatted when the run began and exits 4, whatever the process is doing (simulating,
//    running the local oracle, building the report), so nothing can keep it past the limit.
//  - memory: what can be counted is refused deterministically before it is allocated (tensor
//    shapes at load time; queued heartbeats cost a length); the rest is bounded by RLIMIT_AS, and
//    the std::bad_alloc it causes, in a node fiber or outside, is reported as `memory_limit`.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "scenarios/format/scenario.h"

namespace dagsim::cli {

struct HostLimits {
  std::optional<double> wall_s;
  std::optional<uint64_t> memory_mib;
};

// The flags' values where given (> 0), else the scenario's keys.
HostLimits effective_limits(const scenarios::Scenario& scenario, double flag_wall_s, uint64_t flag_memory_mib);

// The report of a run stopped by a limit: `outcome` is "wall_time_limit" or "memory_limit";
// `detail` says which limit and what was reached. JSON (the run report's identifying fields,
// passed false, the outcome and a failed run_completed check) or text.
// `transport` is the one that ran; `replay_flags` those of replay_command (the limits among them).
std::string limit_report(const scenarios::Scenario& scenario, const std::string& file, uint64_t seed,
                         const std::string& transport, const std::string& replay_flags, const std::string& outcome,
                         const std::string& detail, bool json);

// What a memory limit must leave beyond what the process maps once started (VmSize after
// OpenBLAS's buffer is mapped): fiber stacks, the run's own data, the report.
inline constexpr uint64_t kMemoryHeadroomMib = 64;

// Sets RLIMIT_AS to the memory limit (after mapping OpenBLAS's buffer, which it would otherwise
// retry without end under the limit), and arms the wall-time watchdog to print `wall_report` on
// stdout and exit 4. Returns false (with a message on stderr, naming the least limit it takes)
// when the memory limit is below what the process maps plus kMemoryHeadroomMib, or cannot be set.
bool arm_host_limits(const HostLimits& limits, std::string wall_report);
// Stops the watchdog (before the final report is printed, so it is never cut in two).
void disarm_wall_watchdog();
// For a [job] run (real processes, namespaces): at the limit the watchdog stores SIGALRM in
// *flag (when it is still 0) instead of exiting, and the run stops itself, leaving nothing
// behind, then reports the limit. nullptr: exit at the limit, as for every other run.
void wall_watchdog_requests_stop(std::atomic<int>* flag);

}  // namespace dagsim::cli
