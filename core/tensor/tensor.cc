#include "core/tensor/tensor.h"

#include <cstdio>
#include <new>
#include <sstream>

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/engine.h"
#include "core/autograd/node.h"
#include "core/tensor/allocation_budget.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/storage_pool.h"

namespace dagsim {

namespace {
const Tensor kUndefinedTensor;
const std::shared_ptr<autograd::Node> kNoNode;
}  // namespace

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t shape_numel(const Shape& shape) {
  // The product of the non-zero sizes too: strides are products of trailing sizes, so [0, 2^40,
  // 2^40] has no elements but a stride of 2^80 that would overflow in every op that walks it.
  int64_t extent = 1;
  bool empty = false;
  for (int64_t s : shape) {
    if (s < 0) throw errors::invalid_argument("negative size in shape " + shape_str(shape));
    if (s == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(extent, s, &extent)) {
      throw errors::invalid_argument("shape " + shape_str(shape) + ": the product of its sizes passes 2^63");
    }
  }
  return empty ? 0 : extent;
}

size_t tensor_nbytes(const Shape& shape, Dtype dtype) {
  const int64_t numel = shape_numel(shape);
  if (numel > kMaxTensorNumel) {
    throw errors::invalid_argument("shape " + shape_str(shape) + " has " + std::to_string(numel) +
                                   " elements, more than a tensor may have (2^48)");
  }
  return static_cast<size_t>(numel) * dtype_size(dtype);
}

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
  allocation_budget::charge(nbytes);  // before any byte is taken: a refused size costs nothing
  data_ = nbytes <= kInlineBytes ? inline_ : static_cast<std::byte*>(storage_pool::allocate(nbytes));
  allocation_budget::count(nbytes);
}

Storage::Storage(size_t nbytes, std::shared_ptr<DeviceBackend> backend)
    : nbytes_(nbytes), backend_(std::move(backend)) {
  DAGSIM_ASSERT(backend_ != nullptr);
  device_ = backend_->device();
  allocation_budget::charge(nbytes);
  data_ = backend_->allocate(nbytes == 0 ? 1 : nbytes);
  allocation_budget::count(nbytes);
}

Storage::~Storage() {
  if (backend_ != nullptr) {
    backend_->release(data_, nbytes_ == 0 ? 1 : nbytes_);
  } else if (data_ != inline_) {
    storage_pool::release(data_, nbytes_);
  }
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage_in, Shape shape_in, Dtype dtype_in)
    : storage(std::move(storage_in)), shape(std::move(shape_in)), numel(shape_numel(shape)),
      dtype(dtype_in) {
  DAGSIM_ASSERT(storage != nullptr);
  DAGSIM_ASSERT(storage->nbytes() >= static_cast<size_t>(numel) * dtype_size(dtype));
}

Tensor Tensor::empty(Shape shape, Dtype dtype) {
  const size_t nbytes = tensor_nbytes(shape, dtype);
  if (DeviceGuard* guard = DeviceGuard::active(); guard != nullptr && guard->on_device()) {
    auto storage = std::make_shared<Storage>(nbytes, guard->backend());
    guard->note_allocation(storage);
    return Tensor(std::make_shared<TensorImpl>(std::move(storage), std::move(shape), dtype));
  }
  return Tensor(std::make_shared<TensorImpl>(std::make_shared<Storage>(nbytes), std::move(shape),
                                             dtype));
}

Tensor Tensor::empty_on(Shape shape, Dtype dtype, Device device) {
  if (device.is_cpu()) {
    DeviceGuard::Suspend off_device;  // the cpu, whatever op is open
    return empty(std::move(shape), dtype);
  }
  const size_t nbytes = tensor_nbytes(shape, dtype);
  return Tensor(std::make_shared<TensorImpl>(std::make_shared<Storage>(nbytes, backend_for(device)),
                                             std::move(shape), dtype));
}

Device Tensor::device() const {
  DAGSIM_ASSERT(defined());
  return impl_->storage->device();
}

namespace {
// The values of a device tensor on the host, as .cpu() gives them: a copy on the current stream
// that the host waits for (DeviceBackend::read_to_host). The tensor itself on the cpu.
Tensor host_values(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  Tensor out = Tensor::empty_on(t.shape(), t.dtype(), Device::cpu());
  t.storage()->backend()->read_to_host(*t.storage(), static_cast<std::byte*>(out.raw_data()), t.nbytes());
  return out;
}
}  // namespace

const Shape& Tensor::shape() const {
  DAGSIM_ASSERT(defined());
  return impl_->shape;
}
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  const int64_t wrapped = d < 0 ? d + n : d;
  if (wrapped < 0 || wrapped >= n) {
    throw errors::index_out_of_range("dimension " + std::to_string(d) + " out of range for tensor of shape " +
                                     shape_str(shape()));
  }
  return shape()[static_cast<size_t>(wrapped)];
}

int64_t Tensor::numel() const {
  DAGSIM_ASSERT(defined());
  return impl_->numel;
}
Dtype Tensor::dtype() const {
  DAGSIM_ASSERT(defined());
  return impl_->dtype;
}
size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }

void* Tensor::raw_data() {
  DAGSIM_ASSERT(defined());
  return impl_->storage->data();
}
const void* Tensor::raw_data() const {
  DAGSIM_ASSERT(defined());
  return impl_->storage->data();
}

