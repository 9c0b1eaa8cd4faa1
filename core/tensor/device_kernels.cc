#include "core/tensor/device_kernels.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/tensor/device_guard.h"

namespace dagsim {

bool has_device_kernel(std::string_view op) {
  return std::find(std::begin(kOpsWithKernels), std::end(kOpsWithKernels), op) != std::end(kOpsWithKernels);
}

DeviceKernels* device_kernels() {
  const DeviceGuard* guard = DeviceGuard::active();
  return guard != nullptr && guard->on_device() ? guard->backend()->kernels() : nullptr;
}

const std::byte* kernel_input(const Tensor& t) {
  if (!t.device().is_cpu()) return static_cast<const std::byte*>(t.raw_data());
  DeviceGuard* guard = DeviceGuard::active();
  DAGSIM_ASSERT_MSG(guard != nullptr && guard->on_device() && t.dim() == 0,
                    "only a 0-dim CPU tensor joins an op on a device (DeviceGuard checks)");
  Tensor staged = Tensor::empty_on({}, t.dtype(), guard->device());
  staged.storage()->backend()->write_from_host(*staged.storage(), static_cast<const std::byte*>(t.raw_data()), t.nbytes());
  guard->keep_alive(staged);
  return static_cast<const std::byte*>(staged.raw_data());
}

const char* pointwise_name(Pointwise op) {
  switch (op) {
    case Pointwise::add_scalar: return "add_scalar";
    case Pointwise::mul_scalar: return "mul_scalar";
    case Pointwise::neg: return "neg";
    case Pointwise::pow_scalar: return "pow_scalar";
    case Pointwise::relu: return "relu";
    case Pointwise::abs: return "abs";
    case Pointwise::sqrt: return "sqrt";
    case Pointwise::tanh: return "tanh";
    case Pointwise::exp: return "exp";
    case Pointwise::log: return "log";
    case Pointwise::sigmoid: return "sigmoid";
    case Pointwise::fill: return "fill";
    case Pointwise::add: return "add";
    case Pointwise::sub: return "sub";
    case Pointwise::mul: return "mul";
    case Pointwise::div: return "div";
    case Pointwise::axpy: return "axpy";
    case Pointwise::copy: return "copy";
    case Pointwise::relu_backward: return "relu_backward";
    case Pointwise::abs_backward: return "abs_backward";
    case Pointwise::sqrt_backward: return "sqrt_backward";
    case Pointwise::pow_backward: return "pow_backward";
    case Pointwise::tanh_backward: return "tanh_backward";
    case Pointwise::sigmoid_backward: return "sigmoid_backward";
  }
  return "?";
}

}  // namespace dagsim
