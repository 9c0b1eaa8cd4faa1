// Line kernels: the ops whose every output element depends on a whole line of its input (softmax
// over a dim, layer_norm over a row, max over a dim, a loss over a batch) or on a list of
// positions (gather, index_select, embedding and their scatter-add backwards), written once for
// the host and for a GPU, as pointwise.h's formulas are.
//
// A line is one (outer, inner) pair of a tensor split at a dim: its `size` elements lie `inner`
// apart from base = outer * size * inner + inner_index. The op runs one functor call per line (a
// call that asks layer_norm_backward for dw too is two ops, run_separately below), in any order and in parallel on a GPU (one thread, or for the lane-order ops one warp, per line);
// each call reads and writes only its own line's outputs, and adds in the same order as the CPU
// does (softmax's and layer_norm's sums in lane order, lane_order.h), so the bits are the CPU's on
// any device whose libm agrees (std::exp, std::log: within a GPU's documented ULP bounds otherwise).
//
// Indices travel as int64 arrays the kernel reads (LineArgs::index), already checked on the host
// by the op: a kernel never sees an index out of range. Index arrays for a scatter-add come grouped
// by destination (index_add: `starts`), so every destination adds its sources in the CPU's order
// without atomics.
//
// Plain C++17 that nvcc also compiles (compute/device/cuda/cuda_op_kernels.cu).
#pragma once

#include <cmath>
#include <cstdint>

#include "compute/kernels/lane_order.h"
#include "compute/kernels/pointwise.h"

