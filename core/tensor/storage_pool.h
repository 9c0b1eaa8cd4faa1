// StoragePool: a caching allocator for tensor bytes, one per OS thread. A freed block waits in its
// thread's pool for the next request of the same size instead of going back to malloc, as
// PyTorch's caching allocators keep blocks: a training step allocates the same sizes every
// iteration, so after its first iteration a step's tensors come from the pool and it makes no
// system allocation for tensor data (storage_pool_test counts).
//
// Promises:
// - Blocks are 64-byte aligned (BLAS and the vector kernels want it) and never zero-filled.
// - A thread caches at most kMaxCachedBytes; a block released past that goes back to the system,
//   and a thread's cache is freed when the thread ends (trim() frees it at once). So the pool
//   holds at most what one step of the largest workload released, bounded.
// - Nothing about values or order depends on it: which address a tensor gets reaches no trace.
// - Under AddressSanitizer it caches nothing (every block goes to the system), so a use after free
//   of tensor bytes is still caught.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dagsim::storage_pool {

inline constexpr size_t kMaxCachedBytes = size_t{64} << 20;

// A block of `nbytes` (> 0), 64-byte aligned.
void* allocate(size_t nbytes);
// Returns a block allocate(nbytes) gave, from any thread.
void release(void* block, size_t nbytes);

struct Stats {
  uint64_t hits = 0;          // allocations served from the cache
  uint64_t misses = 0;        // allocations that went to the system
  uint64_t cached_bytes = 0;  // bytes waiting in the cache now
};
// This thread's figures.
Stats stats();
// Frees every block this thread's cache holds.
void trim();

}  // namespace dagsim::storage_pool
