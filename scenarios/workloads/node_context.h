// NodeContext: one incarnation of one node, as a workload sees it, whichever runtime runs it.
//
// One class serves both runtimes, as TigerBeetle's simulated MessageBus and its real one are one
// interface over two IOs: what differs between the simulator and a node process (the scenario's
// clock, how a foreground fiber is counted, where a workload event goes, whether there is an
// outside world) is a NodeRuntime, which each runtime implements once (runner.cc, tcp_node.cc).
// Everything else a workload touches (its Env, its record, its end-of-run hooks, event reports)
// is this class's, the same code on both.
//
// Promises:
//  - record() is the JSON object the judge gets for this incarnation, gathered when the run ends
//    whether or not the incarnation survived;
//  - at_end hooks run once, in the order given, and a hook that adds another does not disturb them;
//  - report() never blocks and never fails: an event no fault waits for is dropped by the runtime.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/runtime/env.h"
#include "core/store/store.h"
#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

// Services outside the cluster (a real etcd): only a node process has them. The simulator has no
// outside world, which keeps its runs a function of the seed.
class OutsideWorld {
 public:
  virtual ~OutsideWorld() = default;
  // Starts a throwaway etcd server (Debian's etcd-server) that lives as long as this incarnation;
  // returns its "host:port".
  virtual std::string start_etcd() = 0;
  // The etcd start_etcd() started: killed (SIGKILL; its port refuses from then on), and started
  // again as an operator restarts one, with the same ports and data (every acknowledged write and
  // its revision kept). Starting blocks this node's thread until etcd answers.
  virtual void kill_etcd() = 0;
  virtual void restart_etcd() = 0;
  // An etcd v3 client (store.h's semantics) on this node's I/O loop, its keys under `prefix`.
  virtual std::unique_ptr<store::Store> connect_etcd(const std::string& endpoint, const std::string& prefix) = 0;
};

// What a runtime supplies under every NodeContext of its nodes.
class NodeRuntime {
 public:
  virtual ~NodeRuntime() = default;
  // The scenario's clock (runtime::Cluster::now()): the simulator's true world time; in a node
  // process, wall time since the run began.
  virtual runtime::TimePoint scenario_now() const = 0;
  // Starts `fn` on a fiber of the running incarnation of `node` that the run waits for.
  virtual void spawn_foreground(WorkerId node, std::string name, std::function<void()> fn) = 0;
  // Whether a fault waits for this kind of event (a workload may skip the work of reporting others).
  virtual bool wants(WorkloadEvent event) const = 0;
  // A workload event at scenario_now(), for faults that strike on it (FaultTrigger).
  virtual void report(WorkerId node, WorkloadEvent event, uint64_t value) = 0;
  // Null where there is none (the simulator).
  virtual OutsideWorld* outside_world() { return nullptr; }
};

class NodeContext final {
 public:
  NodeContext(NodeRuntime& runtime, runtime::Env& env, nlohmann::json& record);
  NodeContext(const NodeContext&) = delete;
  NodeContext& operator=(const NodeContext&) = delete;

  runtime::Env& env() { return env_; }
  // The node's index in the scenario (its WorkerId) and which life of it this is.
  uint32_t index() const { return env_.self; }
  uint32_t incarnation() const { return env_.incarnation; }
  // What this incarnation observed, for the judge: a JSON object the workload fills as it goes.
  nlohmann::json& record() { return record_; }
  // The scenario's clock: every record's timestamp is on it.
  runtime::TimePoint scenario_now() const { return runtime_.scenario_now(); }
  // Starts `fn` on a fiber of this node that the run waits for: the run's work is done when
  // every foreground fiber has ended.
  void spawn_foreground(std::string name, std::function<void()> fn);
  // Runs `fn` once the run's work and drain are over, if this incarnation is still running then,
  // before the node stops (final snapshots: contexts still held). It must not block.
  void at_end(std::function<void()> fn) { at_end_.push_back(std::move(fn)); }
  // Reports a workload event (scenario.h, WorkloadEvent) with its number; a backward pass's number
  // is counted here, per incarnation, from 1.
  void report(WorkloadEvent event, uint64_t value);
  void report_backward() { report(WorkloadEvent::backward, ++backward_passes_); }
  // Whether any fault of the run waits for `event`: reporting it may be skipped otherwise.
  bool wants(WorkloadEvent event) const { return runtime_.wants(event); }

  // The outside world, or Error(invalid_argument) saying the simulator has none.
  OutsideWorld& outside_world();
  static constexpr const char* kNoOutsideWorld =
      "the etcd backend needs --transport tcp: the simulator has no outside services (use the built-in store)";

  // The runtime's part: runs the at_end hooks (once the run's work and drain are over).
  void run_at_end();

 private:
  NodeRuntime& runtime_;
  runtime::Env& env_;
  nlohmann::json& record_;
  std::vector<std::function<void()>> at_end_;
  uint64_t backward_passes_ = 0;
};

}  // namespace dagsim::scenarios
