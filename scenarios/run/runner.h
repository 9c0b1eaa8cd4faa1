// Runner: runs one scenario with one seed and judges it (DESIGN.md, "Data flow").
//
// A run has two steps that meet only in data. record_scenario runs the scenario in a runtime and
// gathers its records (run/records.h): it builds the cluster, starts every node with the
// workload's node side, arms the fault timeline, runs until the workload's end and its drain,
// takes the final snapshots and stops the nodes. judge_run then evaluates, from the records alone:
// the run must have completed (not stuck at max_virtual_time, not deadlocked), no node fiber may
// have failed with an exception, and every [[checks]] entry must hold (the workload's judge,
// workloads/registry.h). run_scenario does both. `dagsim judge` runs the second step alone on a
// records directory, so a run gathered from several hosts is judged by the same code.
//
// The simulator is the runtime here (the TCP launcher is another). The same (scenario, seed)
// gives the same records and the same RunResult, trace hash included.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "scenarios/format/scenario.h"
#include "scenarios/run/node_gpus.h"
#include "scenarios/run/records.h"
#include "scenarios/workloads/workload.h"

namespace dagsim::sim {
class Trace;  // only the simulator's runner sees it whole
}  // namespace dagsim::sim

namespace dagsim::scenarios {

struct RunOptions {
  uint64_t seed = 1;
  // Keep every trace event, for Chrome trace output (`--trace`). Costs memory on long runs.
  bool keep_trace = false;
  // Where to write the Chrome trace-event JSON, when keep_trace.
  std::ostream* chrome_trace = nullptr;
  // How much of the run that trace shows: "workload", "rpc" or "network" (sim/trace.h's
  // TraceLevel): everything by default.
  std::string trace_level = "network";
  // Called now and then with the scenario's time and the runtime's steps (progress lines).
  std::function<void(runtime::TimePoint now, uint64_t steps)> progress;
  // Called with the records before they are judged. Tests use it to tamper with what a workload
  // recorded and prove that each check can fail.
  std::function<void(RunRecords&)> before_checks;
  // Called with the simulator's trace once the run has ended (keeps its events). Conformance
  // suites use it to check the delivery contract on what the network actually did.
  std::function<void(const sim::Trace&, const std::vector<std::string>& node_names)> inspect_trace;
  // How the result shows the workload's results (run_scenario's judging).
  ReportOptions report;
  // What the nodes' GPUs ([devices]) are: "sim" (the simulated GPU, running each op's CPU code),
  // "sim-kernels" (the same, through the kernel table the cuda backend runs: compute/device/
  // host_kernels.h) or "cuda" (real GPUs, from make_cuda_gpu).
  std::string gpus = "sim";
  // cuda: node `node`'s GPU `ordinal`, polling on `clock` (the CLI sets it where the cuda backend
  // is built).
  CudaGpuMaker make_cuda_gpu;
};

struct RunResult {
  std::string scenario;
  uint64_t seed = 0;
  std::string transport = "sim";
  bool passed = false;
  std::string outcome;  // finished | time_limit | deadlock | livelock
  std::vector<CheckResult> checks;
  uint64_t trace_hash = 0;
  uint64_t trace_events = 0;
  double virtual_time_ms = 0;
  // When the workload itself ended, before the drain that lets its traffic settle; unset when it
  // never ended on its own (a time limit, a deadlock).
  std::optional<double> workload_end_ms;
  uint64_t messages = 0;  // sent
  uint64_t messages_delivered = 0;
  uint64_t messages_dropped = 0;
  uint64_t connection_failures = 0;
  double wall_ms = 0;        // the run's, as recorded
  std::string stuck_report;  // when the run did not complete
  nlohmann::json faults;     // the applied fault timeline, each marked "fired" or not
  // What the run never reached: a fault scheduled after it ended, or a fault's end (restart,
  // resume, heal) that never came. One line each; not a failure, but worth an operator's eye.
  std::vector<std::string> warnings;
  nlohmann::json workload;   // workload results, merged into the report's top level
  std::map<std::string, uint64_t> probes;  // the code probes hit (RunRecords::probes)
  nlohmann::json buggify = nullptr;        // RunRecords::buggify
  nlohmann::json swarm = nullptr;          // RunRecords::swarm
  std::vector<WorkloadSpan> spans;  // the workload's spans, when the records kept a trace
};

// Runs `scenario` in the simulator and gathers its records.
RunRecords record_scenario(const Scenario& scenario, const RunOptions& options);
// The same with a given node side (tests wrap a workload to inject faults into its nodes).
RunRecords record_workload(const Scenario& scenario, Workload& workload, const RunOptions& options);

// Judges a run from its records alone.
RunResult judge_run(const Scenario& scenario, const RunRecords& records, const ReportOptions& report = {});

// The kept trace of `records` (REQUIRES: records.trace) as Chrome trace-event JSON at `level`, with
// the workload's spans from `result` on the nodes' tracks.
// Throws Error(invalid_argument) naming a `level` that is none of sim/trace.h's.
void write_chrome_trace(std::ostream& out, const RunRecords& records, const RunResult& result, std::string_view level);

// record_scenario, options.before_checks, then judge_run; and the Chrome trace, when asked for.
RunResult run_scenario(const Scenario& scenario, const RunOptions& options);

// "0x" and 16 hex digits: JSON numbers cannot carry 64 bits exactly.
std::string hash_hex(uint64_t hash);

}  // namespace dagsim::scenarios
