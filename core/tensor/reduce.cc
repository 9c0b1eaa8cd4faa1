// Reductions (sum, mean, max, min: over everything or one dim, with keepdim) and the
// normalisations over a dim (softmax, log_softmax), computed in the numerically stable
// max-shifted form.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/autograd/op_backward.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/op_util.h"
#include "core/tensor/ops.h"
#include "compute/kernels/vector_math.h"

namespace dagsim {

using autograd::BackwardArgs;
using autograd::record_op;
using autograd::variable_list;

// The CPU's sums over a dim add each output's elements in order, from +0 (the sim GPU's host
// table does the same), and scale once. These two loops keep that order and only change what runs
// beside what: several rows' chains at once, or whole rows of columns.

namespace {

// Each of `rows` contiguous rows of `size` summed: kRowsAtOnce rows side by side, so their chains
// of dependent adds overlap (one row's chain alone waits on every add).
constexpr int64_t kRowsAtOnce = 8;
template <typename T>
void sum_rows(const T* x, T* y, int64_t rows, int64_t size, double scale) {
  int64_t r = 0;
  for (; r + kRowsAtOnce <= rows; r += kRowsAtOnce) {
    T acc[kRowsAtOnce] = {};
    for (int64_t k = 0; k < size; ++k) {
      for (int64_t j = 0; j < kRowsAtOnce; ++j) acc[j] += x[(r + j) * size + k];
    }
    for (int64_t j = 0; j < kRowsAtOnce; ++j) y[r + j] = static_cast<T>(acc[j] * scale);
  }
  for (; r < rows; ++r) {
    T acc{0};
    for (int64_t k = 0; k < size; ++k) acc += x[r * size + k];
    y[r] = static_cast<T>(acc * scale);
  }
}

// The sums down the columns of `outer` blocks of [size, inner]: a block's rows added into its output
// row one after another, a row of kShortRow or more through the vector kernels (vector_math.h),
// which add across the columns (each column still in order of its rows).
constexpr int64_t kShortRow = 16;
template <typename T>
void sum_columns(const T* x, T* y, int64_t outer, int64_t size, int64_t inner, double scale) {
  for (int64_t o = 0; o < outer; ++o) {
    T* acc = y + o * inner;
    std::fill_n(acc, inner, T{0});
    for (int64_t k = 0; k < size; ++k) {
      const T* row = x + (o * size + k) * inner;
      if (inner < kShortRow) {
        for (int64_t i = 0; i < inner; ++i) acc[i] += row[i];
      } else {
        vec::binary(vec::Binary::add, acc, row, acc, inner);
      }
    }
    for (int64_t i = 0; i < inner; ++i) acc[i] = static_cast<T>(acc[i] * scale);
  }
}

}  // namespace

template <typename T>
void detail::sum_middle(const T* x, T* y, int64_t outer, int64_t size, int64_t inner, double scale) {
  if (inner == 1) {
    sum_rows(x, y, outer, size, scale);
  } else {
    sum_columns(x, y, outer, size, inner, scale);
  }
}
template void detail::sum_middle(const float*, float*, int64_t, int64_t, int64_t, double);
template void detail::sum_middle(const double*, double*, int64_t, int64_t, int64_t, double);

namespace {

// Splits a shape around `dim` into (outer, size, inner) extents of the row-major layout.
struct DimSplit {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
};

DimSplit split_at(const Shape& shape, int64_t dim) {
  DimSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) s.outer *= shape[d];
    else if (d == dim) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

Shape reduced_shape(const Shape& shape, int64_t dim, bool keepdim) {
  Shape out = shape;
  if (keepdim) {
    out[dim] = 1;
  } else {
    out.erase(out.begin() + dim);
  }
  return out;
}

// Sum over `dim` (already wrapped), scaled by `scale`.
Tensor reduce_dim(const Tensor& a, int64_t dim, bool keepdim, double scale) {
  const DimSplit s = split_at(a.shape(), dim);
  Tensor out = Tensor::empty(reduced_shape(a.shape(), dim, keepdim), a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    std::vector<int64_t> strides = detail::contiguous_strides(reduced_shape(a.shape(), dim, /*keepdim=*/true));
    strides[static_cast<size_t>(dim)] = 0;
    k->reduce_sum(a.dtype(), kernel_input(a), a.shape(), detail::bytes(out), out.numel(), strides, scale);
    return out;
  }
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    detail::sum_middle(a.data<T>(), out.data<T>(), s.outer, s.size, s.inner, scale);
  });
  return out;
}

