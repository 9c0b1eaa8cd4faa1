// Channel<T>: a FIFO queue between fibers, unbounded or bounded. pop() blocks until an item or
// close(); push() blocks while a bounded channel is full; offer() never blocks or throws. Items pushed before close() are still
// delivered; after that pop() throws channel_closed. Waits time out through the Clock and unwind
// with node_killed (see wait.h). Built on our own wait, not boost::fibers channels, whose timed
// operations read the real clock.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/wait.h"

namespace dagsim::runtime {

template <typename T>
class Channel {
 public:
  // capacity 0 means unbounded.
  explicit Channel(size_t capacity = 0) : capacity_(capacity) {}

  // Throws channel_closed after close().
  void push(T item) {
    FiberLock lock(mutex_);
    if (capacity_ > 0) {
      block_until(cv_, lock, [this] { return closed_ || items_.size() < capacity_; }, std::nullopt,
                  "Channel::push");
    }
    if (closed_) throw errors::channel_closed("push on a closed channel");
    items_.push_back(std::move(item));
    cv_.notify_all();
  }

  // Never throws and never blocks (REQUIRES: unbounded): false when the channel is closed, and the
  // item is dropped. For producers that must not fail, such as a runtime's driver delivering into
  // an inbox whose node stopped listening, or a socket reader thread.
  bool offer(T item) {
    DAGSIM_ASSERT_MSG(capacity_ == 0, "Channel::offer on a bounded channel");
    FiberLock lock(mutex_);
    if (closed_) return false;
    items_.push_back(std::move(item));
    cv_.notify_all();
    return true;
  }

  // Blocks for an item; throws channel_closed once closed and drained.
  T pop() {
    std::optional<T> item = pop_impl(std::nullopt);
    DAGSIM_ASSERT(item.has_value());
    return std::move(*item);
  }

  // nullopt when `deadline` passed first; throws channel_closed once closed and drained.
  std::optional<T> pop_until(TimePoint deadline) { return pop_impl(deadline); }

  // Never blocks: nullopt when empty.
  std::optional<T> try_pop() {
    FiberLock lock(mutex_);
    if (items_.empty()) return std::nullopt;
    return take(lock);
  }

  void close() {
    FiberLock lock(mutex_);
    closed_ = true;
    cv_.notify_all();
  }

  // Reads without the lock: for the channel's own thread (see spawner.h).
  bool closed() const { return closed_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::optional<T> pop_impl(std::optional<TimePoint> deadline) {
    FiberLock lock(mutex_);
    const bool ready = block_until(cv_, lock, [this] { return closed_ || !items_.empty(); }, deadline,
                                   "Channel::pop");
    if (!ready) return std::nullopt;
    if (items_.empty()) throw errors::channel_closed("pop on a closed channel");
    return take(lock);
  }

  std::optional<T> take(FiberLock&) {
    T item = std::move(items_.front());
    items_.pop_front();
    if (capacity_ > 0) cv_.notify_all();  // a pusher may wait for room
    return item;
  }

  const size_t capacity_;
  FiberMutex mutex_;
  FiberCondition cv_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace dagsim::runtime
