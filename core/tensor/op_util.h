// Argument checks and loops shared by the op files (private to core/tensor).
#pragma once

#include <string>

#include "core/tensor/tensor.h"

namespace dagsim::detail {

// Throws invalid_argument "<op>: expected a defined tensor for <what>".
void check_defined(const char* op, const Tensor& t, const char* what = "input");
// Throws dtype_mismatch naming the op and both dtypes.
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
// Wraps a negative dim and checks it is in range for `ndim` dims (ndim + 1 when inserting);
// throws index_out_of_range naming the op and the shape.
int64_t wrap_dim(const char* op, int64_t dim, const Shape& shape, bool inserting = false);

// Row-major strides of a contiguous shape.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// C = beta C + op(A)·op(B), row-major, on the host's BLAS (linalg.cc); float and double.
template <typename T>
void gemm_host(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
               int64_t ldb, T beta, T* c, int64_t ldc);

// A tensor's bytes for a device kernel (device_kernels.h), which never reads them on the host.
inline const std::byte* bytes(const Tensor& t) { return static_cast<const std::byte*>(t.raw_data()); }
inline std::byte* bytes(Tensor& t) { return static_cast<std::byte*>(t.raw_data()); }

// y[o, i] = scale * (the sum of x[o, k, i] over k), x being [outer, size, inner] row-major: each
// output adds its elements in order of k, from +0, and is scaled once (the CPU's sums over a dim,
// and sum_to's). The loops run several outputs' chains side by side; the order is the same.
template <typename T>
void sum_middle(const T* x, T* y, int64_t outer, int64_t size, int64_t inner, double scale);

// Strides of a tensor of `shape` seen as broadcast to `target` (0 along broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target);

// Calls f(offset_a, offset_b, linear_out) for every element of `out_shape`, with the offsets
// of the two broadcast operands (strides from broadcast_strides). Iterative odometer.
template <typename F>
void for_each_broadcast(const Shape& out_shape, const std::vector<int64_t>& stride_a,
                        const std::vector<int64_t>& stride_b, F&& f) {
  const size_t nd = out_shape.size();
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  std::vector<int64_t> index(nd, 0);
  int64_t off_a = 0, off_b = 0;
  for (int64_t linear = 0; linear < n; ++linear) {
    f(off_a, off_b, linear);
    for (size_t d = nd; d-- > 0;) {
      ++index[d];
      off_a += stride_a[d];
      off_b += stride_b[d];
      if (index[d] < out_shape[d]) break;
      off_a -= stride_a[d] * index[d];
      off_b -= stride_b[d] * index[d];
      index[d] = 0;
    }
  }
}

}  // namespace dagsim::detail