namespace dagsim {

enum class LineOp : uint8_t {
  softmax,              // y = softmax(x) along the line
  log_softmax,          // y = log_softmax(x) along the line
  softmax_backward,     // y = dx from g and the forward's output x (a line as softmax's)
  log_softmax_backward, // y = dx from g and the forward's output x
  layer_norm,           // y = (x - mean) * rstd * w + b; mean and rstd (double) per line. inner is 1
  layer_norm_backward,  // y = dx from g, x, w, mean, rstd. inner is 1. With y2, also layer_norm_weight's y
  layer_norm_weight,    // y = dw: a line is one column (size rows, inner cols) of g * x_hat
  max,                  // y = the line's max, stat0 = its position in the line (first wins; NaN wins)
  min,                  // y = the line's min, as max
  extremum_backward,    // y[base + stat0[line] * inner] = g[line] (y zeroed first)
  tie_count,            // stat0[line] = how many of the line's x equal w[0] (the max or min), NaN as NaN
  tie_share,            // y[line] = g[0] / stat0[0] where x[line] ties w[0] (y zeroed first)
  sum,                  // y[line] = the line's sum, in order (the tie counts' total: exact in any order)
  take,                 // y[r * inner + i] = x[index[r] * inner + i]: rows of `inner` elements
  index_add,            // y[r * inner + i] = 0 + sum of x[index[k] * inner + i], k in [starts[r], starts[r+1])
  nll_loss,             // one line: y[0] = -(sum of x[index[k]], k < size) / size
  nll_loss_backward,    // y[index[line]] = -g[0] / size (y zeroed first)
  addcmul,              // y[line] = y[line] + scalar * x[line] * w[line], in double (addcmul_)
};
const char* line_op_name(LineOp op);

// The ops whose sums run in lane order (lane_order.h) and whose functors take a walk (OneThread
// below, or a warp's): softmax, log_softmax, layer_norm and their backwards.
constexpr bool is_softmax(LineOp op) {
  return op == LineOp::softmax || op == LineOp::log_softmax || op == LineOp::softmax_backward ||
         op == LineOp::log_softmax_backward;
}
constexpr bool in_lane_order(LineOp op) {
  return is_softmax(op) || op == LineOp::layer_norm || op == LineOp::layer_norm_backward;
}
// The ops whose functors take a walk: the lane-order ones, and max and min along a dim (exact in
// any order: a walk's arg_best finds the first best, as one thread's loop does).
constexpr bool takes_a_walk(LineOp op) { return in_lane_order(op) || op == LineOp::max || op == LineOp::min; }

// What a line op reads and writes; each op uses the fields its comment above names.
struct LineArgs {
  const void* x = nullptr;
  const void* g = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  void* y = nullptr;
  // layer_norm_backward only: dw as well, when set (run_separately). A call of no lines runs
  // nothing, so it does not zero dw either: the caller asks for dw on its own then.
  void* y2 = nullptr;
  double* stat0 = nullptr;
  double* stat1 = nullptr;
  const int64_t* index = nullptr;
  const int64_t* starts = nullptr;
  int64_t lines = 0;
  int64_t size = 0;
  int64_t inner = 1;
  double scalar = 0;
};

namespace line {

DAGSIM_HOST_DEVICE inline int64_t base_of(const LineArgs& a, int64_t line) {
  return (line / a.inner) * a.size * a.inner + line % a.inner;
}
template <typename T>
DAGSIM_HOST_DEVICE const T* in(const void* p) { return static_cast<const T*>(p); }
template <typename T>
DAGSIM_HOST_DEVICE T* out(void* p) { return static_cast<T*>(p); }

// Whether `v` replaces `best` as the running max (or min): strictly better, so the first of equal
// values wins, as PyTorch's CPU kernel; and NaN beats any number, as torch.max propagates NaN.
template <typename T>
DAGSIM_HOST_DEVICE bool beats(T v, T best, bool is_max) {
  if (best != best) return false;
  if (v != v) return true;
  return is_max ? v > best : v < best;
}

// How a line op that takes a walk (takes_a_walk) walks its line: one thread over every element
// (OneThread), or a warp whose 32 lanes share it (cuda_op_kernels.cu). Either way, `max` is the
// line's max of f(k) (exact in any order; NaN never picked), `sum` the lane-order sum of f(k)
// (lane_order.h: the same bits either way), `arg_best` the first k whose f(k) beats every other
// (the first NaN if any: any order finds it), and `each` calls f(k) for every k once.
struct OneThread {
  template <typename T, typename F> DAGSIM_HOST_DEVICE T max(int64_t n, const F& f) const {
    T best = -static_cast<T>(INFINITY);
    for (int64_t k = 0; k < n; ++k) {
      const T v = f(k);
      best = best < v ? v : best;
    }
    return best;
  }
  template <typename T, typename F> DAGSIM_HOST_DEVICE T sum(int64_t n, const F& f) const {
    return lane_order::sum<T>(n, f);
  }
  template <typename T, typename F> DAGSIM_HOST_DEVICE int64_t arg_best(int64_t n, const F& f, bool is_max) const {
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k) {
      if (beats<T>(f(k), f(best), is_max)) best = k;
    }
    return best;
  }
  template <typename F> DAGSIM_HOST_DEVICE void each(int64_t n, const F& f) const {
    for (int64_t k = 0; k < n; ++k) f(k);
  }
};

// `Exp` is the exponential: the device's std::exp in the kernel tables; the host's vector path
// (vec::softmax_row and vec::softmax_backward_row) uses SLEEF's, and tests hand these functors
// SLEEF's scalar one to compare the two to the bit.
struct LibmExp {
  template <typename T> DAGSIM_HOST_DEVICE T operator()(T x) const { return std::exp(x); }
};

// softmax or log_softmax, max-shifted. The max may be met in any order: only a tie of +0 and -0
// can differ, and it reaches no output, since two zeros make the total at least 2, so x - max is
// +-0 only where exp gives 1 and log_total is not 0.
template <typename Exp>
struct SoftmaxWith {
  bool log_form;
  Exp exp{};
  template <typename T, typename Walk = OneThread>
  DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line, const Walk& walk = {}) const {
    const int64_t base = base_of(a, line), s = a.inner;
    const T* x = in<T>(a.x) + base;
    T* y = out<T>(a.y) + base;
    const T max = walk.template max<T>(a.size, [&](int64_t k) { return x[k * s]; });
    const T total = walk.template sum<T>(a.size, [&](int64_t k) { return exp(x[k * s] - max); });
    const T log_total = std::log(total);
    walk.each(a.size, [&](int64_t k) {
      const T shifted = x[k * s] - max;
      y[k * s] = log_form ? shifted - log_total : exp(shifted) / total;
    });
  }
};
using Softmax = SoftmaxWith<LibmExp>;

// Their backwards, PyTorch's formulas, from the forward's output (x) and its gradient (g) into y:
// softmax dx = out * (g - sum(g * out)); log_softmax dx = g - exp(out) * sum(g).
template <typename Exp>
struct SoftmaxBackwardWith {
  bool log_form;
  Exp exp{};
  template <typename T, typename Walk = OneThread>
  DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line, const Walk& walk = {}) const {
    const int64_t base = base_of(a, line), s = a.inner;
    const T* o = in<T>(a.x) + base;
    const T* g = in<T>(a.g) + base;
    T* dx = out<T>(a.y) + base;
    const T total = walk.template sum<T>(a.size, [&](int64_t k) { return log_form ? g[k * s] : g[k * s] * o[k * s]; });
    walk.each(a.size, [&](int64_t k) {
      dx[k * s] = log_form ? g[k * s] - exp(o[k * s]) * total : o[k * s] * (g[k * s] - total);
    });
  }
};
using SoftmaxBackward = SoftmaxBackwardWith<LibmExp>;

