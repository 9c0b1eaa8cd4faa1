// CachingAllocator: device memory for one GPU without a cudaMalloc per tensor, as PyTorch's
// CUDACachingAllocator keeps freed blocks for the next request of the same size class.
//
// Sizes round up to 512 bytes below 1 MiB and to 2 MiB above (so a training step's repeated
// shapes find their blocks again); a freed block waits in its class's free list; past
// `max_cached_bytes` a freed block goes back to cudaFree. It knows no streams: CudaGpu hands a
// freed block back only once an event recorded on its stream after the block's last use has
// completed, so a block is never reused while a stream may still touch it. Not thread-safe: one
// node's fibers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace dagsim::device::cuda {

struct AllocatorStats {
  uint64_t device_mallocs = 0;  // blocks that came from cudaMalloc
  uint64_t hits = 0;            // requests served from the cache
  uint64_t cached_bytes = 0;    // bytes waiting in free lists now
  uint64_t live_bytes = 0;      // bytes handed out and not yet released
};

class CachingAllocator {
 public:
  explicit CachingAllocator(int ordinal, size_t max_cached_bytes = size_t{1} << 32);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `nbytes` (> 0). Throws internal_error ("CUDA error: out of memory ...")
  // when cudaMalloc fails even after the cache was emptied.
  void* allocate(size_t nbytes);
  // Returns a block allocate(nbytes) gave.
  void release(void* block, size_t nbytes);
  // Frees every cached block.
  void trim();

  const AllocatorStats& stats() const { return stats_; }
  static size_t size_class(size_t nbytes);

 private:
  int ordinal_;
  size_t max_cached_bytes_;
  std::map<size_t, std::vector<void*>> free_;  // by size class
  AllocatorStats stats_;
};

}  // namespace dagsim::device::cuda
