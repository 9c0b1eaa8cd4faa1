// HeartbeatWorkload: the first workload, a heartbeat failure detector (the shape rendezvous's
// keep-alives take later).
//
// Every node except the monitor sends a heartbeat to the monitor every `interval` of its own
// clock. The monitor declares a node dead after `interval × max_attempts` of its own clock
// without one, and alive again when heartbeats resume. It knows only what heartbeats tell it:
// connection-failure notices are ignored, as a detector over an unreliable transport must.
//
// Every declaration is recorded with the world's true time, so the checks (heartbeat_checks.cc)
// can hold the detector to its bounds under the faults the world recorded.
#pragma once

#include <vector>

#include "scenarios/workload.h"

namespace dagsim::scenarios {

struct Declaration {
  runtime::TimePoint time;  // world (true) time
  uint32_t node = 0;
  bool dead = true;         // false: declared alive again
  uint32_t monitor_incarnation = 0;
};

class HeartbeatWorkload final : public Workload {
 public:
  explicit HeartbeatWorkload(const Scenario& scenario);

  sim::SimWorld::NodeMain node_main(uint32_t index) override;
  void install(sim::SimWorld& world) override { world_ = &world; }
  std::optional<runtime::TimePoint> end_time() const override { return runtime::TimePoint{spec_.duration}; }
  CheckResult check(const CheckSpec& spec, const sim::SimWorld& world) const override;
  nlohmann::json results(const sim::SimWorld& world) const override;

  const std::vector<Declaration>& declarations() const { return declarations_; }
  uint64_t heartbeats_received() const { return heartbeats_received_; }
  // For tests that prove the checks can fail (RunOptions::before_checks).
  std::vector<Declaration>& mutable_declarations_for_testing() { return declarations_; }

 private:
  void run_monitor(runtime::Env& env);
  void run_sender(runtime::Env& env);

  const Scenario& scenario_;
  HeartbeatSpec spec_;
  sim::SimWorld* world_ = nullptr;
  std::vector<Declaration> declarations_;
  uint64_t heartbeats_received_ = 0;
};

}  // namespace dagsim::scenarios