double Tensor::item() const {
  if (numel() != 1) {
    throw errors::invalid_argument("item(): a tensor with " + std::to_string(numel()) +
                                   " elements cannot be converted to a scalar (shape " +
                                   shape_str(shape()) + ")");
  }
  const Tensor host = host_values(*this);
  return dispatch_dtype(dtype(), [&]<typename T>() { return static_cast<double>(host.data<T>()[0]); });
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  if (static_cast<int64_t>(index.size()) != dim()) {
    throw errors::index_out_of_range("at(): " + std::to_string(index.size()) +
                                     " indices for a tensor of shape " + shape_str(shape()));
  }
  int64_t offset = 0;
  size_t d = 0;
  for (int64_t i : index) {
    const int64_t extent = shape()[d];
    if (i < 0 || i >= extent) {
      throw errors::index_out_of_range("at(): index " + std::to_string(i) + " out of range for dim " +
                                       std::to_string(d) + " of shape " + shape_str(shape()));
    }
    offset = offset * extent + i;
    ++d;
  }
  const Tensor host = host_values(*this);
  return dispatch_dtype(dtype(),
                        [&]<typename T>() { return static_cast<double>(host.data<T>()[offset]); });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  const Tensor host = host_values(*this);
  dispatch_dtype(dtype(), [&]<typename T>() {
    const T* p = host.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = to_vector();
  std::ostringstream out;
  out.precision(17);
  // Nested brackets, row-major.
  std::function<void(size_t, size_t&)> emit = [&](size_t d, size_t& pos) {
    if (d == shape().size()) {
      out << values[pos++];
      return;
    }
    out << "[";
    for (int64_t i = 0; i < shape()[d]; ++i) {
      if (i > 0) out << ", ";
      emit(d + 1, pos);
    }
    out << "]";
  };
  size_t pos = 0;
  out << "tensor(";
  emit(0, pos);
  if (!device().is_cpu()) out << ", device='" << device().str() << "'";
  out << ", dtype=" << dtype_name(dtype()) << ")";
  return out.str();
}

bool Tensor::requires_grad() const {
  DAGSIM_ASSERT(defined());
  return impl_->autograd != nullptr && impl_->autograd->requires_grad;
}

const Tensor& Tensor::set_requires_grad(bool requires_grad) const {
  DAGSIM_ASSERT(defined());
  if (!is_leaf()) {
    throw errors::invalid_argument(
        "you can only change requires_grad flags of leaf variables (this tensor has grad_fn " +
        std::string(grad_fn()->name()) + ")");
  }
  impl_->autograd_meta().requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const {
  DAGSIM_ASSERT(defined());
  return impl_->autograd == nullptr || impl_->autograd->grad_fn == nullptr;
}

const Tensor& Tensor::grad() const {
  DAGSIM_ASSERT(defined());
  return impl_->autograd ? impl_->autograd->grad : kUndefinedTensor;
}

void Tensor::set_grad(Tensor grad) const {
  DAGSIM_ASSERT(defined());
  if (grad.defined() && grad.shape() != shape()) {
    throw errors::shape_mismatch("assigned grad has shape " + shape_str(grad.shape()) +
                                 " but the tensor has shape " + shape_str(shape()));
  }
  impl_->autograd_meta().grad = std::move(grad);
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  DAGSIM_ASSERT(defined());
  return impl_->autograd ? impl_->autograd->grad_fn : kNoNode;
}

uint32_t Tensor::output_nr() const {
  DAGSIM_ASSERT(defined());
  return impl_->autograd ? impl_->autograd->output_nr : 0;
}

void Tensor::set_history(std::shared_ptr<autograd::Node> grad_fn, uint32_t output_nr) const {
  DAGSIM_ASSERT(defined());
  DAGSIM_ASSERT(grad_fn != nullptr);
  AutogradMeta& meta = impl_->autograd_meta();
  meta.requires_grad = true;
  meta.grad_fn = std::move(grad_fn);
  meta.output_nr = output_nr;
}

std::shared_ptr<autograd::Node> Tensor::grad_accumulator() const {
  DAGSIM_ASSERT(defined());
  DAGSIM_ASSERT(is_leaf());
  DAGSIM_ASSERT(requires_grad());
  AutogradMeta& meta = impl_->autograd_meta();
  std::shared_ptr<autograd::Node> node = meta.grad_accumulator.lock();
  if (!node) {
    node = std::make_shared<autograd::AccumulateGrad>(*this);
    meta.grad_accumulator = node;
  }
  return node;
}

void Tensor::register_hook(TensorHook hook) const {
  if (!requires_grad()) {
    throw errors::invalid_argument(
        "cannot register a hook on a tensor that doesn't require gradient");
  }
  if (is_leaf()) {
    impl_->autograd_meta().leaf_hooks.push_back(std::move(hook));
  } else {
    grad_fn()->add_pre_hook(output_nr(), std::move(hook));
  }
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  if (!is_leaf() || !requires_grad()) {
    throw errors::invalid_argument(
        "post accumulate grad hooks can only be registered on leaf tensors that require grad");
  }
  impl_->autograd_meta().post_accumulate_hooks.push_back(std::move(hook));
}

const std::vector<TensorHook>& Tensor::leaf_hooks() const {
  static const std::vector<TensorHook> kNone;
  return impl_->autograd ? impl_->autograd->leaf_hooks : kNone;
}

const std::vector<PostAccumulateGradHook>& Tensor::post_accumulate_grad_hooks() const {
  static const std::vector<PostAccumulateGradHook> kNone;
  return impl_->autograd ? impl_->autograd->post_accumulate_hooks : kNone;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::Engine::backward({*this}, {gradient}, retain_graph);
}

uint32_t Tensor::version() const {
  DAGSIM_ASSERT(defined());
  return impl_->storage->version();
}
void Tensor::bump_version() const {
  DAGSIM_ASSERT(defined());
  impl_->storage->bump_version();
}
const std::shared_ptr<Storage>& Tensor::storage() const {
  DAGSIM_ASSERT(defined());
  return impl_->storage;
}

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string out = std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape());
  if (!t.device().is_cpu()) out += " on " + t.device().str();
  return out;
}

}  // namespace dagsim
