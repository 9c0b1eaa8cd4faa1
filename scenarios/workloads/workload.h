// Workload: what a scenario's nodes do, and how a run of them is judged (DESIGN.md, "Scenarios";
// "Results are data").
//
// A workload has two halves that never share memory, so a run can be judged on another host:
//  - the node side (Workload): each incarnation of each node runs node_main with a NodeContext,
//    which gives it its Env and the record it writes what it observed into (declarations,
//    gradients, context counts, errors), as JSON data;
//  - the judge side (Judge, made by the workload's registry entry): built from the scenario and
//    the run's records alone (run/records.h), it evaluates the workload's check kinds and
//    gives its results for the report.
// A workload sees only its NodeContext (and through it the Env): never a SimWorld, a node of
// another incarnation or another node's objects. The runtime (simulator or TCP) supplies the
// NodeContext (node_context.h), one class for both; docs/workloads.md says how to add a workload.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/runtime/env.h"
#include "scenarios/workloads/node_context.h"

namespace dagsim::scenarios {

using runtime::Duration;

struct CheckResult {
  std::string name;
  bool passed = false;
  std::string detail;
};

// The node side of a workload, made per run by its registry entry.
class Workload {
 public:
  virtual ~Workload() = default;

  // Run by every incarnation of every node, on its main fiber.
  virtual void node_main(NodeContext& node) = 0;
  // When the workload ends on its own (nullopt: when its foreground fibers end).
  virtual std::optional<runtime::TimePoint> end_time() const = 0;
  // How long the run keeps going after the workload ended, before the end (traffic the workload
  // left in flight, such as context releases, drains meanwhile).
  virtual Duration drain_time() const { return Duration{0}; }
  // On both runtimes the run ends as soon as every node's cleanup is done, not after drain_time: a
  // node is settled when this holds (no distributed autograd context left, say) and nothing it
  // sent is still queued. drain_time stays the bound. The simulator looks every millisecond of
  // virtual time (scenarios/run/runner.cc), so its runs stay a function of the seed. Called on the
  // node's thread, between its fibers.
  virtual bool settled(uint32_t node) const { return true; }
  // Called once the nodes have stopped: drop anything bound to them.
  virtual void release_nodes() {}
};

// The judge side: one run of a workload, from its records. Check kinds are the registry's
// (registry.h), each a const method of the workload's Judge.
// How a report shows a workload's results.
struct ReportOptions {
  // Every tensor value, however large (`--full-tensors`); by default large tensors are summarised
  // (program/tensor_report.h).
  bool full_tensors = false;
  // The workload's spans too (RunResult::spans), for a page that draws them (`dagsim report`);
  // a run that keeps its trace gets them anyway.
  bool spans = false;
};

// A stretch of a node's time the workload names, for the Chrome trace (sim::TraceSpan): a round
// an agent is a member of, a step its rank 0 drives, a call it waits in. Times on the scenario's
// clock, in nanoseconds.
struct WorkloadSpan {
  uint32_t node = 0;
  std::string name;      // "round 2 (rank 1 of 7)", "step 17"
  std::string category;  // "round", "step", "restart", "next_rendezvous", ...
  int64_t begin_ns = 0;
  int64_t end_ns = 0;    // >= begin_ns
  std::string detail;
};

class Judge {
 public:
  virtual ~Judge() = default;
  // The workload's results for the report, merged into its top-level object.
  virtual nlohmann::json results(const ReportOptions& options) const = 0;
  // The workload's spans for the trace, from the records: none unless the workload names some.
  virtual std::vector<WorkloadSpan> spans() const { return {}; }
};

}  // namespace dagsim::scenarios