// The backward of a reduction over `dim`: the gradient broadcast back along `dim`, scaled.
Tensor unreduce(const Tensor& g, const Shape& input_shape, int64_t dim, bool keepdim, double scale) {
  Tensor gk = keepdim ? g : unsqueeze(g, dim);
  Tensor out = expand(gk, input_shape);
  return scale == 1.0 ? out : mul(out, scale);
}

}  // namespace

Tensor sum(const Tensor& a) {
  DeviceGuard device_guard("sum", {&a});
  detail::check_defined("sum", a);
  Tensor out = Tensor::empty({}, a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    k->reduce_sum(a.dtype(), kernel_input(a), a.shape(), detail::bytes(out), 1, std::vector<int64_t>(a.shape().size(), 0), 1.0);
  } else {
    dispatch_dtype(a.dtype(), [&]<typename T>() {
      const T* x = a.data<T>();
      T acc{0};
      for (int64_t i = 0; i < a.numel(); ++i) acc += x[i];
      out.data<T>()[0] = acc;
    });
  }
  record_op("SumBackward", {a}, {out}, [shape = a.shape()](const BackwardArgs& args) {
    return variable_list{expand(args.grads[0], shape)};
  });
  return out;
}

Tensor sum(const Tensor& a, int64_t dim, bool keepdim) {
  DeviceGuard device_guard("sum", {&a});
  detail::check_defined("sum", a);
  const int64_t d = detail::wrap_dim("sum", dim, a.shape());
  Tensor out = reduce_dim(a, d, keepdim, 1.0);
  record_op("SumBackward", {a}, {out}, [shape = a.shape(), d, keepdim](const BackwardArgs& args) {
    return variable_list{unreduce(args.grads[0], shape, d, keepdim, 1.0)};
  });
  return out;
}

Tensor mean(const Tensor& a) {
  DeviceGuard device_guard("mean", {&a});
  detail::check_defined("mean", a);
  if (a.numel() == 0) throw errors::invalid_argument("mean: cannot take the mean of an empty tensor");
  const double scale = 1.0 / static_cast<double>(a.numel());
  Tensor out = Tensor::empty({}, a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    k->reduce_sum(a.dtype(), kernel_input(a), a.shape(), detail::bytes(out), 1, std::vector<int64_t>(a.shape().size(), 0), scale);
  } else {
    dispatch_dtype(a.dtype(), [&]<typename T>() {
      const T* x = a.data<T>();
      T acc{0};
      for (int64_t i = 0; i < a.numel(); ++i) acc += x[i];
      out.data<T>()[0] = static_cast<T>(acc * scale);
    });
  }
  record_op("MeanBackward", {a}, {out}, [shape = a.shape(), scale](const BackwardArgs& args) {
    return variable_list{mul(expand(args.grads[0], shape), scale)};
  });
  return out;
}

Tensor mean(const Tensor& a, int64_t dim, bool keepdim) {
  DeviceGuard device_guard("mean", {&a});
  detail::check_defined("mean", a);
  const int64_t d = detail::wrap_dim("mean", dim, a.shape());
  if (a.shape()[d] == 0) throw errors::invalid_argument("mean: cannot reduce over an empty dimension");
  const double scale = 1.0 / static_cast<double>(a.shape()[d]);
  Tensor out = reduce_dim(a, d, keepdim, scale);
  record_op("MeanBackward", {a}, {out}, [shape = a.shape(), d, keepdim, scale](const BackwardArgs& args) {
    return variable_list{unreduce(args.grads[0], shape, d, keepdim, scale)};
  });
  return out;
}

