#include "core/runtime/fiber_context.h"

#include <boost/fiber/fss.hpp>

namespace dagsim::runtime {

namespace {
// The cleanup function does nothing: contexts are owned by whoever spawned the fiber.
void no_cleanup(FiberContext*) {}
boost::fibers::fiber_specific_ptr<FiberContext>& slot() {
  static boost::fibers::fiber_specific_ptr<FiberContext> ptr(&no_cleanup);
  return ptr;
}
}  // namespace

FiberContext* current_fiber() { return slot().get(); }
void set_current_fiber(FiberContext* context) { slot().reset(context); }

}  // namespace dagsim::runtime
