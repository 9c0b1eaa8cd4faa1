// NodeFibers: the fibers of one node incarnation, for every runtime (LocalRuntime, the simulator's
// SimWorld, the TCP node process next): one copy of the plumbing a Spawner needs.
//
// It owns the incarnation's lifetime (the root CancelScope: kill() cancels it, so every wait of the
// node unwinds with node_killed), starts fibers with their FiberContext on protected pooled
// stacks, counts them (per node and in the runtime's total, which the runtime compares with the
// fibers blocked in primitives at quiescence), reports a fiber that ended with an error other than
// an unwinding one through a callback, and describes its live fibers for stuck reports.
// join_killed_fibers() is the runtimes' shutdown loop.
//
// Threading: everything here runs on the runtime's thread (see core/runtime/spawner.h). The object
// must outlive its fibers: runtimes keep it until join_killed_fibers() has returned.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "core/runtime/cancel_scope.h"
#include "core/runtime/clock.h"
#include "core/runtime/fiber_context.h"
#include "core/runtime/spawner.h"

namespace dagsim::fibers {

class DeterministicScheduler;
class VirtualClock;

class NodeFibers {
 public:
  // Called when a fiber ends with an error other than node_killed / cancelled: the fiber and the
  // error's text.
  using OnFailure = std::function<void(const runtime::FiberContext& fiber, std::string what)>;

  // `clock` and `spawner` go into each fiber's context; `runtime_live` is the runtime's count of
  // live fibers over all nodes. All must outlive this object.
  NodeFibers(std::string node_name, runtime::Clock& clock, runtime::Spawner& spawner, size_t& runtime_live,
             size_t stack_bytes, OnFailure on_failure);
  ~NodeFibers();
  NodeFibers(const NodeFibers&) = delete;
  NodeFibers& operator=(const NodeFibers&) = delete;

  // The incarnation's root scope.
  const std::shared_ptr<runtime::ScopeState>& lifetime() const { return lifetime_; }
  bool killed() const { return lifetime_->cancelled(); }
  // Process death: every wait of the node throws node_killed, and spawn refuses. Idempotent.
  void kill() { lifetime_->cancel(); }

  // Starts `fn` on a new fiber in `scope` (nullptr: the root). `on_end` runs when the fiber has
  // ended, after the counts dropped (a runtime's foreground count, say).
  // Throws node_killed when the node is dead, `cancelled` when the scope is.
  // REQUIRES: `scope`, if set, lies in this node's scope tree.
  void spawn(std::shared_ptr<runtime::ScopeState> scope, std::string name, std::function<void()> fn,
             std::function<void()> on_end = nullptr);

  size_t live() const { return fibers_.size(); }

  // The node's GPUs, which every fiber spawned from now on sees (FiberContext::devices). The set
  // must outlive the node's fibers.
  void set_devices(const DeviceSet* devices) { devices_ = devices; }
  // Appends one line per live fiber: "  node <label>, fiber <name>[ in scope <s>]: waiting on <w>".
  void describe(std::string& report, std::string_view node_label) const;

 private:
  std::string node_name_;
  runtime::Clock& clock_;
  runtime::Spawner& spawner_;
  size_t& runtime_live_;
  size_t stack_bytes_;
  OnFailure on_failure_;
  std::shared_ptr<runtime::ScopeState> lifetime_;
  const DeviceSet* devices_ = nullptr;
  std::list<runtime::FiberContext> fibers_;  // live fibers; list nodes keep their addresses
};

// The shutdown loop of a runtime whose nodes were all killed: yields until `live` (the runtime's
// count) reaches zero. Killed fibers unwind at their blocking points without time passing; when
// none can run, `clock` (if given) fires its next timer, else a fiber survived its node's death
// (it swallowed node_killed and blocked again), which is a bug in that fiber and asserts with
// `stuck_report`.
void join_killed_fibers(const size_t& live, DeterministicScheduler& scheduler, VirtualClock* clock,
                        const std::function<std::string()>& stuck_report);

}  // namespace dagsim::fibers
