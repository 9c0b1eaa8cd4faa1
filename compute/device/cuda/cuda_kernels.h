// The cuda backend's kernels: plain functions over device pointers, enqueued on a stream, with
// PyTorch's semantics for the ops they serve (elementwise, relu and its backward, the MSE loss
// and its gradient, row sums for a bias gradient, SGD's update) and cuBLAS for matrix products.
//
// This header is plain C++ (no CUDA types): the kernels are compiled by nvcc in cuda_kernels.cu,
// and callers pass a stream as the `cudaStream_t` it is, cast to void*. Every function checks the
// launch and throws dagsim::Error(internal_error) naming the CUDA error. Nothing here blocks the
// host: results are ready when the stream reaches them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dagsim::device::cuda {

using StreamHandle = void*;  // a cudaStream_t

// out[i] = value.
template <typename T>
void fill(T* out, int64_t n, T value, StreamHandle stream);
// out[i] = a[i] + alpha * b[i] (sub: alpha = -1).
template <typename T>
void axpby(const T* a, const T* b, T alpha, T* out, int64_t n, StreamHandle stream);
// out[i] = a[i] * b[i].
template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n, StreamHandle stream);
// out[r * cols + c] = bias[c], for every row: the start of a linear layer's output.
template <typename T>
void broadcast_rows(const T* bias, T* out, int64_t rows, int64_t cols, StreamHandle stream);
// out = max(x, 0); and its backward, grad_in = grad_out where y > 0, else 0 (PyTorch's
// threshold_backward on the output, as ReluBackward0 does).
template <typename T>
void relu(const T* x, T* out, int64_t n, StreamHandle stream);
template <typename T>
void relu_backward(const T* grad_out, const T* y, T* grad_in, int64_t n, StreamHandle stream);
// sums[c] = sum over rows of x[r * cols + c]: the gradient of a bias.
template <typename T>
void sum_rows(const T* x, T* sums, int64_t rows, int64_t cols, StreamHandle stream);
// The mean squared error's value into loss[0] (one reduction, CUB), and its gradient
// grad[i] = 2 (x[i] - y[i]) / n.
template <typename T>
void mse_loss(const T* x, const T* y, T* loss, int64_t n, StreamHandle stream);
template <typename T>
void mse_loss_backward(const T* x, const T* y, T* grad, int64_t n, StreamHandle stream);

}  // namespace dagsim::device::cuda
