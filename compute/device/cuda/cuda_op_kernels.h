// The cuda backend's kernels for dagsim's ops (CudaKernels, cuda_kernel_table.h, calls these):
// every Pointwise formula over contiguous or broadcast operands, strided gathers, sums over any
// set of dimensions, the line kernels (softmax, layer_norm, max, the index ops, nll_loss,
// addcmul_) and dtype casts, all enqueued on a stream.
//
// Plain C++ (no CUDA types), compiled by nvcc in cuda_op_kernels.cu; a stream is the cudaStream_t
// it is, cast to void*. Each launcher checks the launch and throws dagsim::Error(internal_error)
// naming CUDA's error. Nothing blocks the host.
//
// Semantics are the CPU ops': the formulas are pointwise.h's functors, compiled for the device;
// a sum over part of a tensor adds each output's elements in the CPU's order (index order, in the
// dtype), so those bits match the CPU's; a sum of a whole tensor runs CUB's tree reduction, whose
// order differs from the CPU's sequential one (within the dtype's rounding of the sum).
#pragma once

#include <cstdint>

#include "compute/device/strided_shape.h"
#include "compute/kernels/line_kernels.h"
#include "compute/kernels/pointwise.h"

namespace dagsim::device::cuda {

using StreamHandle = void*;  // a cudaStream_t

// out[i] = op(x[i], s) for i < n (x unused by Pointwise::fill; out may be x).
template <typename T>
void pointwise_unary(Pointwise op, const T* x, T* out, int64_t n, double s, StreamHandle stream);
// out[o] = op(a[ia], b[ib], s) over `index` (n elements, out contiguous; ia, ib through its a and b
// strides). out may be a.
template <typename T>
void pointwise_binary(Pointwise op, const T* a, const T* b, T* out, const StridedShape& index, int64_t n, double s,
                      StreamHandle stream);
// out[o] = x[ix] over `index` (n elements; ix through its a strides).
template <typename T>
void gather(const T* x, T* out, const StridedShape& index, int64_t n, StreamHandle stream);
// out[j] = sum of x over `reduced` (its a strides: x's), starting at the offset of j in `kept`
// (out_numel outputs, row-major over kept's shape; its a strides: x's), times `scale` (in double)
// when it is not 1.
template <typename T>
void reduce_sum(const T* x, T* out, const StridedShape& kept, int64_t out_numel, const StridedShape& reduced,
                int64_t reduced_numel, double scale, StreamHandle stream);
// line_kernels.h's `op` over every line of `args`: one thread per line, except the ops that take a
// walk (takes_a_walk: softmax, log_softmax, layer_norm and their backwards in lane order, max and
// min) over lines of kWarpLineMin elements or more, which run a warp per line, giving the
// one-thread functor's bits.
// (The threshold is a first guess: a warp has work for every lane from 32 elements;
// BM_CudaLogSoftmax measures both forms.)
inline constexpr int64_t kWarpLineMin = 32;
template <typename T>
void lines(LineOp op, const LineArgs& args, StreamHandle stream);
// The same, always one thread per line: the reference the warp form must equal.
template <typename T>
void lines_by_threads(LineOp op, const LineArgs& args, StreamHandle stream);
// out[i] = static_cast<To>(x[i]) for i < n.
template <typename From, typename To>
void cast(const From* x, To* out, int64_t n, StreamHandle stream);

}  // namespace dagsim::device::cuda
