// SimWorld: a whole simulated cluster on one OS thread (DESIGN.md, "Simulator").
//
// Every node is a set of Boost.Fiber fibers under the DeterministicScheduler; the calling fiber is
// the driver: it owns virtual time (a VirtualClock ordered by (time, sequence)) and moves it only
// when no node fiber is ready, firing one event at a time. It never runs node code: timers and
// deliveries only wake fibers. Nodes talk through SimNetwork (sim_network.h), each sees time
// through its own NodeClock (skew, drift), and each life of a node is an Incarnation with its own
// Env, so a restarted node is a fresh process with fresh state and a new incarnation number. An
// incarnation's fibers, its lifetime (root CancelScope) and its stuck-report lines are a
// fibers::NodeFibers, the plumbing LocalRuntime shares.
//
// Promises: the same options and the same calls give the same run, byte for byte (trace().hash());
// run() always returns: the workload finished, the stop time came, max_virtual_time passed, or no
// fiber can ever wake again, with a stuck report naming each blocked fiber, its node and what it
// waits on; an exception in a node fiber is recorded against its node, never std::terminate;
// destruction kills every node and joins every fiber. One SimWorld runs per thread at a time.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fibers/scheduler.h"
#include "core/fibers/virtual_clock.h"
#include "core/runtime/cluster.h"
#include "core/runtime/env.h"
#include "core/runtime/network_model.h"
#include "sim/node_clock.h"
#include "sim/trace.h"

namespace dagsim::sim {

// The network model is runtime-neutral (core/runtime/network_model.h); the simulator samples it.
using runtime::LatencyModel;
using runtime::LinkModel;
using runtime::NetworkModel;

class SimNetwork;

struct SimOptions {
  uint64_t seed = 1;
  bool random_schedule = false;  // seeded random pick among ready fibers instead of FIFO
  NetworkModel network;
  Duration clock_skew_max{0};    // each node's clock offset, uniform in [0, max]
  int64_t clock_drift_max_ppm = 0;  // each node's rate error, uniform in [-max, +max]
  bool keep_trace_events = false;   // needed for Chrome trace output
  size_t stack_bytes = 256 * 1024;  // protected fiber stacks
};

// Node states and the fault history are the Cluster's, runtime-neutral (core/runtime/cluster.h).
using runtime::FaultEvent;
using runtime::NodeState;
using runtime::node_state_name;

struct FiberFailure {
  TimePoint time;
  std::string node;
  std::string fiber;
  std::string what;
};

struct RunLimits {
  std::optional<TimePoint> stop_at = std::nullopt;  // the workload's end: stop once time would pass it
  TimePoint max_virtual_time = TimePoint{std::chrono::seconds(60)};
};

class SimWorld final : public runtime::Cluster {
 public:
  // finished: every foreground fiber ended (if this run had any: live at its start or spawned
  // during it), or stop_at came. idle: nothing can happen any more
  // and no foreground fiber was waiting. time_limit: max_virtual_time came first. deadlock: a
  // foreground fiber waits and nothing can ever wake it. livelock: virtual time stopped moving
  // (kMaxRoundsPerInstant driver rounds at one instant: fibers re-arming zero-delay timers).
  enum class Outcome { finished, idle, time_limit, deadlock, livelock };
  static constexpr uint64_t kMaxRoundsPerInstant = 1'000'000;
  // Run by every incarnation of a node, on a fiber of that incarnation, with its Env.
  using NodeMain = std::function<void(runtime::Env&)>;
  using Progress = std::function<void(TimePoint now, uint64_t events)>;

  explicit SimWorld(SimOptions options);
  ~SimWorld() override;
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  // Adds a node, not yet started. `main` runs on a fiber named "main" each time the node starts
  // or restarts, with that incarnation's Env. Ids are dense, from 0.
  // Adds a node, not yet started; returns its id (dense, from 0). Each incarnation runs `main`.
  WorkerId add_node(std::string name, NodeMain main);
  // A node with no main function of its own: tests and benchmarks drive its Env from outside.
  WorkerId add_node(std::string name) { return add_node(std::move(name), NodeMain{}); }
  size_t num_nodes() const override { return nodes_.size(); }
  const std::string& node_name(WorkerId node) const override;
  std::vector<std::string> node_names() const;

  // Node lifecycle. All are immediate and may be called from the driver (before or between runs,
  // or from an `at` event), never from a node fiber of the node itself.
  void start(WorkerId node) override;
  void kill(WorkerId node) override;     // process death: peers told after about one latency
  void crash(WorkerId node) override;    // host silence: peers learn only through timeouts
  void restart(WorkerId node) override;  // a fresh incarnation (kills a live one first)
  void pause(WorkerId node) override;
  void resume(WorkerId node) override;
  // Blocks every directed pair; returns the partition's id for heal().
  uint64_t partition(std::vector<std::pair<WorkerId, WorkerId>> blocked) override;
  void heal(uint64_t partition_id) override;
  void heal_all() override;

