#include "core/runtime/cancel_scope.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/runtime/fiber_context.h"
#include "core/runtime/spawner.h"
#include "core/runtime/wait.h"

namespace dagsim::runtime {

struct ScopeState::Join {
  FiberMutex mutex;
  FiberCondition cv;
};

ScopeState::ScopeState(std::string name, std::shared_ptr<ScopeState> parent)
    : name_(std::move(name)), parent_(std::move(parent)) {}

std::shared_ptr<ScopeState> ScopeState::make_root(std::string node_name) {
  return std::shared_ptr<ScopeState>(new ScopeState(std::move(node_name), nullptr));
}

std::shared_ptr<ScopeState> ScopeState::make_child(const std::shared_ptr<ScopeState>& parent, std::string name) {
  DAGSIM_ASSERT(parent != nullptr);
  if (parent->cancelled()) parent->throw_cancelled();
  std::shared_ptr<ScopeState> child(new ScopeState(std::move(name), parent));
  parent->children_.push_back(child.get());
  return child;
}

ScopeState::~ScopeState() {
  DAGSIM_ASSERT_MSG(waiters_.empty(), "scope " + name_ + " destroyed with waits registered");
  DAGSIM_ASSERT_MSG(live_fibers_ == 0, "scope " + name_ + " destroyed with live fibers");
  if (parent_) {
    auto& siblings = parent_->children_;
    auto it = std::find(siblings.begin(), siblings.end(), this);
    DAGSIM_ASSERT(it != siblings.end());
    siblings.erase(it);
  }
}

bool ScopeState::within(const ScopeState& other) const {
  for (const ScopeState* s = this; s != nullptr; s = s->parent_.get()) {
    if (s == &other) return true;
  }
  return false;
}

void ScopeState::collect(std::map<uint64_t, std::function<void()>>& out) {
  cancelled_ = true;
  for (const auto& [token, wake] : waiters_) out.emplace(token, wake);
  for (ScopeState* child : children_) child->collect(out);
}

void ScopeState::cancel() {
  if (cancelled_) return;
  // Gather first: a wake only sets a flag and notifies, but the set of waits must not change
  // under the loop. Tokens come from the root's counter, so this is registration order.
  std::map<uint64_t, std::function<void()>> wakes;
  collect(wakes);
  for (auto& [token, wake] : wakes) wake();
}

void ScopeState::throw_cancelled() const {
  DAGSIM_ASSERT(cancelled_);
  if (node_dead()) throw errors::node_killed(node_name());
  // Name the outermost cancelled scope: the one whose cancel() was called.
  const ScopeState* origin = this;
  while (origin->parent_ != nullptr && origin->parent_->cancelled_) origin = origin->parent_.get();
  throw errors::cancelled("scope " + origin->name_ + " on node " + node_name() + " was cancelled");
}

uint64_t ScopeState::register_waiter(std::function<void()> wake) {
  const uint64_t token = ++root_mut().next_token_;
  waiters_.emplace(token, std::move(wake));
  return token;
}

void ScopeState::unregister_waiter(uint64_t token) {
  const size_t erased = waiters_.erase(token);
  DAGSIM_ASSERT_EQ(erased, size_t{1});
}

void ScopeState::fiber_started() {
  DAGSIM_ASSERT(!cancelled_);
  ++live_fibers_;
}

void ScopeState::fiber_ended() {
  DAGSIM_ASSERT(live_fibers_ > 0);
  if (!join_) {
    --live_fibers_;
    return;
  }
  FiberLock lock(join_->mutex);
  --live_fibers_;
  join_->cv.notify_all();
}

bool ScopeState::join_until(std::optional<TimePoint> deadline) {
  FiberContext* self = current_fiber();
  DAGSIM_ASSERT_MSG(self == nullptr || self->scope == nullptr || !self->scope->within(*this),
                    "a fiber cannot join the scope it runs in: " + name_);
  if (!join_) join_ = std::make_unique<Join>();
  FiberLock lock(join_->mutex);
  return block_until(join_->cv, lock, [this] { return live_fibers_ == 0; }, deadline, "CancelScope::join");
}

// CancelScope --------------------------------------------------------------------------------------

namespace {
const std::shared_ptr<ScopeState>& current_scope() {
  FiberContext* self = current_fiber();
  DAGSIM_ASSERT_MSG(self != nullptr && self->scope != nullptr,
                    "a CancelScope without a parent needs a fiber started by a Spawner");
  return self->scope;
}
}  // namespace

CancelScope::CancelScope(std::string name) : state_(ScopeState::make_child(current_scope(), std::move(name))) {}

CancelScope::CancelScope(std::string name, const CancelScope& parent)
    : state_(ScopeState::make_child(parent.state_, std::move(name))) {}

CancelScope::CancelScope(std::string name, const Spawner& node)
    : state_(ScopeState::make_child(node.lifetime(), std::move(name))) {}

CancelScope::Enter::Enter(const CancelScope& scope) {
  FiberContext* self = current_fiber();
  DAGSIM_ASSERT_MSG(self != nullptr && self->scope != nullptr, "CancelScope::Enter needs a fiber started by a Spawner");
  DAGSIM_ASSERT_MSG(scope.state()->within(*self->scope),
                    "CancelScope::Enter: " + scope.name() + " is not inside the fiber's scope " + self->scope->name());
  previous_ = self->scope;
  self->scope = scope.state();
}

CancelScope::Enter::~Enter() {
  FiberContext* self = current_fiber();
  DAGSIM_ASSERT(self != nullptr);
  self->scope = std::move(previous_);
}

bool is_unwinding(const Error& e) {
  return e.code() == ErrorCode::node_killed || e.code() == ErrorCode::cancelled;
}

void rethrow_if_unwinding(const Error& e) {
  if (is_unwinding(e)) throw;
}

}  // namespace dagsim::runtime
