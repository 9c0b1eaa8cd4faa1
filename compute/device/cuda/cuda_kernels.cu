#include "compute/device/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

#include <string>

#include "compute/device/cuda/cuda_check.h"
#include "compute/device/cuda/grid.cuh"
#include "compute/kernels/pointwise.h"

namespace dagsim::device::cuda {

namespace {

using grid::as_stream;
using grid::blocks_for;
using grid::kThreads;

// Grid-stride loops, so any n fits any grid.
template <typename T>
__global__ void fill_kernel(T* out, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) out[i] = value;
}
template <typename T>
__global__ void axpby_kernel(const T* a, const T* b, T alpha, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = a[i] + alpha * b[i];
  }
}
template <typename T>
__global__ void mul_kernel(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = a[i] * b[i];
  }
}
template <typename T>
__global__ void broadcast_rows_kernel(const T* bias, T* out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = bias[i % cols];
  }
}
template <typename T>
__global__ void relu_kernel(const T* x, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = pointwise::Relu{}(x[i], 0.0);  // the ops' formula: NaN propagates
  }
}
template <typename T>
__global__ void relu_backward_kernel(const T* g, const T* y, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = pointwise::ReluBackward{}(g[i], y[i], 0.0);
  }
}
// One thread per column, walking the rows: coalesced across a warp, deterministic in order.
template <typename T>
__global__ void sum_rows_kernel(const T* x, T* sums, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols; c += int64_t{gridDim.x} * blockDim.x) {
    T acc{0};
    for (int64_t r = 0; r < rows; ++r) acc += x[r * cols + c];
    sums[c] = acc;
  }
}
template <typename T>
__global__ void squared_diff_kernel(const T* x, const T* y, T* out, int64_t n, T scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const T d = x[i] - y[i];
    out[i] = d * d * scale;
  }
}
template <typename T>
__global__ void mse_backward_kernel(const T* x, const T* y, T* grad, int64_t n, T scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    grad[i] = scale * (x[i] - y[i]);
  }
}

}  // namespace

template <typename T>
void fill(T* out, int64_t n, T value, StreamHandle stream) {
  fill_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(out, n, value);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void axpby(const T* a, const T* b, T alpha, T* out, int64_t n, StreamHandle stream) {
  axpby_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(a, b, alpha, out, n);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n, StreamHandle stream) {
  mul_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(a, b, out, n);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void broadcast_rows(const T* bias, T* out, int64_t rows, int64_t cols, StreamHandle stream) {
  broadcast_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, as_stream(stream)>>>(bias, out, rows, cols);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void relu(const T* x, T* out, int64_t n, StreamHandle stream) {
  relu_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, out, n);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void relu_backward(const T* g, const T* y, T* grad_in, int64_t n, StreamHandle stream) {
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(g, y, grad_in, n);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void sum_rows(const T* x, T* sums, int64_t rows, int64_t cols, StreamHandle stream) {
  sum_rows_kernel<<<blocks_for(cols), kThreads, 0, as_stream(stream)>>>(x, sums, rows, cols);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template <typename T>
void mse_loss(const T* x, const T* y, T* loss, int64_t n, StreamHandle stream) {
  // The squared differences, pre-divided by n, then one CUB sum; scratch in stream order.
  const cudaStream_t s = as_stream(stream);
  T* squares = nullptr;
  DAGSIM_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&squares), sizeof(T) * static_cast<size_t>(n > 0 ? n : 1), s));
  squared_diff_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, squares, n, T{1} / static_cast<T>(n));
  DAGSIM_CUDA_CHECK(cudaGetLastError());
  grid::cub_sum(squares, loss, n, s);
  DAGSIM_CUDA_CHECK(cudaFreeAsync(squares, s));
}
template <typename T>
void mse_loss_backward(const T* x, const T* y, T* grad, int64_t n, StreamHandle stream) {
  mse_backward_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, y, grad, n, T{2} / static_cast<T>(n));
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

#define DAGSIM_INSTANTIATE(T)                                                              \
  template void fill<T>(T*, int64_t, T, StreamHandle);                                     \
  template void axpby<T>(const T*, const T*, T, T*, int64_t, StreamHandle);                \
  template void mul<T>(const T*, const T*, T*, int64_t, StreamHandle);                     \
  template void broadcast_rows<T>(const T*, T*, int64_t, int64_t, StreamHandle);          \
  template void relu<T>(const T*, T*, int64_t, StreamHandle);                              \
  template void relu_backward<T>(const T*, const T*, T*, int64_t, StreamHandle);           \
  template void sum_rows<T>(const T*, T*, int64_t, int64_t, StreamHandle);                 \
  template void mse_loss<T>(const T*, const T*, T*, int64_t, StreamHandle);                \
  template void mse_loss_backward<T>(const T*, const T*, T*, int64_t, StreamHandle);
DAGSIM_INSTANTIATE(float)
DAGSIM_INSTANTIATE(double)
#undef DAGSIM_INSTANTIATE

}  // namespace dagsim::device::cuda
