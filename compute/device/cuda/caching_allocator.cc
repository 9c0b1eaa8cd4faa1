#include "compute/device/cuda/caching_allocator.h"

#include <cuda_runtime.h>

#include "core/base/assert.h"
#include "compute/device/cuda/cuda_check.h"

namespace dagsim::device::cuda {

CachingAllocator::CachingAllocator(int ordinal, size_t max_cached_bytes)
    : ordinal_(ordinal), max_cached_bytes_(max_cached_bytes) {}

CachingAllocator::~CachingAllocator() { trim(); }

size_t CachingAllocator::size_class(size_t nbytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20, kSmallLimit = size_t{1} << 20;
  if (nbytes <= kSmallLimit) return (nbytes + kSmall - 1) / kSmall * kSmall;
  return (nbytes + kLarge - 1) / kLarge * kLarge;
}

void* CachingAllocator::allocate(size_t nbytes) {
  DAGSIM_ASSERT(nbytes > 0);
  const size_t size = size_class(nbytes);
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    void* block = it->second.back();
    it->second.pop_back();
    ++stats_.hits;
    stats_.cached_bytes -= size;
    stats_.live_bytes += size;
    return block;
  }
  DAGSIM_CUDA_CHECK(cudaSetDevice(ordinal_));
  void* block = nullptr;
  if (cudaMalloc(&block, size) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error before trying again
    trim();
    DAGSIM_CUDA_CHECK(cudaMalloc(&block, size));
  }
  ++stats_.device_mallocs;
  stats_.live_bytes += size;
  return block;
}

void CachingAllocator::release(void* block, size_t nbytes) {
  const size_t size = size_class(nbytes);
  DAGSIM_ASSERT(stats_.live_bytes >= size);
  stats_.live_bytes -= size;
  if (stats_.cached_bytes + size > max_cached_bytes_) {
    (void)cudaFree(block);  // from a destructor (~Storage): nothing to report to
    return;
  }
  free_[size].push_back(block);
  stats_.cached_bytes += size;
}

void CachingAllocator::trim() {
  for (auto& [size, blocks] : free_) {
    for (void* b : blocks) (void)cudaFree(b);  // in a destructor too: nothing to report to
  }
  free_.clear();
  stats_.cached_bytes = 0;
}

}  // namespace dagsim::device::cuda
