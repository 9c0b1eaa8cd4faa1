// Spawner: starts fibers that belong to one node (the third part of the Env seam).
//
// A spawned fiber gets the node's FiberContext (its Clock, its scope), so the node's death, or the
// cancellation of the scope it was spawned into, unwinds its waits. The entry point catches
// everything: node_killed and `cancelled` end the fiber quietly (it unwound as intended), any other
// exception is reported to the node (an exception never escapes a fiber, where Boost would call
// std::terminate).
//
// Threading (the contract every runtime keeps; DESIGN.md, "Threading"):
//  - A node's fibers, its timer callbacks and its scope tree live on one OS thread: in the
//    simulator and LocalRuntime the one thread of the whole world; in the TCP runtime the node
//    process's scheduler thread. Nothing of a node is touched from another thread except its
//    inbox (transport.h).
//  - spawn may be called from a node fiber of this node, or from the runtime's driver (the code
//    that starts nodes and moves time), never from a timer callback (Clock::call_at: those only
//    wake waiters) and never from another node's fibers (they hold their own Spawner).
//  - The new fiber runs when the scheduler next picks it, never inline in the caller.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/runtime/cancel_scope.h"

namespace dagsim::runtime {

class Spawner {
 public:
  virtual ~Spawner() = default;

  // Starts `fn` on a new fiber of this node, in the node's own scope (only its death cancels it).
  // Throws node_killed when the node is dead.
  void spawn(std::string name, std::function<void()> fn) { spawn_in(nullptr, std::move(name), std::move(fn)); }
  // Starts `fn` in `scope`: its cancel() unwinds the fiber, and its join() waits for it.
  // Throws `cancelled` when the scope is cancelled, node_killed when the node is dead.
  void spawn(const CancelScope& scope, std::string name, std::function<void()> fn) {
    spawn_in(scope.state(), std::move(name), std::move(fn));
  }

  // The node incarnation's root scope: its lifetime, cancelled by its death. Scopes that engines
  // make outside a fiber (at construction, from the driver) hang under it.
  virtual const std::shared_ptr<ScopeState>& lifetime() const = 0;

  // The implementation: `scope` nullptr means the node's root scope.
  // REQUIRES: `scope`, if set, belongs to this node incarnation.
  virtual void spawn_in(std::shared_ptr<ScopeState> scope, std::string name, std::function<void()> fn) = 0;
};

}  // namespace dagsim::runtime
