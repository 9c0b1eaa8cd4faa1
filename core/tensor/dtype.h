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

// Product of the sizes; 1 for a scalar. Throws invalid_argument for a negative size, or when the
// product of the non-zero sizes passes int64 (a stride would overflow, even with no elements): a
// shape can come off the wire or from a peer's attributes, never undefined behaviour.
int64_t shape_numel(const Shape& shape);

// The most elements a tensor may have: 2^48 (2 PiB of float64), far past any memory, and small
// enough that no byte count of a tensor or of a few of them together overflows 64 bits.
inline constexpr int64_t kMaxTensorNumel = int64_t{1} << 48;

// The bytes of a tensor of `shape` and `dtype`. Throws invalid_argument (naming the shape) when
// shape_numel does or the count passes kMaxTensorNumel.
size_t tensor_nbytes(const Shape& shape, Dtype dtype);

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
