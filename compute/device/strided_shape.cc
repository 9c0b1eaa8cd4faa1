#include "compute/device/strided_shape.h"

#include <string>

#include "core/base/error.h"

namespace dagsim::device {

namespace {

void check_rank(int ndim) {
  if (ndim < 0 || ndim > kMaxDims) {
    throw errors::invalid_argument("a tensor of " + std::to_string(ndim) + " dimensions: the cuda kernels take at most " +
                                   std::to_string(kMaxDims));
  }
}

}  // namespace

StridedShape strided(int ndim, const int64_t* shape, const int64_t* a, const int64_t* b) {
  check_rank(ndim);
  StridedShape s;
  s.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    s.shape[d] = shape[d];
    s.a[d] = a[d];
    s.b[d] = b == nullptr ? 0 : b[d];
  }
  return s;
}

int64_t split_for_sum(int ndim, const int64_t* x_shape, const int64_t* out_strides, StridedShape& kept,
                      StridedShape& reduced) {
  check_rank(ndim);
  kept = {};
  reduced = {};
  int64_t x_strides[kMaxDims] = {};
  int64_t x_stride = 1;
  for (int d = ndim; d-- > 0;) {
    x_strides[d] = x_stride;
    x_stride *= x_shape[d];
  }
  int64_t reduced_numel = 1;
  for (int d = 0; d < ndim; ++d) {
    StridedShape& part = out_strides[d] != 0 ? kept : reduced;
    part.shape[part.ndim] = x_shape[d];
    part.a[part.ndim] = x_strides[d];
    ++part.ndim;
    if (out_strides[d] == 0) reduced_numel *= x_shape[d];
  }
  return reduced_numel;
}

}  // namespace dagsim::device
