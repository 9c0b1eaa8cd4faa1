// HeartbeatWorkload: the first workload, a heartbeat failure detector (the shape rendezvous's
// keep-alives take later).
//
// Every node except the monitor sends a heartbeat (a codec frame of type heartbeat) to the
// monitor every `interval` of its own clock. The monitor declares a node dead after
// `interval × max_attempts` of its own clock without one, and alive again when heartbeats resume.
// It knows only what heartbeats tell it: connection-failure notices are ignored, as a detector
// over an unreliable transport must.
//
// Records: the monitor's incarnations record every declaration with the scenario's time
// ({"declarations": [{"time_ns", "node", "dead"}], "heartbeats_received"}), so the judge
// (heartbeat_checks.cc) can hold the detector to its bounds under the faults the cluster recorded.
#pragma once

#include <vector>

#include "scenarios/format/scenario.h"
#include "scenarios/workloads/heartbeat/heartbeat_spec.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

extern const WorkloadType kHeartbeatWorkload;

struct Declaration {
  runtime::TimePoint time;  // the scenario's time
  uint32_t node = 0;
  bool dead = true;         // false: declared alive again
  uint32_t monitor_incarnation = 0;
};

class HeartbeatWorkload final : public Workload {
 public:
  explicit HeartbeatWorkload(const Scenario& scenario);

  void node_main(NodeContext& node) override;
  std::optional<runtime::TimePoint> end_time() const override { return runtime::TimePoint{spec_.duration}; }

 private:
  void run_monitor(NodeContext& node);
  void run_sender(NodeContext& node);

  const Scenario& scenario_;
  HeartbeatSpec spec_;
};

// The judge: the monitor's declarations against the cluster's fault history.
class HeartbeatJudge final : public Judge {
 public:
  HeartbeatJudge(const Scenario& scenario, const RunRecords& records);

  CheckResult declared_dead(const CheckSpec& spec) const;
  CheckResult never_declared_dead(const CheckSpec& spec) const;
  CheckResult detects_failures(const CheckSpec& spec) const;
  CheckResult no_false_suspicion(const CheckSpec& spec) const;
  CheckResult partition_detected_after_start(const CheckSpec& spec) const;
  nlohmann::json results(const ReportOptions& options) const override;

  // Every monitor incarnation's declarations, in time order.
  const std::vector<Declaration>& declarations() const { return declarations_; }
  uint64_t heartbeats_received() const { return heartbeats_received_; }

 private:
  struct Analysis;
  CheckResult declared(const CheckSpec& spec, bool want) const;
  CheckResult judge_declarations(const CheckSpec& spec, bool false_suspicion) const;

  const Scenario& scenario_;
  const RunRecords& records_;
  HeartbeatSpec spec_;
  std::vector<Declaration> declarations_;
  uint64_t heartbeats_received_ = 0;
  std::shared_ptr<const Analysis> analysis_;  // bounds and outages, computed once
};

}  // namespace dagsim::scenarios
