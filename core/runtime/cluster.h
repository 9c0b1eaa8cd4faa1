// Cluster: the runtime-neutral view of a scenario's nodes (DESIGN.md, "One seam for both runtimes").
//
// A runner and a fault timeline drive a Cluster; they never see how its nodes run. SimWorld
// (sim/) implements it with fibers on one thread and virtual time; the TCP launcher
// (scenarios/run/tcp_launcher.cc) with one process per node. A Cluster is the control side only:
// what a node runs is its runtime's to set up (SimWorld::add_node takes a function for its fibers;
// a TCP node process, on this host or another, builds the scenario's workload itself), since a
// function cannot cross to a process on another host. A Cluster promises:
//  - nodes are named and numbered densely from 0 in the order they were added, and every start or
//    restart of a node begins a new incarnation, numbered from 0 (a restarted node is a fresh
//    process with fresh state);
//  - the lifecycle calls take effect at once and are recorded, in order, in fault_history(), with
//    the scenario's time: the history is data, so checks judge it after the run, on any host;
//  - now() is the scenario's clock, the one every record's timestamp is on: the simulator's true
//    world time, or the launcher's wall time since the run began;
//  - at() runs a function at a scenario time on the cluster's control side (the simulator's
//    driver, the launcher's loop), never on a node: it may change the cluster and must not block.
//
// Threading: every call comes from the cluster's control side (the thread that runs it), never
// from a node's fiber.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/ids.h"
#include "core/runtime/clock.h"
#include "core/runtime/env.h"

namespace dagsim::runtime {

enum class NodeState : uint8_t { not_started, up, paused, killed, crashed };
std::string_view node_state_name(NodeState state);
// The state named `name` (node_state_name's inverse); false if there is none.
bool parse_node_state(std::string_view name, NodeState& state);

// What happened to nodes and links, in order, for checks that reason about faults.
struct FaultEvent {
  enum class Kind : uint8_t { start, kill, crash, restart, pause, resume, partition, heal, connection_failed };
  Kind kind = Kind::start;
  TimePoint time;          // the scenario's time
  WorkerId node = 0;       // node faults; connection_failed: one end
  WorkerId peer = 0;       // connection_failed: the other end
  uint64_t partition = 0;  // partition/heal: its id (heal with 0: every partition)
  std::vector<std::pair<WorkerId, WorkerId>> blocked;  // partition: the directed pairs it blocks

  friend bool operator==(const FaultEvent&, const FaultEvent&) = default;
};
std::string_view fault_event_kind_name(FaultEvent::Kind kind);
bool parse_fault_event_kind(std::string_view name, FaultEvent::Kind& kind);

class Cluster {
 public:
  virtual ~Cluster() = default;

  virtual size_t num_nodes() const = 0;
  virtual const std::string& node_name(WorkerId node) const = 0;
  // The node named `name`, or nullopt.
  std::optional<WorkerId> find_node(std::string_view name) const {
    for (WorkerId id = 0; id < num_nodes(); ++id) {
      if (node_name(id) == name) return id;
    }
    return std::nullopt;
  }
  virtual NodeState state(WorkerId node) const = 0;
  // The running incarnation's number, or the last one's when none runs.
  virtual uint32_t incarnation(WorkerId node) const = 0;

  // The lifecycle. start: the first incarnation. kill: the process dies (peers told after about
  // one latency). crash: the host goes silent (peers learn through timeouts). restart: a fresh
  // incarnation (a live one is killed first). pause/resume: the process stops and continues.
  virtual void start(WorkerId node) = 0;
  virtual void kill(WorkerId node) = 0;
  virtual void crash(WorkerId node) = 0;
  virtual void restart(WorkerId node) = 0;
  virtual void pause(WorkerId node) = 0;
  virtual void resume(WorkerId node) = 0;
  // Blocks every directed pair; returns the partition's id for heal().
  virtual uint64_t partition(std::vector<std::pair<WorkerId, WorkerId>> blocked) = 0;
  virtual void heal(uint64_t partition_id) = 0;
  virtual void heal_all() = 0;

  // The scenario's clock.
  virtual TimePoint now() const = 0;
  // Runs `fn` at scenario time `t` on the control side. `what` names it in traces and reports.
  virtual void at(TimePoint t, std::string what, std::function<void()> fn) = 0;
  virtual const std::vector<FaultEvent>& fault_history() const = 0;
};

}  // namespace dagsim::runtime