namespace {

ValuesIndices extremum_dim(const char* op, const char* node, const Tensor& a, int64_t dim, bool keepdim,
                           bool is_max) {
  detail::check_defined(op, a);
  const int64_t d = detail::wrap_dim(op, dim, a.shape());
  if (a.shape()[d] == 0) {
    throw errors::invalid_argument(std::string(op) + ": expected reduction dim " + std::to_string(d) +
                                   " to have non-zero size (input shape " + shape_str(a.shape()) + ")");
  }
  const DimSplit s = split_at(a.shape(), d);
  const Shape out_shape = reduced_shape(a.shape(), d, keepdim);
  Tensor values = Tensor::empty(out_shape, a.dtype());
  // dagsim has no integer dtype: indices are float64 holding integral values (exact below 2^53).
  Tensor indices = Tensor::empty(out_shape, Dtype::float64);
  LineArgs args;
  args.x = kernel_input(a);
  args.y = detail::bytes(values);
  args.stat0 = static_cast<double*>(indices.raw_data());
  args.lines = s.outer * s.inner;
  args.size = s.size;
  args.inner = s.inner;
  run_lines(is_max ? LineOp::max : LineOp::min, a.dtype(), args);
  // The backward routes each gradient to the position its line picked: the indices say which. They
  // are saved as PyTorch saves them, so an in-place change to the returned indices fails the
  // backward by name instead of scattering to wherever they now point.
  record_op(node, {a}, {values}, [shape = a.shape(), s](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    const Tensor& picked = args.saved[0];
    Tensor grad = zeros(shape, g.dtype());
    LineArgs scatter;
    scatter.g = kernel_input(g);
    scatter.y = detail::bytes(grad);
    scatter.stat0 = static_cast<double*>(const_cast<void*>(picked.raw_data()));
    scatter.lines = s.outer * s.inner;
    scatter.size = s.size;
    scatter.inner = s.inner;
    run_lines(LineOp::extremum_backward, g.dtype(), scatter);
    return variable_list{grad};
  }, {}, {indices});
  return {values, indices};
}

// Reductions over everything run in chunks of kChunk elements, one line each, then over the
// chunks' results, until one is left: kChunk-fold parallel on a GPU (one thread per line), where a
// single line would be one thread for the whole tensor. The result is the single pass's, bit for
// bit: the first best of the first chunk holding the best is the first best overall (NaN
// included), and the tie counts are integers, summed exactly in any grouping.
constexpr int64_t kChunk = 1024;

// Runs `op` over `n` contiguous elements of args.x (x_size bytes each) as lines of kChunk and a
// shorter last one; line c's results go to element c of args.y (y_size bytes each) and of args.stat0.
// Returns the number of lines.
int64_t run_chunks(LineOp op, Dtype dtype, const LineArgs& args, int64_t n, size_t x_size, size_t y_size) {
  const int64_t full = n / kChunk, tail = n % kChunk;
  LineArgs lines = args;
  lines.inner = 1;
  if (full > 0) {
    lines.lines = full;
    lines.size = kChunk;
    run_lines(op, dtype, lines);
  }
  if (tail > 0) {
    lines.x = static_cast<const std::byte*>(args.x) + static_cast<size_t>(full * kChunk) * x_size;
    if (args.y != nullptr) lines.y = static_cast<std::byte*>(args.y) + static_cast<size_t>(full) * y_size;
    if (args.stat0 != nullptr) lines.stat0 = args.stat0 + full;
    lines.lines = 1;
    lines.size = tail;
    run_lines(op, dtype, lines);
  }
  return full + (tail > 0 ? 1 : 0);
}

// The number of lines run_chunks makes of `n` elements.
int64_t chunks_of(int64_t n) { return (n + kChunk - 1) / kChunk; }

// max() or min() of `n` elements at `x` into `out` (a 0-dim tensor of `dtype`).
void extremum_in_chunks(LineOp op, Dtype dtype, const void* x, int64_t n, Tensor& out) {
  Tensor values;  // this pass's input, when it is a previous pass's output
  while (true) {
    const bool last = n <= kChunk;
    Tensor next = last ? out : Tensor::empty({chunks_of(n)}, dtype);
    // The positions each line picked: written by the kernel, not needed here (max(dim) returns them).
    Tensor positions = Tensor::empty({chunks_of(n)}, Dtype::float64);
    LineArgs args;
    args.x = x;
    args.y = detail::bytes(next);
    args.stat0 = static_cast<double*>(positions.raw_data());
    n = run_chunks(op, dtype, args, n, dtype_size(dtype), dtype_size(dtype));
    if (last) return;
    values = std::move(next);
    x = values.raw_data();
  }
}

// How many of the `n` elements at `x` tie `best`, as a 1-element float64 tensor.
Tensor count_ties(Dtype dtype, const void* x, const void* best, int64_t n) {
  Tensor counts = Tensor::empty({chunks_of(n)}, Dtype::float64);
  LineArgs args;
  args.x = x;
  args.w = best;
  args.stat0 = static_cast<double*>(counts.raw_data());
  n = run_chunks(LineOp::tie_count, dtype, args, n, dtype_size(dtype), 0);
  while (n > 1) {
    Tensor totals = Tensor::empty({chunks_of(n)}, Dtype::float64);
    LineArgs sum;
    sum.x = counts.raw_data();
    sum.y = totals.raw_data();
    n = run_chunks(LineOp::sum, Dtype::float64, sum, n, sizeof(double), sizeof(double));
    counts = std::move(totals);
  }
  return counts;
}

Tensor extremum_all(const char* op, const char* node, const Tensor& a, bool is_max) {
  detail::check_defined(op, a);
  if (a.numel() == 0) {
    throw errors::invalid_argument(std::string(op) + ": expected a non-empty input when no dim is given, got shape " +
                                   shape_str(a.shape()) + "; specify the reduction dim");
  }
  Tensor out = Tensor::empty({}, a.dtype());
  extremum_in_chunks(is_max ? LineOp::max : LineOp::min, a.dtype(), kernel_input(a), a.numel(), out);
  // Every element equal to the result (every NaN when it is NaN) shares the gradient evenly, as
  // PyTorch's evenly_distribute_backward.
  record_op(node, {a}, {out}, [](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    const Tensor& x = args.saved[0];
    Tensor grad = zeros(x.shape(), g.dtype());
    const void* best = kernel_input(args.saved[1]);
    Tensor total = count_ties(x.dtype(), kernel_input(x), best, x.numel());
    LineArgs share;
    share.x = kernel_input(x);
    share.w = best;
    share.g = kernel_input(g);
    share.y = detail::bytes(grad);
    share.stat0 = static_cast<double*>(total.raw_data());
    share.lines = x.numel();
    run_lines(LineOp::tie_share, g.dtype(), share);
    return variable_list{grad};
  }, {a}, {out});
  return out;
}

}  // namespace

ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim) {
  DeviceGuard device_guard("max", {&a});
  return extremum_dim("max", "MaxBackward", a, dim, keepdim, true);
}
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim) {
  DeviceGuard device_guard("min", {&a});
  return extremum_dim("min", "MinBackward", a, dim, keepdim, false);
}
Tensor max(const Tensor& a) {
  DeviceGuard device_guard("max", {&a});
  return extremum_all("max", "MaxBackward", a, true);
}
Tensor min(const Tensor& a) {
  DeviceGuard device_guard("min", {&a});
  return extremum_all("min", "MinBackward", a, false);
}

