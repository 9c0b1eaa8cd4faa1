#include "core/tensor/device_guard.h"

#include <exception>
#include <new>
#include <string_view>

#include "core/base/error.h"
#include "core/base/open_op_scope.h"
#include "core/tensor/device_kernels.h"

namespace dagsim {

namespace {

[[noreturn]] void throw_mismatch(const char* op, Device a, Device b) {
  // PyTorch's text (TensorIterator and the cuda kernels' device checks), after the op's name.
  throw errors::invalid_argument(std::string(op) + ": Expected all tensors to be on the same device, but found at least two devices, " +
                                 a.str() + " and " + b.str() + "!");
}
}  // namespace

DeviceGuard::DeviceGuard(const char* op, std::initializer_list<const Tensor*> inputs, const Tensor* written) {
  for (const Tensor* t : inputs) {
    if (t != nullptr && t->defined()) add_input(op, *t);
  }
  if (written != nullptr && written->defined()) {
    add_input(op, *written);
    // A 0-dim CPU self is no scalar argument: the op writes it, on the cpu.
    if (backend_ != nullptr && written->device().is_cpu()) throw_mismatch(op, device_, Device::cpu());
    if (backend_ != nullptr) writes_.push_back(written->storage().get());
  }
  open();
}

DeviceGuard::DeviceGuard(const char* op, const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) {
    if (t.defined()) add_input(op, t);
  }
  open();
}

void DeviceGuard::add_input(const char* op, const Tensor& t) {
  const Device d = t.device();
  if (d.is_cpu()) {
    // A 0-dim CPU tensor is a scalar any device's kernel takes as an argument, as in PyTorch.
    if (t.dim() == 0) return;
    if (backend_ != nullptr) throw_mismatch(op, device_, d);
    saw_cpu_ = true;
    return;
  }
  if (backend_ == nullptr) {
    if (saw_cpu_) throw_mismatch(op, d, Device::cpu());  // the GPU first, whatever the order, as PyTorch
    device_ = d;
    backend_ = t.storage()->backend_ptr();
    if (backend_->kernels() != nullptr && !has_device_kernel(op)) {
      // This device's memory is not the host's: the op's CPU code would read device pointers.
      throw errors::invalid_argument(std::string(op) + ": dagsim has no " + backend_->kind() + " kernel for this op yet (" +
                                     d.str() + "; the ops with kernels are listed in docs/devices.md)");
    }
  } else if (d != device_) {
    throw_mismatch(op, device_, d);
  }
  reads_.push_back(t.storage().get());
}

void DeviceGuard::open() {
  parent = detail::open_op_scope();
  uncaught_at_open = detail::own_uncaught_exceptions();
  detail::open_op_scope() = this;
}

DeviceGuard::~DeviceGuard() {
  DAGSIM_ASSERT_MSG(active() == this, "device guards close in the order they opened");
  detail::open_op_scope() = parent;
  if (backend_ == nullptr || detail::own_uncaught_exceptions() != uncaught_at_open) return;
  try {
    std::vector<std::shared_ptr<Storage>> alive;
    alive.reserve(allocated_.size());
    for (const auto& weak : allocated_) {
      if (auto s = weak.lock()) alive.push_back(std::move(s));
    }
    for (const auto& s : alive) writes_.push_back(s.get());
    backend_->launch(reads_, writes_, copy_);
  } catch (const std::bad_alloc&) {
    // Out of memory (a run's memory limit): the outputs stay unordered, and the run is ending.
  }
}

// Every open op scope is a DeviceGuard: the runtime only steps out of them and back in.
DeviceGuard* DeviceGuard::active() { return static_cast<DeviceGuard*>(detail::open_op_scope()); }

}  // namespace dagsim