  NodeState state(WorkerId node) const override;
  uint32_t incarnation(WorkerId node) const override;
  // The running incarnation's Env. REQUIRES: the node is up or paused.
  runtime::Env& env(WorkerId node);
  // The node's GPUs (core/tensor/device.h), which every incarnation's fibers see from now on (the
  // hardware outlives a process). `devices` must outlive the world; their clock is the node's.
  void set_devices(WorkerId node, const DeviceSet* devices);
  // The node's own clock, which outlives its incarnations (a SimGpu's).
  NodeClock& node_clock(WorkerId node);
  const NodeClock& clock(WorkerId node) const;

  // Starts `fn` on a fiber of `node` that the run waits for: run() finishes when every
  // foreground fiber has ended. REQUIRES: the node is up.
  void spawn_foreground(WorkerId node, std::string name, std::function<void()> fn);
  // Runs `fn` on the driver at world time `t` (faults, workload phases). `fn` must not block.
  void at(TimePoint t, std::string what, std::function<void()> fn) override;

  Outcome run(RunLimits limits);
  // Kills every node quietly and joins their fibers: background fibers end with the workload.
  void shutdown();

  TimePoint now() const override { return clock_.now(); }
  Trace& trace() { return trace_; }
  const Trace& trace() const { return trace_; }
  SimNetwork& network() { return *network_; }
  const std::vector<FaultEvent>& fault_history() const override { return history_; }
  const std::vector<FiberFailure>& failures() const { return failures_; }
  size_t live_fibers() const { return live_fibers_; }
  uint64_t driver_steps() const { return steps_; }
  // One line per live fiber: its node, incarnation, name and what it waits on.
  std::string stuck_report() const;
  void set_progress(Progress progress) { progress_ = std::move(progress); }

  // Used by SimNetwork: hands a delivery to the node's running incarnation (or holds it while the
  // node is paused). Returns false if `incarnation` is no longer running.
  bool deliver(WorkerId node, uint32_t incarnation, runtime::Delivery&& delivery) {
    return deliver_made(node, incarnation, [&delivery]() -> runtime::Delivery&& { return std::move(delivery); });
  }
  // The same for the delivery `make()` returns, built where it is kept (Channel::offer_made): the
  // per-message path, one Delivery move and destruction less. `make` runs only if it is kept.
  template <typename Make>
  bool deliver_made(WorkerId node, uint32_t incarnation, Make&& make) {
    runtime::Channel<runtime::Delivery>* inbox = open_inbox(node, incarnation);
    if (inbox == nullptr) return false;
    if (paused(node)) {
      hold_while_paused(node, make());
      return true;
    }
    // offer, never push: the driver must not get channel_closed thrown at it.
    return inbox->offer_made(make);
  }
  Prng& random_stream() { return network_random_; }
  fibers::VirtualClock& world_clock() { return clock_; }
  void note_connection_failure(WorkerId a, WorkerId b, const std::string& reason);
  // A connection attempt from `a` that `b` refused (it is not running): in the fault history as a
  // connection failure, as the TCP runtime records each refused dial, but not in the trace, which
  // already has the send's drop and will have the notice when `a` is told.
  void note_connection_refused(WorkerId a, WorkerId b);

 private:
  struct Node;
  struct Incarnation;
  class IncarnationSpawner;
  class SimTransport;
  class TraceLog;

  Node& node(WorkerId id);
  const Node& node(WorkerId id) const;
  // deliver_made's parts: the inbox of `incarnation` of `node` if it is running and listening,
  // else null; whether the node is paused; keeping a delivery until it resumes.
  runtime::Channel<runtime::Delivery>* open_inbox(WorkerId node, uint32_t incarnation);
  bool paused(WorkerId node) const;
  void hold_while_paused(WorkerId node, runtime::Delivery delivery);
  void begin_incarnation(Node& node);
  void end_incarnation(Node& node, NodeState new_state);
  void spawn_on(Incarnation& inc, std::shared_ptr<runtime::ScopeState> scope, std::string name,
                std::function<void()> fn, bool foreground);
  void record_fault(FaultEvent event, std::string detail);
  void check_quiescent() const;

  SimOptions options_;
  fibers::DeterministicScheduler& scheduler_;
  fibers::VirtualClock clock_;
  Trace trace_;
  Prng world_random_;    // clock skews and drifts, at add_node
  Prng network_random_;  // latency samples and connection failures
  std::unique_ptr<SimNetwork> network_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<FaultEvent> history_;
  std::vector<FiberFailure> failures_;
  uint64_t next_partition_ = 0;
  size_t live_fibers_ = 0;
  size_t foreground_live_ = 0;
  bool foreground_started_ = false;
  uint64_t steps_ = 0;
  TimePoint last_instant_ = TimePoint::max();
  uint64_t rounds_at_instant_ = 0;
  Progress progress_;
};

}  // namespace dagsim::sim
