// CudaMlp: a multi-layer perceptron's training step on the cuda backend's kernels (linear layers
// with bias, relu between them, the mean squared error, SGD), on one stream of one CudaGpu, with
// every activation and gradient taken from the backend's caching allocator each step, as the op
// layer would take them.
//
// It is what the cuda backend's kernels give an MLP, measured against cuBLAS's own gemm
// (bench/bm_gpu.cc), and its gradients are checked against dagsim's CPU autograd on the same
// model (cuda_gpu_test.cc). dagsim's ops do not dispatch here yet (docs/devices.md).
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/prng.h"
#include "compute/device/cuda/cuda_gpu.h"

namespace dagsim::device::cuda {

template <typename T>
class CudaMlp {
 public:
  // widths: in, hidden..., out (at least two). Weights normal / sqrt(in), biases 0.1 * normal,
  // the batch and its target uniform in [-1, 1), all from `seed`.
  CudaMlp(CudaGpu& gpu, std::vector<int64_t> widths, int64_t batch, uint64_t seed);
  ~CudaMlp();
  CudaMlp(const CudaMlp&) = delete;
  CudaMlp& operator=(const CudaMlp&) = delete;

  // Forward, loss, backward and, when lr != 0, the SGD update. Enqueued; nothing waits.
  void step(T lr);

  // Host copies (they wait for the stream): the host values the model started from, the last
  // step's loss, and its gradients (weights then bias, per layer).
  const std::vector<std::vector<T>>& initial_weights() const { return host_weights_; }
  const std::vector<std::vector<T>>& initial_biases() const { return host_biases_; }
  const std::vector<T>& input() const { return host_input_; }
  const std::vector<T>& target() const { return host_target_; }
  T loss();
  std::vector<T> weight_grad(size_t layer);
  std::vector<T> bias_grad(size_t layer);

  // Floating-point operations of the gemms of one step: 3 per layer (forward, dX, dW).
  double gemm_flops() const;
  int64_t batch() const { return batch_; }
  const std::vector<int64_t>& widths() const { return widths_; }

 private:
  T* alloc(int64_t n);
  void release(T* p, int64_t n);
  std::vector<T> to_host(const T* p, int64_t n);

  CudaGpu& gpu_;
  std::vector<int64_t> widths_;
  int64_t batch_;
  std::vector<T*> weights_, biases_, weight_grads_, bias_grads_;
  T* input_ = nullptr;
  T* target_ = nullptr;
  T* loss_ = nullptr;
  std::vector<std::vector<T>> host_weights_, host_biases_;
  std::vector<T> host_input_, host_target_;
};

}  // namespace dagsim::device::cuda
