// Dtype and Shape: the element types and the shape vocabulary of dagsim tensors.
// Two float dtypes only: float64 is the default (conformance compares against a local oracle at
// rtol 1e-9), float32 is there for speed and for PyTorch parity in benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/assert.h"

namespace dagsim {

enum class Dtype : uint8_t { float32 = 0, float64 = 1 };

inline std::string_view dtype_name(Dtype dtype) {
  return dtype == Dtype::float32 ? "float32" : "float64";
}
inline size_t dtype_size(Dtype dtype) { return dtype == Dtype::float32 ? 4 : 8; }

using Shape = std::vector<int64_t>;

// "[3, 3]"; "[]" for a scalar.
std::string shape_str(const Shape& shape);

// Product of the sizes; 1 for a scalar.
int64_t shape_numel(const Shape& shape);

// Calls f.template operator()<T>() with T = float or double, after PyTorch's AT_DISPATCH.
template <typename F>
decltype(auto) dispatch_dtype(Dtype dtype, F&& f) {
  switch (dtype) {
    case Dtype::float32:
      return f.template operator()<float>();
    case Dtype::float64:
      return f.template operator()<double>();
  }
  DAGSIM_UNREACHABLE();
}

template <typename T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<float>() { return Dtype::float32; }
template <>
constexpr Dtype dtype_of<double>() { return Dtype::float64; }

}  // namespace dagsim
