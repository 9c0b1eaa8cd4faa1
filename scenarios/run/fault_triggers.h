// FaultTriggers: the faults of a run that strike on workload events (`when = { ... }`), in either
// runtime.
//
// A workload reports events through its NodeContext (step 100 committed, worker2 a member of round
// 1, a backward pass begun on worker1) and the runtime hands each to observe(). Every fault still
// waiting whose trigger the event meets strikes: after its `after` through Cluster::at, or, with
// none, by the caller at once (observe returns it). The simulator's runtime arms those at the
// virtual instant of the report (a node's fiber must not change the cluster itself), so the run
// stays a function of the seed. The launcher runs them before it answers the reporting node,
// which waits for that answer: over TCP, as in the simulator, the node goes on only once the
// fault has struck (docs/tcp.md).
//
// Promises: each fault strikes at most once, on the first event that meets its trigger (same
// kind, same node where the trigger names one, a number at least the trigger's); its end
// (restart_after_ms, ...) comes that long after it struck; mark() says when each struck.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/cluster.h"
#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

class FaultTriggers {
 public:
  // `faults` is the run's timeline (fault_timeline); only those with a trigger are kept.
  explicit FaultTriggers(const std::vector<FaultSpec>& faults);

  bool empty() const { return waiting_.empty(); }
  // Whether any fault waits for this kind of event: runtimes drop (and never send) the others.
  bool wants(WorkloadEvent event) const;
  // `node` reported `event` with `value` at cluster.now(): arms the faults it triggers and returns
  // those due at once, for the caller to run on the control side. REQUIRES: the cluster outlives
  // the run.
  struct Strike {
    std::string what;  // "fault kill", for Cluster::at
    std::function<void()> fn;
  };
  std::vector<Strike> observe(runtime::Cluster& cluster, WorkerId node, WorkloadEvent event, uint64_t value);
  // Writes when each triggered fault struck (and ended) into `faults`, faults_to_json's array of
  // the same timeline: "at_ms" (and "until_ms") for those that struck; the others keep none.
  void mark(nlohmann::json& faults) const;

 private:
  struct Waiting {
    size_t index;  // in the timeline
    FaultSpec fault;
    bool armed = false;
    std::optional<runtime::TimePoint> struck;
  };
  std::vector<Waiting> waiting_;
};

}  // namespace dagsim::scenarios
