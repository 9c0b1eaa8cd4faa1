// Mutex: mutual exclusion between fibers, with a deadline and node-death cancellation (see
// wait.h). Satisfies Lockable, so std::lock_guard and std::unique_lock work. Waiters are woken
// together and the scheduler's deterministic order decides who wins, so contention replays.
#pragma once

#include "core/base/assert.h"
#include "core/runtime/wait.h"

namespace dagsim::runtime {

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  ~Mutex() { DAGSIM_ASSERT_MSG(!locked_, "Mutex destroyed while locked"); }

  void lock() {
    FiberLock lock(mutex_);
    block_until(cv_, lock, [this] { return !locked_; }, std::nullopt, "Mutex::lock");
    locked_ = true;
  }
  // False when `deadline` passed before the mutex was free.
  bool lock_until(TimePoint deadline) {
    FiberLock lock(mutex_);
    if (!block_until(cv_, lock, [this] { return !locked_; }, deadline, "Mutex::lock")) return false;
    locked_ = true;
    return true;
  }
  bool try_lock() {
    FiberLock lock(mutex_);
    if (locked_) return false;
    locked_ = true;
    return true;
  }
  void unlock() {
    FiberLock lock(mutex_);
    DAGSIM_ASSERT_MSG(locked_, "Mutex::unlock of an unlocked mutex");
    locked_ = false;
    cv_.notify_all();
  }

 private:
  FiberMutex mutex_;
  FiberCondition cv_;
  bool locked_ = false;
};

}  // namespace dagsim::runtime
