// FiberContext: what a fiber knows about itself: its node (whose death cancels its waits), the
// node's Clock and Spawner, its name, and what it is blocked on (for stuck reports).
//
// Every fiber started through a Spawner has one; a fiber without one (the main fiber of a test)
// may block untimed but cannot use deadlines or `then`. The context is fiber-local, so a
// blocking call deep in core code finds its node without passing it down.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace dagsim::runtime {

class Clock;
class Spawner;

// A node's life: kill() wakes every wait registered with it, and they throw node_killed.
// Registration order is the wake order, so kills replay deterministically.
class NodeLifetime {
 public:
  bool killed() const { return killed_; }
  void kill();

  // Returns a token for unregister(). `on_kill` must not block.
  uint64_t register_waiter(std::function<void()> on_kill);
  void unregister_waiter(uint64_t token);

 private:
  bool killed_ = false;
  uint64_t next_token_ = 0;
  std::map<uint64_t, std::function<void()>> waiters_;
};

struct FiberContext {
  std::string node_name;
  std::string fiber_name;
  NodeLifetime* lifetime = nullptr;
  Clock* clock = nullptr;
  Spawner* spawner = nullptr;
  // Set while blocked: a literal naming the primitive ("Future::get", "Channel::pop", ...).
  const char* waiting_on = nullptr;
};

// The running fiber's context, or nullptr.
FiberContext* current_fiber();
// Installs `context` for the running fiber (the Spawner does this at fiber start).
// The caller keeps ownership and must outlive the fiber's use of it.
void set_current_fiber(FiberContext* context);

}  // namespace dagsim::runtime
