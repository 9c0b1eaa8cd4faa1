// Dtype conversion and PyTorch's type promotion for the elementwise binary ops (ops.h): to_dtype
// is differentiable (its backward converts the gradient back, as PyTorch's ToCopyBackward), and
// promote() brings two operands to their common dtype (float64 wins over float32), so add(float32,
// float64) is a float64 tensor whose float32 input gets a float32 gradient
// (test_backward_different_dtypes).
#include "core/autograd/op_backward.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/op_util.h"
#include "core/tensor/ops.h"

namespace dagsim {

Tensor to_dtype(const Tensor& a, Dtype dtype) {
  DeviceGuard device_guard("to_dtype", {&a});
  detail::check_defined("to", a);
  if (a.dtype() == dtype) return a;  // as torch.Tensor.to: the tensor itself, no copy
  Tensor out = Tensor::empty(a.shape(), dtype);
  if (DeviceKernels* k = device_kernels()) {
    k->cast(a.dtype(), kernel_input(a), dtype, detail::bytes(out), a.numel());
  } else {
    cast_on_host(a.dtype(), detail::bytes(a), dtype, detail::bytes(out), a.numel());
  }
  autograd::record_op("ToCopyBackward", {a}, {out}, [from = a.dtype()](const autograd::BackwardArgs& args) {
    return autograd::variable_list{args.needs(0) ? to_dtype(args.grads[0], from) : Tensor()};
  });
  return out;
}

Tensor to_device(const Tensor& a, Device device) {
  detail::check_defined("to", a);
  const Device from = a.device();
  if (from == device) return a;  // as torch.Tensor.to: the tensor itself, no copy
  Tensor out = Tensor::empty_on(a.shape(), a.dtype(), device);
  if (from.is_cpu()) {
    out.storage()->backend()->write_from_host(*out.storage(), static_cast<const std::byte*>(a.raw_data()), a.nbytes());
  } else if (device.is_cpu()) {
    a.storage()->backend()->read_to_host(*a.storage(), static_cast<std::byte*>(out.raw_data()), a.nbytes());
  } else {
    // Between two GPUs through the host: the source's stream is waited for, the target's copy
    // is ordered on its current stream.
    const Tensor host = to_device(detach(a), Device::cpu());
    out.storage()->backend()->write_from_host(*out.storage(), static_cast<const std::byte*>(host.raw_data()), a.nbytes());
  }
  autograd::record_op("ToCopyBackward", {a}, {out}, [from](const autograd::BackwardArgs& args) {
    return autograd::variable_list{args.needs(0) ? to_device(args.grads[0], from) : Tensor()};
  });
  return out;
}

Dtype promote_types(Dtype a, Dtype b) { return a == Dtype::float64 || b == Dtype::float64 ? Dtype::float64 : Dtype::float32; }

std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b) {
  DeviceGuard device_guard("promote", {&a, &b});
  if (!a.defined() || !b.defined() || a.dtype() == b.dtype()) return {a, b};
  const Dtype common = promote_types(a.dtype(), b.dtype());
  return {to_dtype(a, common), to_dtype(b, common)};
}

}  // namespace dagsim