// layer_norm over a row: the mean, then the biased variance about it (two passes, as PyTorch's), in
// double for both dtypes, each sum in lane order, so a warp (cuda) and the host's vectors
// (vec::layer_norm_row) give one thread's bits. The statistics are written once per line.
struct LayerNorm {
  template <typename T, typename Walk = OneThread>
  DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line, const Walk& walk = {}) const {
    const int64_t cols = a.size;
    const T* row = in<T>(a.x) + line * cols;
    const T* w = in<T>(a.w);
    const T* b = in<T>(a.b);
    T* y = out<T>(a.y) + line * cols;
    const double n = static_cast<double>(cols);
    const double m = walk.template sum<double>(cols, [&](int64_t j) { return static_cast<double>(row[j]); }) / n;
    const double v = walk.template sum<double>(cols, [&](int64_t j) {
      const double d = row[j] - m;
      return d * d;
    }) / n;
    const double s = 1.0 / std::sqrt(v + a.scalar);
    walk.each(1, [&](int64_t) {
      a.stat0[line] = m;
      a.stat1[line] = s;
    });
    walk.each(cols, [&](int64_t j) {
      double h = (row[j] - m) * s;
      if (w) h *= w[j];
      if (b) h += b[j];
      y[j] = static_cast<T>(h);
    });
  }
};

// With h = g * weight (the gradient reaching x_hat, the product in T):
// dx = rstd * (h - mean(h) - x_hat * mean(h * x_hat)), means over the row, their sums in lane order.
struct LayerNormBackward {
  template <typename T, typename Walk = OneThread>
  DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line, const Walk& walk = {}) const {
    const int64_t cols = a.size;
    const T* gr = in<T>(a.g) + line * cols;
    const T* xr = in<T>(a.x) + line * cols;
    const T* w = in<T>(a.w);
    T* gx = out<T>(a.y) + line * cols;
    const double m = a.stat0[line], s = a.stat1[line], n = static_cast<double>(cols);
    const auto h = [&](int64_t j) -> double { return w ? gr[j] * w[j] : gr[j]; };
    const auto xhat = [&](int64_t j) { return (xr[j] - m) * s; };
    const double mean_h = walk.template sum<double>(cols, h) / n;
    const double mean_hx = walk.template sum<double>(cols, [&](int64_t j) { return h(j) * xhat(j); }) / n;
    walk.each(cols, [&](int64_t j) { gx[j] = static_cast<T>(s * (h(j) - mean_h - xhat(j) * mean_hx)); });
  }
};

// dw[j] = sum over rows of g * x_hat, added row by row in T as the gradient accumulates.
struct LayerNormWeight {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    const int64_t cols = a.inner;
    const T* g = in<T>(a.g);
    const T* x = in<T>(a.x);
    T acc{0};
    for (int64_t r = 0; r < a.size; ++r) {
      const double xhat = (x[r * cols + line] - a.stat0[r]) * a.stat1[r];
      acc = static_cast<T>(acc + g[r * cols + line] * xhat);
    }
    out<T>(a.y)[line] = acc;
  }
};

// max or min along a dim: the first best element (beats) and its position. The host's contiguous
// lines run vec::extremum_row, which finds the same element.
struct Extremum {
  bool is_max;
  template <typename T, typename Walk = OneThread>
  DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line, const Walk& walk = {}) const {
    const int64_t base = base_of(a, line), s = a.inner;
    const T* x = in<T>(a.x) + base;
    const int64_t best = walk.template arg_best<T>(a.size, [&](int64_t k) { return x[k * s]; }, is_max);
    walk.each(1, [&](int64_t) {
      out<T>(a.y)[line] = x[best * s];
      a.stat0[line] = static_cast<double>(best);
    });
  }
};

struct ExtremumBackward {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    const int64_t k = static_cast<int64_t>(a.stat0[line]);
    out<T>(a.y)[base_of(a, line) + k * a.inner] = in<T>(a.g)[line];
  }
};

// The gradient of max() or min() over everything, split evenly among the elements equal to the
// result (every NaN when it is NaN), as PyTorch's evenly_distribute_backward: the ties counted by
// chunk (TieCount), the counts summed (Sum), then one thread per element (TieShare).
template <typename T>
DAGSIM_HOST_DEVICE bool ties(T v, T best) { return v == best || (v != v && best != best); }

struct TieCount {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    const T* x = in<T>(a.x) + base_of(a, line);
    const T best = in<T>(a.w)[0];
    int64_t count = 0;
    for (int64_t k = 0; k < a.size; ++k) count += ties(x[k * a.inner], best) ? 1 : 0;
    a.stat0[line] = static_cast<double>(count);
  }
};

