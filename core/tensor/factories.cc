// Tensor factories: constant fills, ranges, explicit values and seeded random tensors.
#include <cmath>

#include "core/tensor/device_guard.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/ops.h"

namespace dagsim {

namespace {
template <typename Gen>
Tensor generate(const Shape& shape, Dtype dtype, Gen&& gen) {
  if (device_kernels() != nullptr) {
    // Inside an op on a device the host does not address: made on the host, then copied there.
    const Device device = DeviceGuard::active()->device();
    Tensor host;
    {
      DeviceGuard::Suspend on_host;
      host = generate(shape, dtype, gen);
    }
    return to_device(host, device);
  }
  Tensor out = Tensor::empty(shape, dtype);
  dispatch_dtype(dtype, [&]<typename T>() {
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<T>(gen(i));
  });
  return out;
}
}  // namespace

Tensor zeros(const Shape& shape, Dtype dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, Dtype dtype) { return full(shape, 1.0, dtype); }

Tensor full(const Shape& shape, double value, Dtype dtype) {
  Tensor out = Tensor::empty(shape, dtype);
  if (DeviceKernels* k = device_kernels()) {
    k->unary(Pointwise::fill, dtype, nullptr, static_cast<std::byte*>(out.raw_data()), out.numel(), value);
    return out;
  }
  dispatch_dtype(dtype, [&]<typename T>() { std::fill_n(out.data<T>(), out.numel(), static_cast<T>(value)); });
  return out;
}

Tensor scalar_tensor(double value, Dtype dtype) { return full({}, value, dtype); }

Tensor arange(double start, double end, double step, Dtype dtype) {
  if (step == 0.0 || !std::isfinite(step)) {
    throw errors::invalid_argument("arange: step must be finite and nonzero");
  }
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    throw errors::invalid_argument("arange: upper bound and larger bound inconsistent with step sign");
  }
  const auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  return generate({n}, dtype, [&](int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor arange(int64_t end, Dtype dtype) { return arange(0.0, static_cast<double>(end), 1.0, dtype); }

Tensor from_values(const Shape& shape, const std::vector<double>& values, Dtype dtype) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape)) {
    throw errors::shape_mismatch("from_values: " + std::to_string(values.size()) +
                                 " values do not fill shape " + shape_str(shape) + " (" +
                                 std::to_string(shape_numel(shape)) + " elements)");
  }
  return generate(shape, dtype, [&](int64_t i) { return values[static_cast<size_t>(i)]; });
}

Tensor rand_uniform(const Shape& shape, Prng& prng, double low, double high, Dtype dtype) {
  if (!(low < high)) throw errors::invalid_argument("rand_uniform: expected low < high");
  return generate(shape, dtype, [&](int64_t) { return prng.uniform(low, high); });
}

Tensor randn(const Shape& shape, Prng& prng, double mean, double stddev, Dtype dtype) {
  if (!(stddev >= 0.0)) throw errors::invalid_argument("randn: expected stddev >= 0");
  return generate(shape, dtype, [&](int64_t) { return prng.normal(mean, stddev); });
}

Tensor zeros_on(const Shape& shape, Dtype dtype, Device device) {
  Tensor host;
  {
    DeviceGuard::Suspend on_host;
    host = zeros(shape, dtype);
  }
  return device.is_cpu() ? host : to_device(host, device);
}

Tensor zeros_like(const Tensor& t) {
  DeviceGuard device_guard("zeros_like", {&t});
  return zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  DeviceGuard device_guard("ones_like", {&t});
  return ones(t.shape(), t.dtype());
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector();
  const std::vector<double> y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i])) return false;
  }
  return true;
}

}  // namespace dagsim
