#include "core/fibers/node_fibers.h"

#include <boost/fiber/fiber.hpp>
#include <boost/fiber/operations.hpp>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/fibers/fiber_entry.h"
#include "core/fibers/scheduler.h"
#include "core/fibers/stack_pool.h"
#include "core/fibers/virtual_clock.h"
#include "core/runtime/wait.h"

namespace dagsim::fibers {

using runtime::FiberContext;
using runtime::ScopeState;

NodeFibers::NodeFibers(std::string node_name, runtime::Clock& clock, runtime::Spawner& spawner, size_t& runtime_live,
                       size_t stack_bytes, OnFailure on_failure)
    : node_name_(std::move(node_name)), clock_(clock), spawner_(spawner), runtime_live_(runtime_live),
      stack_bytes_(stack_bytes), on_failure_(std::move(on_failure)), lifetime_(ScopeState::make_root(node_name_)) {}

NodeFibers::~NodeFibers() {
  DAGSIM_ASSERT_MSG(fibers_.empty(), "node " + node_name_ + " destroyed with live fibers");
}

void NodeFibers::spawn(std::shared_ptr<ScopeState> scope, std::string name, std::function<void()> fn,
                       std::function<void()> on_end) {
  if (scope == nullptr) scope = lifetime_;
  DAGSIM_ASSERT_MSG(scope->within(*lifetime_), "spawn of " + name + " on " + node_name_ + " into scope " + scope->name() +
                                                   " of another node or incarnation");
  if (killed()) throw errors::node_killed(node_name_ + ": cannot spawn " + name);
  if (scope->cancelled()) {
    throw errors::cancelled(node_name_ + ": cannot spawn " + name + " into cancelled scope " + scope->name());
  }
  scope->fiber_started();
  auto context = fibers_.insert(fibers_.end(), FiberContext{node_name_, std::move(name), scope, &clock_, &spawner_, nullptr, devices_, {}});
  ++runtime_live_;
  ScopeState& joined = *scope;  // the context holds it alive
  try {
    boost::fibers::fiber fiber(
        std::allocator_arg, PooledStack(StackPool::for_this_thread(stack_bytes_)),
        [this, context, scope = std::move(scope), fn = std::move(fn), on_end = std::move(on_end)]() mutable {
          if (auto failure = run_fiber_body(*context, fn)) on_failure_(*context, std::move(*failure));
          // `scope` is the one the fiber was spawned into, whose count it joined (and which this
          // capture keeps alive until the count drops).
          fibers_.erase(context);
          --runtime_live_;
          scope->fiber_ended();
          if (on_end) on_end();
        });
    fiber.detach();
  } catch (...) {
    // No stack (std::bad_alloc under a memory limit): no fiber, so nothing of it may stay
    // counted, or the runtime would later take a live count for a leaked wait.
    --runtime_live_;
    joined.fiber_ended();
    fibers_.erase(context);
    throw;
  }
}

void NodeFibers::describe(std::string& report, std::string_view node_label) const {
  for (const FiberContext& fiber : fibers_) {
    report += "  node ";
    report += node_label;
    report += ", fiber " + fiber.fiber_name;
    if (fiber.scope != nullptr && !fiber.scope->is_root()) report += " in scope " + fiber.scope->name();
    report += ": waiting on ";
    report += fiber.waiting_on != nullptr ? fiber.waiting_on : "nothing (ready to run)";
    report += "\n";
  }
}

void join_killed_fibers(const size_t& live, DeterministicScheduler& scheduler, VirtualClock* clock,
                        const std::function<std::string()>& stuck_report) {
  while (live > 0) {
    const size_t before = live;
    boost::this_fiber::yield();
    if (live < before || scheduler.ready_workers() > 0) continue;
    runtime::assert_quiescent(live, stuck_report);
    DAGSIM_ASSERT_MSG(clock != nullptr && clock->has_timers(), "fibers survived their node's death:\n" + stuck_report());
    clock->fire_next();
  }
  boost::this_fiber::yield();  // let the dispatcher free terminated fibers
}

}  // namespace dagsim::fibers
