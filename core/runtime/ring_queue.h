// RingQueue<T>: a FIFO in one growable circular buffer, for Channel (channel.h).
//
// Why not std::deque: a deque allocates a block every few hundred bytes of items (six Deliveries)
// and frees it when the front passes, so a channel that carries a steady stream of messages pays
// a malloc and a free every few items. A ring keeps its buffer: once it has grown to the channel's
// high-water mark, push and pop allocate nothing. Promises: FIFO order; capacity only grows
// (doubling); items are moved, never copied; not thread-safe (the channel locks around it).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

#include "core/base/assert.h"

namespace dagsim::runtime {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  ~RingQueue() {
    while (size_ > 0) pop_front();
    if (buffer_ != nullptr) std::allocator<T>().deallocate(buffer_, capacity_);
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void push_back(T&& item) {
    push_made([&item]() -> T&& { return std::move(item); });
  }
  // Appends the item `make()` returns, built in its place: a prvalue is never moved (C++17's
  // guaranteed elision), which is one move and one destruction less per item than push_back.
  template <typename Make>
  void push_made(Make&& make) {
    if (size_ == capacity_) grow();
    ::new (static_cast<void*>(buffer_ + ((head_ + size_) & (capacity_ - 1)))) T(make());
    ++size_;
  }
  // REQUIRES (all three): !empty().
  T& front() {
    DAGSIM_ASSERT(size_ > 0);
    return buffer_[head_];
  }
  const T& front() const {
    DAGSIM_ASSERT(size_ > 0);
    return buffer_[head_];
  }
  const T& back() const {
    DAGSIM_ASSERT(size_ > 0);
    return buffer_[(head_ + size_ - 1) & (capacity_ - 1)];
  }
  void pop_front() {
    DAGSIM_ASSERT(size_ > 0);
    buffer_[head_].~T();
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }

 private:
  void grow() {
    const size_t capacity = capacity_ == 0 ? 16 : capacity_ * 2;  // a power of two: masks wrap
    T* buffer = std::allocator<T>().allocate(capacity);
    for (size_t i = 0; i < size_; ++i) {
      T& item = buffer_[(head_ + i) & (capacity_ - 1)];
      ::new (static_cast<void*>(buffer + i)) T(std::move(item));
      item.~T();
    }
    if (buffer_ != nullptr) std::allocator<T>().deallocate(buffer_, capacity_);
    buffer_ = buffer;
    capacity_ = capacity;
    head_ = 0;
  }

  T* buffer_ = nullptr;
  size_t capacity_ = 0;  // 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace dagsim::runtime