namespace {

// softmax, log_softmax or one of their backwards (`op`) along `dim`, already wrapped: one line op
// over `x` (the input; for a backward, the forward's output) and, for a backward, the gradient.
Tensor softmax_lines(LineOp op, const Tensor& x, const Tensor* grad, int64_t dim) {
  const DimSplit s = split_at(x.shape(), dim);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  // Nothing to compute, and outer x inner may be 2^61 for an empty [2^61, 0] (found by the execute
  // fuzzer: a node spun for ever on one call).
  if (x.numel() == 0) return out;
  LineArgs args;
  args.x = kernel_input(x);
  if (grad != nullptr) args.g = kernel_input(*grad);
  args.y = detail::bytes(out);
  args.lines = s.outer * s.inner;
  args.size = s.size;
  args.inner = s.inner;
  run_lines(op, x.dtype(), args);
  return out;
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  DeviceGuard device_guard("softmax", {&a});
  detail::check_defined("softmax", a);
  const int64_t d = detail::wrap_dim("softmax", dim, a.shape());
  Tensor out = softmax_lines(LineOp::softmax, a, nullptr, d);
  // PyTorch's formula, dx = y * (g - sum(g * y, dim)), in one line op (line::SoftmaxBackwardWith).
  record_op("SoftmaxBackward", {a}, {out}, [d](const BackwardArgs& args) {
    return variable_list{softmax_lines(LineOp::softmax_backward, args.saved[0], &args.grads[0], d)};
  }, {}, {out});
  return out;
}

Tensor log_softmax(const Tensor& a, int64_t dim) {
  DeviceGuard device_guard("log_softmax", {&a});
  detail::check_defined("log_softmax", a);
  const int64_t d = detail::wrap_dim("log_softmax", dim, a.shape());
  Tensor out = softmax_lines(LineOp::log_softmax, a, nullptr, d);
  // dx = g - exp(y) * sum(g, dim), in one line op.
  record_op("LogSoftmaxBackward", {a}, {out}, [d](const BackwardArgs& args) {
    return variable_list{softmax_lines(LineOp::log_softmax_backward, args.saved[0], &args.grads[0], d)};
  }, {}, {out});
  return out;
}

}  // namespace dagsim