struct TieShare {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    if (ties(in<T>(a.x)[line], in<T>(a.w)[0])) {
      out<T>(a.y)[line] = in<T>(a.g)[0] / static_cast<T>(static_cast<int64_t>(a.stat0[0]));
    }
  }
};

struct Sum {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    const T* x = in<T>(a.x) + base_of(a, line);
    T acc{0};
    for (int64_t k = 0; k < a.size; ++k) acc += x[k * a.inner];
    out<T>(a.y)[line] = acc;
  }
};

struct Take {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    out<T>(a.y)[line] = in<T>(a.x)[a.index[line / a.inner] * a.inner + line % a.inner];
  }
};

struct IndexAdd {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    const int64_t r = line / a.inner, i = line % a.inner;
    const T* x = in<T>(a.x);
    T acc{0};
    for (int64_t k = a.starts[r]; k < a.starts[r + 1]; ++k) acc += x[a.index[k] * a.inner + i];
    out<T>(a.y)[line] = acc;
  }
};

struct NllLoss {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t) const {
    const T* x = in<T>(a.x);
    T acc{0};
    for (int64_t k = 0; k < a.size; ++k) acc -= x[a.index[k]];
    out<T>(a.y)[0] = static_cast<T>(acc / static_cast<T>(a.size));
  }
};

struct NllLossBackward {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    out<T>(a.y)[a.index[line]] = -in<T>(a.g)[0] / static_cast<T>(a.size);
  }
};

struct Addcmul {
  template <typename T> DAGSIM_HOST_DEVICE void run(const LineArgs& a, int64_t line) const {
    T* y = out<T>(a.y);
    y[line] = static_cast<T>(y[line] + a.scalar * in<T>(a.x)[line] * in<T>(a.w)[line]);
  }
};

}  // namespace line

// Calls visitor(functor) with the functor of `op`. (Host code: the visitor loops or launches.)
template <typename Visitor>
void visit_line(LineOp op, Visitor&& visitor) {
  switch (op) {
    case LineOp::softmax: return visitor(line::Softmax{false, {}});
    case LineOp::log_softmax: return visitor(line::Softmax{true, {}});
    case LineOp::softmax_backward: return visitor(line::SoftmaxBackward{false, {}});
    case LineOp::log_softmax_backward: return visitor(line::SoftmaxBackward{true, {}});
    case LineOp::layer_norm: return visitor(line::LayerNorm{});
    case LineOp::layer_norm_backward: return visitor(line::LayerNormBackward{});
    case LineOp::layer_norm_weight: return visitor(line::LayerNormWeight{});
    case LineOp::max: return visitor(line::Extremum{true});
    case LineOp::min: return visitor(line::Extremum{false});
    case LineOp::extremum_backward: return visitor(line::ExtremumBackward{});
    case LineOp::tie_count: return visitor(line::TieCount{});
    case LineOp::tie_share: return visitor(line::TieShare{});
    case LineOp::sum: return visitor(line::Sum{});
    case LineOp::take: return visitor(line::Take{});
    case LineOp::index_add: return visitor(line::IndexAdd{});
    case LineOp::nll_loss: return visitor(line::NllLoss{});
    case LineOp::nll_loss_backward: return visitor(line::NllLossBackward{});
    case LineOp::addcmul: return visitor(line::Addcmul{});
  }
}

// layer_norm_backward with y2 is two ops in one call, so that the host runs both in one pass over
// the rows: calls run(op, args) for each on its own, layer_norm_weight into y2 (a line per column,
// down the rows) and then layer_norm_backward (y2 cleared). Any other call passes through. For the
// kernels that run one op at a time (the functors, a GPU's). dw goes first because dx may be
// written over g, which dw reads.
template <typename Run>
void run_separately(LineOp op, const LineArgs& args, Run&& run) {
  if (op != LineOp::layer_norm_backward || args.y2 == nullptr) return run(op, args);
  LineArgs dw = args;
  dw.y = args.y2;
  dw.y2 = nullptr;
  dw.lines = args.size;
  dw.size = args.lines;
  dw.inner = args.size;
  run(LineOp::layer_norm_weight, dw);
  LineArgs dx = args;
  dx.y2 = nullptr;
  run(LineOp::layer_norm_backward, dx);
}

// Every line of `args`, in order, on the host, one functor call per line. (run_lines_on_host, in
// device_kernels.h, is what the CPU ops and the host reference table call.)
template <typename T>
void run_lines_host(LineOp op, const LineArgs& args) {
  run_separately(op, args, [](LineOp one, const LineArgs& a) {
    visit_line(one, [&](auto f) {
      for (int64_t l = 0; l < a.lines; ++l) f.template run<T>(a, l);
    });
  });
}

}  // namespace dagsim
