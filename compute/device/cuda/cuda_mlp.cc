#include "compute/device/cuda/cuda_mlp.h"

#include <cuda_runtime.h>

#include <cmath>

#include "core/base/assert.h"
#include "compute/device/cuda/cuda_check.h"
#include "compute/device/cuda/cuda_kernels.h"

namespace dagsim::device::cuda {

template <typename T>
CudaMlp<T>::CudaMlp(CudaGpu& gpu, std::vector<int64_t> widths, int64_t batch, uint64_t seed)
    : gpu_(gpu), widths_(std::move(widths)), batch_(batch) {
  DAGSIM_ASSERT(widths_.size() >= 2 && batch_ > 0);
  Prng prng(seed);
  const auto upload = [&](const std::vector<T>& host) {
    T* p = alloc(static_cast<int64_t>(host.size()));
    DAGSIM_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
  };
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    std::vector<T> w(static_cast<size_t>(in * out)), b(static_cast<size_t>(out));
    const double scale = 1.0 / std::sqrt(static_cast<double>(in));
    for (T& v : w) v = static_cast<T>(prng.normal(0.0, 1.0) * scale);
    for (T& v : b) v = static_cast<T>(0.1 * prng.normal(0.0, 1.0));
    weights_.push_back(upload(w));
    biases_.push_back(upload(b));
    weight_grads_.push_back(alloc(in * out));
    bias_grads_.push_back(alloc(out));
    host_weights_.push_back(std::move(w));
    host_biases_.push_back(std::move(b));
  }
  host_input_.resize(static_cast<size_t>(batch_ * widths_.front()));
  host_target_.resize(static_cast<size_t>(batch_ * widths_.back()));
  for (T& v : host_input_) v = static_cast<T>(prng.uniform(-1.0, 1.0));
  for (T& v : host_target_) v = static_cast<T>(prng.uniform(-1.0, 1.0));
  input_ = upload(host_input_);
  target_ = upload(host_target_);
  loss_ = alloc(1);
}

template <typename T>
CudaMlp<T>::~CudaMlp() {
  (void)cudaStreamSynchronize(static_cast<cudaStream_t>(gpu_.current_handle()));
  for (size_t l = 0; l < weights_.size(); ++l) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    release(weights_[l], in * out);
    release(biases_[l], out);
    release(weight_grads_[l], in * out);
    release(bias_grads_[l], out);
  }
  release(input_, batch_ * widths_.front());
  release(target_, batch_ * widths_.back());
  release(loss_, 1);
}

template <typename T>
T* CudaMlp<T>::alloc(int64_t n) {
  return static_cast<T*>(gpu_.allocator().allocate(static_cast<size_t>(n) * sizeof(T)));
}

template <typename T>
void CudaMlp<T>::release(T* p, int64_t n) {
  gpu_.allocator().release(p, static_cast<size_t>(n) * sizeof(T));
}

template <typename T>
void CudaMlp<T>::step(T lr) {
  void* const s = gpu_.current_handle();
  const size_t layers = weights_.size();
  // Forward: a[0] = input; a[l+1] = relu(a[l] Wᵀ + b) (no relu after the last layer).
  std::vector<T*> acts{input_};
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    T* z = alloc(batch_ * out);
    broadcast_rows(biases_[l], z, batch_, out, s);
    gemm<T>(gpu_, false, true, batch_, out, in, acts[l], weights_[l], T{1}, z);
    if (l + 1 < layers) relu(z, z, batch_ * out, s);  // in place: relu's backward reads its output
    acts.push_back(z);
  }
  const int64_t out_n = batch_ * widths_.back();
  mse_loss(acts.back(), target_, loss_, out_n, s);
  // Backward.
  T* grad = alloc(out_n);
  mse_loss_backward(acts.back(), target_, grad, out_n, s);
  for (size_t l = layers; l-- > 0;) {
    const int64_t in = widths_[l], out = widths_[l + 1];
    if (l + 1 < layers) relu_backward(grad, acts[l + 1], grad, batch_ * out, s);
    gemm<T>(gpu_, true, false, out, in, batch_, grad, acts[l], T{0}, weight_grads_[l]);  // dW = Gᵀ X
    sum_rows(grad, bias_grads_[l], batch_, out, s);
    T* grad_in = nullptr;
    if (l > 0) {
      grad_in = alloc(batch_ * in);
      gemm<T>(gpu_, false, false, batch_, in, out, grad, weights_[l], T{0}, grad_in);  // dX = G W
    }
    release(grad, batch_ * out);
    grad = grad_in;
  }
  if (lr != T{0}) {
    for (size_t l = 0; l < layers; ++l) {
      const int64_t in = widths_[l], out = widths_[l + 1];
      axpby(weights_[l], weight_grads_[l], -lr, weights_[l], in * out, s);
      axpby(biases_[l], bias_grads_[l], -lr, biases_[l], out, s);
    }
  }
  // Blocks go back in stream order: the next step's kernels on this stream run after these.
  for (size_t l = 1; l < acts.size(); ++l) release(acts[l], batch_ * widths_[l]);
}

template <typename T>
std::vector<T> CudaMlp<T>::to_host(const T* p, int64_t n) {
  DAGSIM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(gpu_.current_handle())));
  std::vector<T> out(static_cast<size_t>(n));
  DAGSIM_CUDA_CHECK(cudaMemcpy(out.data(), p, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

template <typename T>
T CudaMlp<T>::loss() {
  return to_host(loss_, 1)[0];
}
template <typename T>
std::vector<T> CudaMlp<T>::weight_grad(size_t layer) {
  return to_host(weight_grads_.at(layer), widths_[layer] * widths_[layer + 1]);
}
template <typename T>
std::vector<T> CudaMlp<T>::bias_grad(size_t layer) {
  return to_host(bias_grads_.at(layer), widths_[layer + 1]);
}

template <typename T>
double CudaMlp<T>::gemm_flops() const {
  double flops = 0;
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    const double macs = static_cast<double>(batch_) * static_cast<double>(widths_[l]) * static_cast<double>(widths_[l + 1]);
    flops += 2 * macs * (l == 0 ? 2 : 3);  // the first layer's dX is never computed
  }
  return flops;
}

template class CudaMlp<float>;
template class CudaMlp<double>;

}  // namespace dagsim::device::cuda
