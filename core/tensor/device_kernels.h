// DeviceKernels: the kernels dagsim's ops run with on a device whose memory the host does not
// address (the cuda backend), as PyTorch's dispatcher picks an op's CUDA kernel.
//
// An op computes its values inline on the cpu, and on the simulated GPU (host memory) too. Under
// a DeviceGuard whose backend has a kernel table (DeviceBackend::kernels), the op instead calls
// the table's few primitives below, in the same order as its CPU code computes, and never touches
// the tensors' bytes on the host. The primitives are enough for the ops on kOpsWithKernels's list;
// DeviceGuard refuses any other op on such a device, naming it, before it could read device
// memory on the host.
//
// Every primitive enqueues on the backend's current stream; the guard orders the op as one kernel
// (DeviceBackend::launch), which for a real GPU is what the stream does by itself. Shapes and
// strides are in elements, row-major; a "strides" span gives, for each dimension of the shape it
// goes with, how far one step along it moves in the other array (0 where it broadcasts).
//
// compute/device/host_kernels.h is the table's reference on host memory: the simulated GPU can run
// through it, so CI checks that every listed op calls the table as its CPU code computes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/tensor/dtype.h"
#include "compute/kernels/line_kernels.h"
#include "compute/kernels/pointwise.h"

namespace dagsim {

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;

  // out[i] = op(x[i], scalar) for i < n; `x` is unused by Pointwise::fill. out may be x.
  virtual void unary(Pointwise op, Dtype dtype, const std::byte* x, std::byte* out, int64_t n, double scalar) = 0;
  // out[o] = op(a[ia], b[ib], scalar) for every index o of `shape` (contiguous), ia and ib through
  // a_strides and b_strides. out may be a (in place).
  virtual void binary(Pointwise op, Dtype dtype, const std::byte* a, std::span<const int64_t> a_strides,
                      const std::byte* b, std::span<const int64_t> b_strides, std::byte* out,
                      std::span<const int64_t> shape, double scalar) = 0;
  // out[o] = x[ix] for every index o of `shape`, ix through x_strides: expand, transpose, clone.
  virtual void gather(Dtype dtype, const std::byte* x, std::span<const int64_t> x_strides, std::byte* out,
                      std::span<const int64_t> shape) = 0;
  // out[j] = scale * (sum of x[i] over the indices i of x_shape that out_strides map to j), for
  // every j < out_numel (out_strides: 0 along summed dimensions). sum, mean, sum_to, sum(dim). The
  // sum runs in the dtype; where the scale is not 1 the product is taken in double, as the CPU's.
  virtual void reduce_sum(Dtype dtype, const std::byte* x, std::span<const int64_t> x_shape, std::byte* out,
                          int64_t out_numel, std::span<const int64_t> out_strides, double scale) = 0;
  // For each of `rows` rows: row_bytes bytes from src + r * src_pitch to dst + r * dst_pitch (a
  // slice's copy: narrow, split, cat, stack; cudaMemcpy2D's shape).
  virtual void copy_rows(const std::byte* src, size_t src_pitch, std::byte* dst, size_t dst_pitch, size_t row_bytes,
                         size_t rows) = 0;
  // C = op(A) op(B) + beta C, row-major with leading dimensions, as core/tensor's gemm<T>.
  virtual void gemm(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const std::byte* a,
                    int64_t lda, const std::byte* b, int64_t ldb, double beta, std::byte* c, int64_t ldc) = 0;
  // Every line of `args` through line_kernels.h's `op` (softmax, layer_norm, max over a dim, the
  // index ops and their scatter-adds, nll_loss, addcmul_). Every pointer in args is the device's.
  // layer_norm_backward with args.y2 writes dw there too: a table whose kernels run one op at a
  // time passes the call through run_separately (line_kernels.h).
  virtual void lines(LineOp op, Dtype dtype, const LineArgs& args) = 0;
  // out[i] = static_cast<To>(x[i]) for i < n (to_dtype).
  virtual void cast(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n) = 0;
};

// The ops that run on a device with a kernel table, by the names their DeviceGuards give
// ("backward" is the engine's guard around a node's apply).
inline constexpr std::string_view kOpsWithKernels[] = {
    "abs",         "add",       "add_",          "addcmul_",    "backward",  "bmm",       "cat",     "chunk",
    "clone",       "copy_",     "cos",           "cross_entropy", "detach",  "div",       "div_",    "dropout",
    "embedding",   "exp",       "expand",        "fill_",       "gather",    "index_select", "layer_norm",
    "linear",      "log",       "log_softmax",   "matmul",      "max",       "mean",      "min",     "mse_loss",
    "mul",         "mul_",      "multi_dot",     "narrow",      "neg",       "nll_loss",  "ones_like",
    "pow",         "promote",   "relu",          "reshape",     "sigmoid",   "sin",       "softmax", "split",
    "sqrt",        "sqrt_",     "squeeze",       "stack",       "sub",       "sub_",      "sum",     "sum_to",
    "tanh",        "to_dtype",  "transpose",     "unsqueeze",   "zero_",     "zeros_like",
};
bool has_device_kernel(std::string_view op);

class Tensor;

// An input's bytes for the open op's kernels: its own, or, for a 0-dim CPU tensor (a scalar
// argument, which PyTorch's CUDA kernels take by value) under a kernel table, a copy on the op's
// device made on its current stream and kept alive until the op closes. A kernel never gets host
// memory. Without a kernel table (the cpu), the tensor's own bytes.
const std::byte* kernel_input(const Tensor& t);

// Runs `op` over args' lines through the open op's kernel table, or on the host where there is
// none (the cpu, the sim GPU's default): one code path for every device.
void run_lines(LineOp op, Dtype dtype, const LineArgs& args);

// DeviceKernels::lines's work on host memory (the cpu, the host reference table): the functors of
// line_kernels.h, except take and index_add, which run a row at a time (vectorised) with the same
// reads and, element by element, the same adds in the same order, so the same bits; and softmax,
// log_softmax and their backwards, which run vec::softmax_row and vec::softmax_backward_row: the
// functors' order, with SLEEF's exp for std::exp.
void run_lines_on_host(LineOp op, Dtype dtype, const LineArgs& args);

// DeviceKernels::cast's work on host memory (the cpu's to_dtype, the host reference table).
void cast_on_host(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n);

// `values` where the open op's kernels can read them (LineArgs::index): a tensor on the op's
// device (copied there on its current stream and kept alive until the op closes) or on the cpu,
// whose bytes are the int64 values. Keep it for as long as a kernel may read it.
Tensor index_array(std::span<const int64_t> values);
const int64_t* index_data(const Tensor& array);

// The kernel table of the op now open (the active DeviceGuard's backend), or null: on the cpu, and
// on a device whose memory the host addresses and that runs the CPU code (the sim GPU's default).
DeviceKernels* device_kernels();

}  // namespace dagsim
