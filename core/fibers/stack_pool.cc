#include "core/fibers/stack_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <string>

#include "core/base/assert.h"

namespace dagsim::fibers {

namespace {

constexpr unsigned char kCanaryByte = 0xa5;

size_t page_bytes() {
  static const size_t bytes = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return bytes;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

void write_canary(const boost::context::stack_context& stack) {
  std::memset(static_cast<char*>(stack.sp) - stack.size, kCanaryByte, StackPool::kCanaryBytes);
}

// The number of canary bytes, from the far end, that no longer hold the pattern (0: intact).
size_t clobbered_canary_bytes(const boost::context::stack_context& stack) {
  const auto* far = static_cast<const unsigned char*>(stack.sp) - stack.size;
  for (size_t i = StackPool::kCanaryBytes; i > 0; --i) {
    if (far[i - 1] != kCanaryByte) return i;
  }
  return 0;
}

}  // namespace

StackPool::StackPool(size_t stack_bytes, size_t max_cached, size_t protected_budget)
    : stack_bytes_(round_up(std::max(stack_bytes, 2 * kCanaryBytes), page_bytes())),
      max_cached_(max_cached),
      protected_budget_(protected_budget != 0 ? protected_budget : default_protected_budget()),
      allocator_(stack_bytes) {}

StackPool::~StackPool() {
  for (boost::context::stack_context& stack : free_) allocator_.deallocate(stack);
  for (const auto& [begin, end] : slabs_) ::munmap(reinterpret_cast<void*>(begin), end - begin);
}

size_t StackPool::default_protected_budget() {
  static const size_t budget = [] {
    size_t max_map_count = 65530;  // Linux's default
    std::ifstream in("/proc/sys/vm/max_map_count");
    size_t read = 0;
    if (in >> read && read > 0) max_map_count = read;
    return std::max<size_t>(max_map_count / 4, 16);
  }();
  return budget;
}

boost::context::stack_context StackPool::allocate() {
  boost::context::stack_context stack;
  if (!free_.empty()) {
    stack = free_.back();
    free_.pop_back();
    ++counts_.protected_live;
  } else if (counts_.protected_live < protected_budget_) {
    stack = allocator_.allocate();
    ++counts_.protected_live;
  } else {
    stack = carve();
    write_canary(stack);
    ++counts_.slab_live;
  }
  return stack;
}

boost::context::stack_context StackPool::carve() {
  if (slab_free_.empty()) {
    const size_t bytes = kSlabStacks * stack_bytes_;
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    const auto begin = reinterpret_cast<uintptr_t>(base);
    slabs_.insert(std::upper_bound(slabs_.begin(), slabs_.end(), std::make_pair(begin, begin)), {begin, begin + bytes});
    ++counts_.slabs;
    // Highest first, so the pool hands out the slab's lowest stack first (any order would do).
    for (size_t i = kSlabStacks; i > 0; --i) {
      boost::context::stack_context stack;
      stack.size = stack_bytes_;
      stack.sp = reinterpret_cast<void*>(begin + i * stack_bytes_);  // stacks grow down from sp
      slab_free_.push_back(stack);
    }
  }
  boost::context::stack_context stack = slab_free_.back();
  slab_free_.pop_back();
  return stack;
}

bool StackPool::from_slab(const boost::context::stack_context& stack) const {
  // By the stack's lowest byte, which lies inside its own slab: its top may be where the next
  // slab begins (mmap places new mappings next to old ones).
  const uintptr_t far = reinterpret_cast<uintptr_t>(stack.sp) - stack.size;
  auto it = std::upper_bound(slabs_.begin(), slabs_.end(), std::make_pair(far, UINTPTR_MAX));
  if (it == slabs_.begin()) return false;
  --it;
  return far >= it->first && far < it->second;
}

void StackPool::deallocate(boost::context::stack_context& stack) noexcept {
  if (from_slab(stack)) {
    const size_t clobbered = clobbered_canary_bytes(stack);
    DAGSIM_ASSERT_MSG(clobbered == 0, "a fiber overflowed its " + std::to_string(stack.size) +
                                          "-byte stack (an unguarded one, from a slab: more than " +
                                          std::to_string(protected_budget_) + " live fibers); " +
                                          std::to_string(clobbered) + " of the canary's " +
                                          std::to_string(kCanaryBytes) + " bytes were overwritten");
    DAGSIM_ASSERT(counts_.slab_live > 0);
    --counts_.slab_live;
    slab_free_.push_back(stack);
    return;
  }
  DAGSIM_ASSERT(counts_.protected_live > 0);
  --counts_.protected_live;
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
