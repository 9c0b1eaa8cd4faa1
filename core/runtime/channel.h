// Channel<T>: a FIFO queue between fibers, unbounded or bounded. pop() blocks until an item or
// close(); push() blocks while a bounded channel is full; offer() never blocks or throws. Items pushed before close() are still
// delivered; after that pop() throws channel_closed. Waits time out through the Clock and unwind
// with node_killed (see wait.h). Built on our own wait, not boost::fibers channels, whose timed
// operations read the real clock.
//
// Threads: a `shared` channel (the default) may be offered to from other OS threads (a TCP
// transport's socket readers hand deliveries to a node's inbox that way), so every operation takes
// its fiber mutex. A `one_thread` channel promises that every operation runs on the thread of the
// fibers that use it (the simulator, LocalRuntime): fibers there never run at once and none
// suspends holding the mutex except inside cv.wait, which releases it, so the operations that do
// not block skip the mutex, and a wake-up is sent only when a fiber may have gone to sleep since
// the last one (armed_): a burst of offers to a sleeping receiver notifies once, not per item.
// Both wake the same fibers in the same order; only the locking and the no-op notifies differ.
#pragma once

#include <cstddef>
#include <optional>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/ring_queue.h"
#include "core/runtime/wait.h"

namespace dagsim::runtime {

enum class ChannelThreads : uint8_t { shared, one_thread };

template <typename T>
class Channel {
 public:
  // capacity 0 means unbounded.
  explicit Channel(size_t capacity = 0, ChannelThreads threads = ChannelThreads::shared)
      : capacity_(capacity), one_thread_(threads == ChannelThreads::one_thread) {}

  // Throws channel_closed after close().
  void push(T item) {
    if (one_thread_ && capacity_ == 0) {
      if (closed_) throw errors::channel_closed("push on a closed channel");
      items_.push_back(std::move(item));
      wake_waiters();
      return;
    }
    FiberLock lock(mutex_);
    if (capacity_ > 0) {
      block_until(cv_, lock, [this] { return sleep_unless(closed_ || items_.size() < capacity_); }, std::nullopt,
                  "Channel::push");
    }
    if (closed_) throw errors::channel_closed("push on a closed channel");
    items_.push_back(std::move(item));
    cv_.notify_all();
  }

  // Never throws and never blocks (REQUIRES: unbounded): false when the channel is closed, and the
  // item is dropped. For producers that must not fail, such as a runtime's driver delivering into
  // an inbox whose node stopped listening, or a socket reader thread.
  bool offer(const T& item) { return offer(T(item)); }
  bool offer(T&& item) {
    return offer_made([&item]() -> T&& { return std::move(item); });
  }
  // offer() of the item `make()` returns, built in the queue (RingQueue::push_made); `make` runs
  // only if the channel is open.
  template <typename Make>
  bool offer_made(Make&& make) {
    DAGSIM_ASSERT_MSG(capacity_ == 0, "Channel::offer on a bounded channel");
    if (one_thread_) {
      if (closed_) return false;
      items_.push_made(make);
      wake_waiters();
      return true;
    }
    FiberLock lock(mutex_);
    if (closed_) return false;
    items_.push_made(make);
    cv_.notify_all();
    return true;
  }

  // Blocks for an item; throws channel_closed once closed and drained.
  T pop() {
    if (one_thread_) {
      // pop_impl's fast path, without the optional in between (one move less per item).
      throw_if_cancelled();
      if (!items_.empty()) {
        T item = std::move(items_.front());
        items_.pop_front();
        if (capacity_ > 0) wake_waiters();
        return item;
      }
    }
    std::optional<T> item = pop_impl(std::nullopt);
    DAGSIM_ASSERT(item.has_value());
    return std::move(*item);
  }

  // nullopt when `deadline` passed first; throws channel_closed once closed and drained.
  std::optional<T> pop_until(TimePoint deadline) { return pop_impl(deadline); }

  // Never blocks: nullopt when empty.
  std::optional<T> try_pop() {
    if (one_thread_) {
      if (items_.empty()) return std::nullopt;
      return take();
    }
    FiberLock lock(mutex_);
    if (items_.empty()) return std::nullopt;
    return take();
  }

  void close() {
    if (one_thread_) {
      closed_ = true;
      wake_waiters();
      return;
    }
    FiberLock lock(mutex_);
    closed_ = true;
    cv_.notify_all();
  }

  // Reads without the lock: for the channel's own thread (see spawner.h).
  bool closed() const { return closed_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  // The predicates' result. block_until calls the predicate right before each cv.wait, with no
  // switch in between, so a false here means a fiber may sleep on cv_ from now: the next wake-up
  // must notify (see wake_waiters).
  bool sleep_unless(bool ready) {
    if (!ready) armed_ = true;
    return ready;
  }

  std::optional<T> pop_impl(std::optional<TimePoint> deadline) {
    if (one_thread_) {
      // block_until's own first steps, without the mutex: the cancellation check, then ready().
      throw_if_cancelled();
      if (!items_.empty()) return take();
      if (closed_) throw errors::channel_closed("pop on a closed channel");
    }
    FiberLock lock(mutex_);
    const bool ready = block_until(cv_, lock, [this] { return sleep_unless(closed_ || !items_.empty()); }, deadline,
                                   "Channel::pop");
    if (!ready) return std::nullopt;
    if (items_.empty()) throw errors::channel_closed("pop on a closed channel");
    return take();
  }

  // REQUIRES: the mutex held, or a one_thread channel.
  std::optional<T> take() {
    std::optional<T> item(std::move(items_.front()));
    items_.pop_front();
    if (capacity_ > 0) {
      if (one_thread_) {
        wake_waiters();
      } else {
        cv_.notify_all();  // a pusher may wait for room
      }
    }
    return item;
  }

  // one_thread only: the mutex-free notify. notify_all wakes every fiber asleep on cv_, so until
  // one goes back to sleep (armed_ again) another notify would wake nobody; and a sleeper sits in
  // cv.wait, which released the mutex, so no lock is needed to notify it.
  void wake_waiters() {
    if (!armed_) return;
    armed_ = false;
    cv_.notify_all();
  }

  const size_t capacity_;
  const bool one_thread_;
  FiberMutex mutex_;
  FiberCondition cv_;
  RingQueue<T> items_;
  bool armed_ = false;  // a fiber may be asleep on cv_ since the last notify (one_thread's wake-ups)
  bool closed_ = false;
};

}  // namespace dagsim::runtime
