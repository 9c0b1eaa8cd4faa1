// Runner: runs one scenario with one seed in a SimWorld and judges it (DESIGN.md, "Data flow").
//
// It builds the world from the scenario (cluster, network, clocks, schedule), starts every node
// with the workload's main, arms the fault timeline, runs until the workload's end, and then
// evaluates: the run must have completed (not stuck at max_virtual_time, not deadlocked), no node
// fiber may have failed with an exception, and every [[checks]] entry must hold. The result is
// data (RunResult), which the CLI prints as text or JSON and conformance tests assert on.
// The same (scenario, seed) gives the same RunResult, trace hash included.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "scenarios/workload.h"

namespace dagsim::scenarios {

struct RunOptions {
  uint64_t seed = 1;
  // Keep every trace event, for Chrome trace output (`--trace`). Costs memory on long runs.
  bool keep_trace = false;
  // Where to write the Chrome trace-event JSON, when keep_trace.
  std::ostream* chrome_trace = nullptr;
  // Called now and then on the driver with virtual time and driver steps (progress lines).
  sim::SimWorld::Progress progress;
  // Called after the run, before the checks, with the workload and the world. Tests use it to
  // tamper with a workload's records and prove that each check can fail.
  std::function<void(Workload&, sim::SimWorld&)> before_checks;
};

struct RunResult {
  std::string scenario;
  uint64_t seed = 0;
  std::string transport = "sim";
  bool passed = false;
  std::string outcome;  // finished | time_limit | deadlock
  std::vector<CheckResult> checks;
  uint64_t trace_hash = 0;
  uint64_t trace_events = 0;
  double virtual_time_ms = 0;
  uint64_t messages = 0;  // sent
  uint64_t messages_delivered = 0;
  uint64_t messages_dropped = 0;
  uint64_t connection_failures = 0;
  std::string stuck_report;  // when the run did not complete
  nlohmann::json faults;     // the applied fault timeline
  nlohmann::json workload;   // workload results, merged into the report's top level
};

RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

// "0x" and 16 hex digits: JSON numbers cannot carry 64 bits exactly.
std::string hash_hex(uint64_t hash);

}  // namespace dagsim::scenarios
