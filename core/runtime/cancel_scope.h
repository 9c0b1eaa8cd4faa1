// CancelScope: a group of fibers and waits that can be cancelled without killing their node
// (DESIGN.md, "Cancellation scopes"): a rendezvous round's keep-alive, an elastic worker group, the
// background fibers of an engine that is being destroyed.
//
// Scopes form a tree per node incarnation. Its root is the node's lifetime: cancelling the root is
// the node's death. cancel() on a scope cancels it and every scope below it; each wait registered
// there wakes and throws from its blocking point: node_killed when the root was cancelled (death
// wins over any scope), `cancelled` (naming the scope) otherwise. A cancelled scope refuses new
// fibers. Its owner can wait until the fibers spawned into it have unwound (join).
//
// Which scope a wait belongs to: a fiber spawned into a scope carries it in its FiberContext, so the
// primitives (Event, Future, Channel, Mutex, Clock::sleep_until, block_until) need no argument; a
// fiber can also put a block of its own code into a scope with CancelScope::Enter.
//
// Determinism: cancel() wakes the waits of the whole subtree in the order they were registered
// (one counter per node), so a kill wakes its fibers in the same order as before scopes existed.
// Threading: a scope tree belongs to its node's thread (see spawner.h); cancel() is called from a
// node fiber or the driver, never from a timer callback of another thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/runtime/clock.h"

namespace dagsim::runtime {

class Spawner;

// The shared state of one scope. Fibers spawned into it hold it (shared_ptr), so it outlives the
// CancelScope handle that named it; a child holds its parent.
class ScopeState {
 public:
  // A node incarnation's root scope (its lifetime).
  static std::shared_ptr<ScopeState> make_root(std::string node_name);
  // A scope inside `parent`. Throws `cancelled`/node_killed when `parent` is already cancelled.
  static std::shared_ptr<ScopeState> make_child(const std::shared_ptr<ScopeState>& parent, std::string name);
  ~ScopeState();
  ScopeState(const ScopeState&) = delete;
  ScopeState& operator=(const ScopeState&) = delete;

  const std::string& name() const { return name_; }
  bool is_root() const { return parent_ == nullptr; }
  const ScopeState& root() const { return parent_ ? parent_->root() : *this; }
  // The node's name (the root's), for error messages.
  const std::string& node_name() const { return root().name_; }
  // This scope or one above it was cancelled (cancel cascades down, so this is one flag).
  bool cancelled() const { return cancelled_; }
  bool node_dead() const { return root().cancelled_; }
  // True when this scope lies in `other`'s subtree (or is it).
  bool within(const ScopeState& other) const;

  // Cancels this scope and its subtree and wakes their waits. Idempotent.
  void cancel();
  // Throws node_killed if the node is dead, else `cancelled` naming the cancelled scope.
  // REQUIRES: cancelled().
  [[noreturn]] void throw_cancelled() const;

  // Waits: `wake` runs once, on cancel(), and must not block (it sets a flag and notifies).
  uint64_t register_waiter(std::function<void()> wake);
  void unregister_waiter(uint64_t token);

  // Fibers spawned into this scope (the runtimes' NodeFibers keep the count).
  void fiber_started();
  void fiber_ended();
  size_t live_fibers() const { return live_fibers_; }
  // Blocks until every fiber spawned into this scope has ended; false if `deadline` came first.
  // The caller's own waits still unwind on its own cancellation. REQUIRES: the caller is not in it.
  bool join_until(std::optional<TimePoint> deadline);

 private:
  ScopeState(std::string name, std::shared_ptr<ScopeState> parent);
  // Adds the wakes of this subtree to `out`, by token (registration order across the node).
  void collect(std::map<uint64_t, std::function<void()>>& out);
  ScopeState& root_mut() { return parent_ ? parent_->root_mut() : *this; }

  std::string name_;
  std::shared_ptr<ScopeState> parent_;
  bool cancelled_ = false;
  uint64_t next_token_ = 0;  // used on the root only: one order for the whole node
  std::map<uint64_t, std::function<void()>> waiters_;
  std::vector<ScopeState*> children_;  // in creation order
  size_t live_fibers_ = 0;
  struct Join;
  std::unique_ptr<Join> join_;  // the joiners' condition, made on first join
};

// The handle code holds. Destroying it cancels the scope: fibers still in it unwind at their next
// blocking point and never run past it, so an object that owns a scope may hand `this` to the
// fibers it spawns there (they must not touch it while unwinding, see rethrow_if_unwinding).
class CancelScope {
 public:
  // A scope inside the running fiber's current scope. REQUIRES: a fiber started by a Spawner.
  explicit CancelScope(std::string name);
  // A scope inside `parent`.
  CancelScope(std::string name, const CancelScope& parent);
  // A scope directly under the lifetime of `node`'s incarnation (from the driver, or an engine's
  // constructor that may run outside a fiber).
  CancelScope(std::string name, const Spawner& node);
  ~CancelScope() { state_->cancel(); }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

  void cancel() { state_->cancel(); }
  bool cancelled() const { return state_->cancelled(); }
  const std::string& name() const { return state_->name(); }
  size_t live_fibers() const { return state_->live_fibers(); }
  // Blocks until every fiber spawned into this scope has ended (typically after cancel()).
  void join() { state_->join_until(std::nullopt); }
  bool join_until(TimePoint deadline) { return state_->join_until(deadline); }
  const std::shared_ptr<ScopeState>& state() const { return state_; }

  // While alive, the running fiber's waits belong to `scope`: its cancel() unwinds them too.
  // Nests; restores the previous scope on destruction. REQUIRES: `scope` lies within the fiber's
  // current scope (a fiber cannot leave its own scope by entering a sibling).
  class Enter {
   public:
    explicit Enter(const CancelScope& scope);
    ~Enter();
    Enter(const Enter&) = delete;
    Enter& operator=(const Enter&) = delete;

   private:
    std::shared_ptr<ScopeState> previous_;
  };

 private:
  std::shared_ptr<ScopeState> state_;
};

// The one rule for catch sites: an error that unwinds a fiber (its node died, or its scope was
// cancelled) must propagate, never become a reply, a log line or a retry.
bool is_unwinding(const Error& e);
// Rethrows the exception being handled when is_unwinding(e). Call it first in the handler that
// caught `e` (`catch (const Error& e) { rethrow_if_unwinding(e); ... }`): it uses `throw;`.
void rethrow_if_unwinding(const Error& e);

}  // namespace dagsim::runtime
