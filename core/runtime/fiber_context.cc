#include "core/runtime/fiber_context.h"

#include <boost/fiber/fss.hpp>

#include "core/base/assert.h"

namespace dagsim::runtime {

namespace {
// The cleanup function does nothing: contexts are owned by whoever spawned the fiber.
void no_cleanup(FiberContext*) {}
boost::fibers::fiber_specific_ptr<FiberContext>& slot() {
  static boost::fibers::fiber_specific_ptr<FiberContext> ptr(&no_cleanup);
  return ptr;
}
}  // namespace

void NodeLifetime::kill() {
  if (killed_) return;
  killed_ = true;
  // Copy: a woken waiter unregisters itself only once it runs, but be safe against re-entry.
  std::map<uint64_t, std::function<void()>> waiters = waiters_;
  for (auto& [token, on_kill] : waiters) on_kill();
}

uint64_t NodeLifetime::register_waiter(std::function<void()> on_kill) {
  const uint64_t token = ++next_token_;
  waiters_.emplace(token, std::move(on_kill));
  return token;
}

void NodeLifetime::unregister_waiter(uint64_t token) {
  const size_t erased = waiters_.erase(token);
  DAGSIM_ASSERT_EQ(erased, size_t{1});
}

FiberContext* current_fiber() { return slot().get(); }
void set_current_fiber(FiberContext* context) { slot().reset(context); }

}  // namespace dagsim::runtime
