// How the cuda backend's kernels are launched (cuda_kernels.cu, cuda_op_kernels.cu): blocks of
// kThreads threads, as many blocks as cover n elements up to a cap, with grid-stride loops in the
// kernels so any n fits; streams travel as void* (StreamHandle) outside the .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dagsim::device::cuda::grid {

inline constexpr int kThreads = 256;

inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 32 ? (b == 0 ? 1 : b) : 65535 * 32);
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace dagsim::device::cuda::grid
