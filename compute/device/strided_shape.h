// StridedShape: how a GPU kernel finds its operands' elements. An index space of up to kMaxDims
// dimensions, row-major, and for each dimension the strides (in elements) of up to two operands in
// it: a broadcast dimension has stride 0, a transposed operand its own order. The cuda backend's
// elementwise, gather and sum kernels (cuda_op_kernels.cu) run one element of the index space per
// thread through offsets_of, and a partial sum's output through reduced_sum.
//
// What it promises: element `linear` of the index space (row-major over `shape`) lies at
// offsets_of(...).a in the first operand and .b in the second; reduced_sum adds an output's
// elements in the CPU's order (row-major over the summed dimensions, in T), so a partial sum has
// the CPU's bits. The builders (strided_shape.cc) take the kernel table's arguments apart as
// CudaKernels does, and refuse a tensor of more than kMaxDims dimensions by name.
//
// The index math is host and device code, so that strided_shape_test.cc runs it on any machine
// against the host kernels (host_kernels.h), with or without a GPU. The header is plain C++17,
// which nvcc compiles; the builders' definitions are host C++20.
#pragma once

#include <cstdint>

#include "compute/kernels/pointwise.h"

namespace dagsim::device {

inline constexpr int kMaxDims = 16;

struct StridedShape {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t a[kMaxDims] = {};
  int64_t b[kMaxDims] = {};
};

// The offsets in the two operands of element `linear` of the index space (row-major).
struct Offsets {
  int64_t a = 0;
  int64_t b = 0;
};
DAGSIM_HOST_DEVICE inline Offsets offsets_of(const StridedShape& index, int64_t linear) {
  Offsets o;
  for (int d = index.ndim - 1; d >= 0; --d) {
    const int64_t i = linear % index.shape[d];
    linear /= index.shape[d];
    o.a += i * index.a[d];
    o.b += i * index.b[d];
  }
  return o;
}

// Whether operand a (and b, when `with_b`) runs through the index space in its row-major order, so
// that element i of the index space is element i of the operand (a kernel may then skip the
// offsets). A dimension of one element has any stride.
DAGSIM_HOST_DEVICE inline bool row_major(const StridedShape& index, bool with_b = true) {
  int64_t stride = 1;
  for (int d = index.ndim - 1; d >= 0; --d) {
    if (index.shape[d] != 1 && (index.a[d] != stride || (with_b && index.b[d] != stride))) return false;
    stride *= index.shape[d];
  }
  return true;
}

// Output j of a partial sum: x's elements over `reduced` (its a strides: x's), from the offset of j
// in `kept` (row-major over kept's shape; its a strides: x's), added in order in T from +0, times
// `scale` (in double) when it is not 1.
template <typename T>
DAGSIM_HOST_DEVICE T reduced_sum(const T* x, const StridedShape& kept, const StridedShape& reduced,
                                 int64_t reduced_numel, double scale, int64_t j) {
  const int64_t base = offsets_of(kept, j).a;
  T acc{0};
  for (int64_t r = 0; r < reduced_numel; ++r) acc += x[base + offsets_of(reduced, r).a];
  return scale == 1.0 ? acc : static_cast<T>(acc * scale);
}

// The kernel table's arguments taken apart (strided_shape.cc; host only). Each throws
// dagsim::Error(invalid_argument) naming the rank for more than kMaxDims dimensions.
//
// The index space `shape` (ndim dimensions) with operand a's strides and b's (b may be null: 0s).
StridedShape strided(int ndim, const int64_t* shape, const int64_t* a, const int64_t* b);
// A sum of contiguous x (x_shape) into outputs whose stride is 0 along each summed dimension
// (out_strides, as DeviceKernels::reduce_sum takes them): x's dimensions split into those the
// outputs run along (`kept`) and those summed (`reduced`), each with x's own stride. Returns the
// number of elements each output adds.
int64_t split_for_sum(int ndim, const int64_t* x_shape, const int64_t* out_strides, StridedShape& kept,
                      StridedShape& reduced);

}  // namespace dagsim::device
