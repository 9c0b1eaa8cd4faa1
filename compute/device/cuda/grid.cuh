// How the cuda backend's kernels are launched (cuda_kernels.cu, cuda_op_kernels.cu): blocks of
// kThreads threads, as many blocks as cover n elements up to a cap, with grid-stride loops in the
// kernels so any n fits; streams travel as void* (StreamHandle) outside the .cu files; and the
// one whole-array sum both use.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/device/device_reduce.cuh>

#include "compute/device/cuda/cuda_check.h"

namespace dagsim::device::cuda::grid {

inline constexpr int kThreads = 256;

inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 32 ? (b == 0 ? 1 : b) : 65535 * 32);
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// out[0] = the sum of x[0..n), CUB's tree reduction on stream `s`. Its scratch comes from the
// stream-ordered pool (cudaMallocAsync) and is freed in stream order: no host synchronisation.
template <typename T>
void cub_sum(const T* x, T* out, int64_t n, cudaStream_t s) {
  size_t scratch_bytes = 0;
  DAGSIM_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, scratch_bytes, x, out, n, s));
  void* scratch = nullptr;
  DAGSIM_CUDA_CHECK(cudaMallocAsync(&scratch, scratch_bytes > 0 ? scratch_bytes : 1, s));
  DAGSIM_CUDA_CHECK(cub::DeviceReduce::Sum(scratch, scratch_bytes, x, out, n, s));
  DAGSIM_CUDA_CHECK(cudaFreeAsync(scratch, s));
}

}  // namespace dagsim::device::cuda::grid
