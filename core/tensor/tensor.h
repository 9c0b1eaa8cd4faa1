// Tensor: a dense, row-major, contiguous CPU tensor of float32 or float64, and the autograd
// metadata PyTorch keeps on a Variable (requires_grad, grad, grad_fn, output_nr, hooks).
//
// A Tensor is a handle: copies share one TensorImpl, as torch.Tensor objects share a TensorImpl.
// Every op returns a fresh contiguous tensor (there are no strided views), except detach(), which
// shares storage and so shares the version counter, exactly as in PyTorch. The version counter
// lives on the Storage: in-place ops bump it, and autograd compares it with the version a backward
// node saved, so a tensor modified after being saved fails backward with PyTorch's error instead of
// producing a wrong gradient.
//
// Determinism: no clocks, no randomness except through an explicit Prng. Not thread-safe; a
// tensor is used by the fibers of one node at a time.
#pragma once

#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/prng.h"
#include "core/tensor/device.h"
#include "core/tensor/dtype.h"

namespace dagsim {

namespace autograd {
class Node;
}

// Raw bytes of a tensor plus its version counter, 64-byte aligned for BLAS. Small CPU tensors keep
// their bytes inline, so a scalar costs one allocation instead of two (autograd makes many).
// A device tensor's bytes come from its device's backend, which also keeps, here, when the last
// kernel writing them finishes (device.h).
class Storage {
 public:
  explicit Storage(size_t nbytes);
  Storage(size_t nbytes, std::shared_ptr<DeviceBackend> backend);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

  uint32_t version() const { return version_; }
  void bump_version() { ++version_; }

  Device device() const { return device_; }
  // Null on the cpu.
  DeviceBackend* backend() const { return backend_.get(); }
  const std::shared_ptr<DeviceBackend>& backend_ptr() const { return backend_; }
  // Set by the backend: when the last kernel that writes these bytes ends (its own mark, the sim
  // GPU's virtual nanoseconds), and on which stream it ran.
  int64_t ready_mark = 0;
  int writer_stream = 0;

 private:
  static constexpr size_t kInlineBytes = 64;

  std::byte* data_;
  size_t nbytes_;
  uint32_t version_ = 0;
  std::shared_ptr<DeviceBackend> backend_;
  Device device_;
  alignas(64) std::byte inline_[kInlineBytes];
};

class Tensor;
// A tensor hook sees the gradient flowing into the tensor and may return a replacement
// (an undefined Tensor keeps the gradient as it is), as torch.Tensor.register_hook.
using TensorHook = std::function<Tensor(const Tensor& grad)>;
// Runs after AccumulateGrad wrote .grad, as torch.Tensor.register_post_accumulate_grad_hook.
using PostAccumulateGradHook = std::function<void(Tensor& leaf)>;

struct AutogradMeta;
class TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // undefined
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // An uninitialised tensor; callers fill it before anyone reads it. It lands on the device of the
  // op running it (DeviceGuard), the cpu outside any device op.
  static Tensor empty(Shape shape, Dtype dtype = Dtype::float64);
  // An uninitialised tensor on `device` of the running node (backend_for).
  static Tensor empty_on(Shape shape, Dtype dtype, Device device);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const;
  // Size along `dim`; negative dims count from the end. Throws index_out_of_range.
  int64_t size(int64_t dim) const;
  int64_t numel() const;
  Dtype dtype() const;
  size_t nbytes() const;
  Device device() const;
  bool is_cuda() const { return device().is_cuda(); }

  // Typed element access. REQUIRES: T matches dtype() (asserted).
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;
  void* raw_data();
  const void* raw_data() const;

  // Reads of the values. On a device they copy to the host first, synchronising the current
  // stream as PyTorch's .item() and .cpu() do.
  // The single value of a one-element tensor, as double. Throws invalid_argument otherwise.
  double item() const;
  // Element at a multi-index, as double. Throws index_out_of_range.
  double at(std::initializer_list<int64_t> index) const;
  // All values as double, row-major.
  std::vector<double> to_vector() const;
  // "tensor([[1, 2], [3, 4]], dtype=float64)"
  std::string to_string() const;

  // Autograd ---------------------------------------------------------------------------------
  bool requires_grad() const;
  // Only on leaves, as in PyTorch. Throws invalid_argument on a non-leaf.
  const Tensor& set_requires_grad(bool requires_grad) const;
  // A leaf is a tensor without grad_fn (created by the user, or not requiring grad).
  bool is_leaf() const;
  const Tensor& grad() const;
  void set_grad(Tensor grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  // Set by ops that record history: `grad_fn` produced this tensor as its output `output_nr`.
  void set_history(std::shared_ptr<autograd::Node> grad_fn, uint32_t output_nr) const;

  // The AccumulateGrad node of a leaf that requires grad, created on first use and then shared
  // (held weakly by the tensor, strongly by the graphs that use it).
  std::shared_ptr<autograd::Node> grad_accumulator() const;
  // The hooks of a leaf (empty for non-leaves, whose hooks sit on their grad_fn).
  const std::vector<TensorHook>& leaf_hooks() const;
  const std::vector<PostAccumulateGradHook>& post_accumulate_grad_hooks() const;

  // Registers a hook on the gradient of this tensor. REQUIRES: requires_grad().
  void register_hook(TensorHook hook) const;
  // Registers a hook run after .grad is accumulated. Throws invalid_argument on a non-leaf.
  void register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;

  // torch.Tensor.backward: runs the local autograd engine from this tensor.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // The version counter shared by every tensor on the same storage.
  uint32_t version() const;
  void bump_version() const;
  const std::shared_ptr<Storage>& storage() const;
  // How many Tensor handles share this tensor (its TensorImpl). Accumulation steals a gradient's
  // buffer only when nothing else can see it: one handle and one owner of the storage.
  long use_count() const { return impl_.use_count(); }

  // Identity: two handles to the same TensorImpl.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  TensorImpl* unsafe_impl() const { return impl_.get(); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// What a TensorImpl keeps only once it takes part in autograd, so plain tensors stay small.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<autograd::Node> grad_accumulator;
  // A leaf's hooks live on the tensor, not on its AccumulateGrad, which only graphs keep alive.
  std::vector<TensorHook> leaf_hooks;
  std::vector<PostAccumulateGradHook> post_accumulate_hooks;
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, Shape shape, Dtype dtype);

  std::shared_ptr<Storage> storage;
  Shape shape;
  int64_t numel;
  Dtype dtype;
  std::unique_ptr<AutogradMeta> autograd;

  AutogradMeta& autograd_meta() {
    if (!autograd) autograd = std::make_unique<AutogradMeta>();
    return *autograd;
  }
};

template <typename T>
T* Tensor::data() {
  DAGSIM_ASSERT(defined());
  DAGSIM_ASSERT(impl_->dtype == dtype_of<T>());
  return reinterpret_cast<T*>(impl_->storage->data());
}

template <typename T>
const T* Tensor::data() const {
  DAGSIM_ASSERT(defined());
  DAGSIM_ASSERT(impl_->dtype == dtype_of<T>());
  return reinterpret_cast<const T*>(impl_->storage->data());
}

// "float64 [3, 3]" ("float64 [3, 3] on cuda:0" off the cpu), for error messages.
std::string describe(const Tensor& t);

}  // namespace dagsim
