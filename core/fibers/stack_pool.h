// StackPool: fiber stacks, reused, protected while the process can afford it. Every node fiber
// gets a stack with a guard page (an overflow crashes instead of corrupting a neighbour), but
// mapping and protecting one costs system calls per fiber, and RPC handlers and `then`
// continuations start a fiber per message. The pool keeps released stacks of its size for the next
// fiber (up to a bound), so a busy world maps each stack once. One pool per OS thread (fibers never
// migrate); a Boost.Context StackAllocator, so it plugs into boost::fibers::fiber's allocator_arg
// constructor.
//
// A guard page costs the stack a second kernel mapping, and Linux caps a process's mappings
// (vm.max_map_count, 65,530 by default): a simulated world of 10,000 nodes has about 33,000 live
// fibers and ran out at start (std::bad_alloc from mmap). So the protected stacks are budgeted:
// past `protected_budget` live ones, stacks are carved from slabs of `kSlabStacks` contiguous
// stacks in one read-write mapping, each with a canary at its far end that is checked, with an
// always-on assert, whenever the stack comes back to the pool. Which stack a fiber gets never
// reaches what it computes, so a run replays the same either way.
#pragma once

#include <boost/context/protected_fixedsize_stack.hpp>
#include <boost/context/stack_context.hpp>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dagsim::fibers {

class StackPool {
 public:
  // Stacks carved from one slab mapping.
  static constexpr size_t kSlabStacks = 64;
  // Bytes at the low (far) end of a slab stack that must still hold the canary when it comes back.
  static constexpr size_t kCanaryBytes = 256;

  // `protected_budget`: live guarded stacks at most (0: a quarter of vm.max_map_count).
  explicit StackPool(size_t stack_bytes, size_t max_cached = 256, size_t protected_budget = 0);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  boost::context::stack_context allocate();
  void deallocate(boost::context::stack_context& stack) noexcept;

  // What the pool holds (tests check the budget and the slabs with it).
  struct Counts {
    size_t protected_live = 0;  // guarded stacks handed out and not yet back
    size_t slab_live = 0;       // slab stacks handed out and not yet back
    size_t slabs = 0;           // slab mappings made
  };
  Counts counts() const { return counts_; }

  // This thread's pool for `stack_bytes`-sized stacks.
  static StackPool& for_this_thread(size_t stack_bytes);
  // A quarter of vm.max_map_count (read once), leaving the rest to malloc, libraries and the
  // protected stacks' own second mapping.
  static size_t default_protected_budget();

 private:
  bool from_slab(const boost::context::stack_context& stack) const;
  boost::context::stack_context carve();
  size_t stack_bytes_;
  size_t max_cached_;
  size_t protected_budget_;
  boost::context::protected_fixedsize_stack allocator_;
  std::vector<boost::context::stack_context> free_;       // guarded, released
  std::vector<boost::context::stack_context> slab_free_;  // from slabs, released (never unmapped)
  std::vector<std::pair<uintptr_t, uintptr_t>> slabs_;    // [begin, end) of each slab, ascending
  Counts counts_;
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
