// Event: a one-way latch. set() releases every waiter, now and later, until reset().
// Waits time out through the Clock and unwind with node_killed (see wait.h).
#pragma once

#include "core/runtime/wait.h"

namespace dagsim::runtime {

class Event {
 public:
  void set() {
    FiberLock lock(mutex_);
    set_ = true;
    cv_.notify_all();
  }
  void reset() {
    FiberLock lock(mutex_);
    set_ = false;
  }
  bool is_set() const { return set_; }

  void wait() {
    FiberLock lock(mutex_);
    block_until(cv_, lock, [this] { return set_; }, std::nullopt, "Event::wait");
  }
  // False when the deadline passed first.
  bool wait_until(TimePoint deadline) {
    FiberLock lock(mutex_);
    return block_until(cv_, lock, [this] { return set_; }, deadline, "Event::wait");
  }

 private:
  FiberMutex mutex_;
  FiberCondition cv_;
  bool set_ = false;
};

}  // namespace dagsim::runtime
