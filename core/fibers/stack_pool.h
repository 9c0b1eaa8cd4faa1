// StackPool: protected fiber stacks, reused. Every node fiber gets a stack with a guard page (an
// overflow crashes instead of corrupting a neighbour), but mapping and protecting one costs
// system calls per fiber, and RPC handlers and `then` continuations start a fiber per message.
// The pool keeps released stacks of its size for the next fiber (up to a bound), so a busy
// world maps each stack once. One pool per OS thread (fibers never migrate); a Boost.Context
// StackAllocator, so it plugs into boost::fibers::fiber's allocator_arg constructor.
#pragma once

#include <boost/context/protected_fixedsize_stack.hpp>
#include <boost/context/stack_context.hpp>
#include <vector>

namespace dagsim::fibers {

class StackPool {
 public:
  explicit StackPool(size_t stack_bytes, size_t max_cached = 256);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& stack) noexcept;


  // This thread's pool for `stack_bytes`-sized stacks.
  static StackPool& for_this_thread(size_t stack_bytes);

 private:
  size_t max_cached_;
  boost::context::protected_fixedsize_stack allocator_;
  std::vector<boost::context::stack_context> free_;
};

// The allocator handed to each fiber: a reference to a pool (Boost copies allocators by value).
class PooledStack {
 public:
  explicit PooledStack(StackPool& pool) : pool_(&pool) {}
  boost::context::stack_context allocate() { return pool_->allocate(); }
  void deallocate(boost::context::stack_context& stack) noexcept { pool_->deallocate(stack); }

 private:
  StackPool* pool_;
};

}  // namespace dagsim::fibers
