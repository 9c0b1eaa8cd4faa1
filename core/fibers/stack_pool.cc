#include "core/fibers/stack_pool.h"

#include <map>
#include <memory>

namespace dagsim::fibers {

StackPool::StackPool(size_t stack_bytes, size_t max_cached)
    : max_cached_(max_cached), allocator_(stack_bytes) {}

StackPool::~StackPool() {
  for (boost::context::stack_context& stack : free_) allocator_.deallocate(stack);
}

boost::context::stack_context StackPool::allocate() {
  if (free_.empty()) return allocator_.allocate();
  boost::context::stack_context stack = free_.back();
  free_.pop_back();
  return stack;
}

void StackPool::deallocate(boost::context::stack_context& stack) noexcept {
  if (free_.size() < max_cached_) {
    free_.push_back(stack);
  } else {
    allocator_.deallocate(stack);
  }
}

StackPool& StackPool::for_this_thread(size_t stack_bytes) {
  thread_local std::map<size_t, std::unique_ptr<StackPool>> pools;
  std::unique_ptr<StackPool>& pool = pools[stack_bytes];
  if (!pool) pool = std::make_unique<StackPool>(stack_bytes);
  return *pool;
}

}  // namespace dagsim::fibers
