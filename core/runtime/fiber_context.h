// FiberContext: what a fiber knows about itself: its node, the scope its waits belong to (whose
// cancellation, or the node's death, unwinds them), the node's Clock and Spawner, its name, and
// what it is blocked on (for stuck reports).
//
// Every fiber started through a Spawner has one; a fiber without one (the main fiber of a test)
// may block untimed but cannot use deadlines or `then`. The context is fiber-local, so a
// blocking call deep in core code finds its node without passing it down.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/cancel_scope.h"

namespace dagsim {
class DeviceSet;
}

namespace dagsim::runtime {

class Clock;
class Spawner;

struct FiberContext {
  std::string node_name;
  std::string fiber_name;
  // The innermost scope the fiber's waits belong to: the scope it was spawned into, or one it
  // entered (CancelScope::Enter). Its root is the node incarnation's lifetime.
  std::shared_ptr<ScopeState> scope;
  Clock* clock = nullptr;
  Spawner* spawner = nullptr;
  // Set while blocked: a literal naming the primitive ("Future::get", "Channel::pop", ...).
  const char* waiting_on = nullptr;
  // The node's GPUs (core/tensor/device.h), or null where it has none.
  const DeviceSet* devices = nullptr;
  // This fiber's current stream on each GPU it has set one on, by the backend's key
  // (CurrentStream, core/tensor/device.h); any other GPU's is the default stream, 0.
  std::vector<std::pair<uint64_t, int>> current_streams;
};

// The running fiber's context, or nullptr.
FiberContext* current_fiber();
// Installs `context` for the running fiber (the Spawner does this at fiber start).
// The caller keeps ownership and must outlive the fiber's use of it.
void set_current_fiber(FiberContext* context);

}  // namespace dagsim::runtime
