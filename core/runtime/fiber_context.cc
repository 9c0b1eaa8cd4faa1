#include "core/runtime/fiber_context.h"

#include <boost/fiber/context.hpp>
#include <boost/fiber/fss.hpp>

namespace dagsim::runtime {

namespace {
// The cleanup function does nothing: contexts are owned by whoever spawned the fiber.
void no_cleanup(FiberContext*) {}
boost::fibers::fiber_specific_ptr<FiberContext>& slot() {
  static boost::fibers::fiber_specific_ptr<FiberContext> ptr(&no_cleanup);
  return ptr;
}

// The last answer, by the Boost fiber it was for. Every wait, sleep and cancellation check asks
// for the running fiber's context, and Boost's fiber-specific pointer looks it up in a per-fiber
// std::map: the cache makes a repeated question one comparison. It stays right because the only
// writer is set_current_fiber, which updates it, and a fiber that ends first resets its context
// (fiber_entry.cc), so a new fiber at a dead one's address reads null, as its own slot says.
struct LastAnswer {
  const boost::fibers::context* fiber = nullptr;
  FiberContext* context = nullptr;
};
thread_local LastAnswer last;
}  // namespace

FiberContext* current_fiber() {
  const boost::fibers::context* active = boost::fibers::context::active();
  if (active != last.fiber) last = LastAnswer{active, slot().get()};
  return last.context;
}

void set_current_fiber(FiberContext* context) {
  slot().reset(context);
  last = LastAnswer{boost::fibers::context::active(), context};
}

}  // namespace dagsim::runtime
