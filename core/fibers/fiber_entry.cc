#include "core/fibers/fiber_entry.h"

#include <exception>

#include "core/base/error.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::fibers {

std::optional<std::string> run_fiber_body(runtime::FiberContext& context, std::function<void()>& fn) {
  runtime::set_current_fiber(&context);
  std::optional<std::string> failure;
  try {
    fn();
  } catch (const Error& e) {
    if (!runtime::is_unwinding(e)) failure = e.what();
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  // Destructors are noexcept: a capture whose destructor throws (blocking on a dead node, say)
  // terminates, which is a bug in that capture. Destroy them while the context is installed.
  fn = nullptr;
  runtime::set_current_fiber(nullptr);
  return failure;
}

}  // namespace dagsim::fibers
