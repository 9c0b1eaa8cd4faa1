#include "core/tensor/device_kernels.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/base/assert.h"
#include "core/tensor/device_guard.h"
#include "compute/kernels/vector_math.h"

namespace dagsim {

bool has_device_kernel(std::string_view op) {
  return std::find(std::begin(kOpsWithKernels), std::end(kOpsWithKernels), op) != std::end(kOpsWithKernels);
}

DeviceKernels* device_kernels() {
  const DeviceGuard* guard = DeviceGuard::active();
  return guard != nullptr && guard->on_device() ? guard->backend()->kernels() : nullptr;
}

namespace {
// `nbytes` host bytes as a tensor of `shape` on `guard`'s device: copied on its current stream and
// kept alive until the op closes.
Tensor stage_on_device(DeviceGuard& guard, Shape shape, Dtype dtype, const std::byte* bytes, size_t nbytes) {
  Tensor staged = Tensor::empty_on(std::move(shape), dtype, guard.device());
  if (nbytes > 0) staged.storage()->backend()->write_from_host(*staged.storage(), bytes, nbytes);
  guard.keep_alive(staged);
  return staged;
}
}  // namespace

const std::byte* kernel_input(const Tensor& t) {
  if (!t.device().is_cpu() || device_kernels() == nullptr) return static_cast<const std::byte*>(t.raw_data());
  DeviceGuard* guard = DeviceGuard::active();
  DAGSIM_ASSERT_MSG(guard != nullptr && guard->on_device() && t.dim() == 0,
                    "only a 0-dim CPU tensor joins an op on a device (DeviceGuard checks)");
  const Tensor staged = stage_on_device(*guard, {}, t.dtype(), static_cast<const std::byte*>(t.raw_data()), t.nbytes());
  return static_cast<const std::byte*>(staged.raw_data());
}

void run_lines(LineOp op, Dtype dtype, const LineArgs& args) {
  if (args.lines == 0) return;
  if (DeviceKernels* k = device_kernels()) return k->lines(op, dtype, args);
  run_lines_on_host(op, dtype, args);
}

namespace {
// Below this many elements a row is copied or added inline: a call per row costs more than it
// saves (gather and scatter_add have rows of one element).
constexpr int64_t kShortRow = 16;

// Take's rows: one copy per row instead of a division per element.
template <typename T>
void take_rows_on_host(const LineArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  for (int64_t r = 0; r < a.lines / a.inner; ++r) {
    const T* src = x + a.index[r] * a.inner;
    T* row = y + r * a.inner;
    if (a.inner < kShortRow) {
      for (int64_t i = 0; i < a.inner; ++i) row[i] = src[i];
    } else {
      std::memcpy(row, src, static_cast<size_t>(a.inner) * sizeof(T));
    }
  }
}

// index_add's rows: each destination row zeroed, then its sources added row by row in `starts`
// order. Element by element that is line::IndexAdd's 0 + x0 + x1 + ..., but it reads each source
// row once, contiguously, where the functor walks down every column.
template <typename T>
void index_add_rows_on_host(const LineArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  for (int64_t r = 0; r < a.lines / a.inner; ++r) {
    T* row = y + r * a.inner;
    std::fill_n(row, a.inner, T{0});
    for (int64_t k = a.starts[r]; k < a.starts[r + 1]; ++k) {
      const T* src = x + a.index[k] * a.inner;
      if (a.inner < kShortRow) {
        for (int64_t i = 0; i < a.inner; ++i) row[i] += src[i];
      } else {
        vec::binary(vec::Binary::add, row, src, row, a.inner);
      }
    }
  }
}

// softmax, log_softmax and their backwards through vec::softmax_row and vec::softmax_backward_row
// (SLEEF's exp, vectorised, the sums in lane order): a strided line (softmax over an outer dim) is
// gathered into rows and scattered back.
template <typename T>
void softmax_lines_on_host(LineOp op, const LineArgs& a) {
  if (a.size == 0) return;
  const bool backward = op == LineOp::softmax_backward || op == LineOp::log_softmax_backward;
  const bool log_form = op == LineOp::log_softmax || op == LineOp::log_softmax_backward;
  const auto row_op = [&](const T* x, const T* g, T* y) {
    if (backward) {
      vec::softmax_backward_row(log_form, x, g, y, a.size);
    } else {
      vec::softmax_row(log_form, x, y, a.size);
    }
  };
  const T* x = static_cast<const T*>(a.x);
  const T* g = static_cast<const T*>(a.g);
  T* y = static_cast<T*>(a.y);
  if (a.inner == 1) {
    for (int64_t l = 0; l < a.lines; ++l) {
      row_op(x + l * a.size, backward ? g + l * a.size : nullptr, y + l * a.size);
    }
    return;
  }
  const auto size = static_cast<size_t>(a.size);
  std::vector<T> rows(backward ? 3 * size : 2 * size);
  T* row_x = rows.data();
  T* row_y = row_x + size;
  T* row_g = backward ? row_y + size : nullptr;
  for (int64_t l = 0; l < a.lines; ++l) {
    const int64_t base = line::base_of(a, l);
    for (int64_t k = 0; k < a.size; ++k) {
      row_x[k] = x[base + k * a.inner];
      if (backward) row_g[k] = g[base + k * a.inner];
    }
    row_op(row_x, row_g, row_y);
    for (int64_t k = 0; k < a.size; ++k) y[base + k * a.inner] = row_y[k];
  }
}

// layer_norm and its backward through vec::layer_norm_row and vec::layer_norm_backward_row (rows
// are contiguous: inner is 1), and the weight's gradient row by row: each column still adds its
// rows in order, as line::LayerNormWeight, but a row's columns run side by side (vectorised) where
// the functor walks one column down every row. Asked for dx and dw at once (y2), the backward's
// pass that writes a row's dx adds its step to dw too.
template <typename T>
void layer_norm_lines_on_host(LineOp op, const LineArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  T* y = static_cast<T*>(a.y);
  if (op == LineOp::layer_norm_weight) {
    const int64_t cols = a.lines;
    const T* g = static_cast<const T*>(a.g);
    std::fill_n(y, cols, T{0});
    for (int64_t r = 0; r < a.size; ++r) vec::layer_norm_weight_row(g + r * cols, x + r * cols, a.stat0[r], a.stat1[r], y, cols);
    return;
  }
  T* dw = op == LineOp::layer_norm_backward ? static_cast<T*>(a.y2) : nullptr;
  if (dw != nullptr) std::fill_n(dw, a.size, T{0});
  if (a.size == 0) return;
  // The weight and bias as double for every row's layer_norm_row: float32's widened once here.
  std::vector<double> w64, b64;
  const auto as_double = [&](const void* p, std::vector<double>& wide) -> const double* {
    if constexpr (std::is_same_v<T, double>) {
      return static_cast<const double*>(p);
    } else {
      if (p == nullptr || op != LineOp::layer_norm) return nullptr;
      const T* t = static_cast<const T*>(p);
      wide.assign(t, t + a.size);
      return wide.data();
    }
  };
  const double* w_wide = as_double(a.w, w64);
  const double* b_wide = as_double(a.b, b64);
  for (int64_t l = 0; l < a.lines; ++l) {
    const int64_t at = l * a.size;
    if (op == LineOp::layer_norm) {
      vec::layer_norm_row(x + at, w_wide, b_wide, y + at, a.size, a.scalar, a.stat0 + l, a.stat1 + l);
    } else {
      vec::layer_norm_backward_row(static_cast<const T*>(a.g) + at, x + at, w, y + at, dw, a.size, a.stat0[l],
                                   a.stat1[l]);
    }
  }
}
}  // namespace

void run_lines_on_host(LineOp op, Dtype dtype, const LineArgs& args) {
  dispatch_dtype(dtype, [&]<typename T>() {
    if (op == LineOp::take) return take_rows_on_host<T>(args);
    if (op == LineOp::index_add) return index_add_rows_on_host<T>(args);
    if (is_softmax(op)) return softmax_lines_on_host<T>(op, args);
    if (op == LineOp::layer_norm || op == LineOp::layer_norm_backward || op == LineOp::layer_norm_weight) {
      return layer_norm_lines_on_host<T>(op, args);
    }
    if ((op == LineOp::max || op == LineOp::min) && args.inner == 1 && args.size > 0) {
      const T* x = static_cast<const T*>(args.x);
      for (int64_t l = 0; l < args.lines; ++l) {
        const int64_t best = vec::extremum_row(op == LineOp::max, x + l * args.size, args.size);
        static_cast<T*>(args.y)[l] = x[l * args.size + best];
        args.stat0[l] = static_cast<double>(best);
      }
      return;
    }
    run_lines_host<T>(op, args);
  });
}

void cast_on_host(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n) {
  dispatch_dtype(from, [&]<typename From>() {
    dispatch_dtype(to, [&]<typename To>() {
      const auto* px = reinterpret_cast<const From*>(x);
      auto* py = reinterpret_cast<To*>(out);
      for (int64_t i = 0; i < n; ++i) py[i] = static_cast<To>(px[i]);
    });
  });
}

Tensor index_array(std::span<const int64_t> values) {
  static_assert(sizeof(int64_t) == sizeof(double));
  const Shape shape{static_cast<int64_t>(values.size())};
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  DeviceGuard* guard = DeviceGuard::active();
  if (guard != nullptr && guard->on_device()) return stage_on_device(*guard, shape, Dtype::float64, bytes, values.size_bytes());
  Tensor array = Tensor::empty_on(shape, Dtype::float64, Device::cpu());
  if (!values.empty()) std::memcpy(array.raw_data(), bytes, values.size_bytes());
  return array;
}

const int64_t* index_data(const Tensor& array) { return static_cast<const int64_t*>(array.raw_data()); }

const char* line_op_name(LineOp op) {
  switch (op) {
    case LineOp::softmax: return "softmax";
    case LineOp::log_softmax: return "log_softmax";
    case LineOp::softmax_backward: return "softmax_backward";
    case LineOp::log_softmax_backward: return "log_softmax_backward";
    case LineOp::layer_norm: return "layer_norm";
    case LineOp::layer_norm_backward: return "layer_norm_backward";
    case LineOp::layer_norm_weight: return "layer_norm_weight";
    case LineOp::max: return "max";
    case LineOp::min: return "min";
    case LineOp::extremum_backward: return "extremum_backward";
    case LineOp::tie_count: return "tie_count";
    case LineOp::tie_share: return "tie_share";
    case LineOp::sum: return "sum";
    case LineOp::take: return "take";
    case LineOp::index_add: return "index_add";
    case LineOp::nll_loss: return "nll_loss";
    case LineOp::nll_loss_backward: return "nll_loss_backward";
    case LineOp::addcmul: return "addcmul";
  }
  return "?";
}

const char* pointwise_name(Pointwise op) {
  switch (op) {
    case Pointwise::add_scalar: return "add_scalar";
    case Pointwise::mul_scalar: return "mul_scalar";
    case Pointwise::neg: return "neg";
    case Pointwise::pow_scalar: return "pow_scalar";
    case Pointwise::relu: return "relu";
    case Pointwise::abs: return "abs";
    case Pointwise::sqrt: return "sqrt";
    case Pointwise::tanh: return "tanh";
    case Pointwise::exp: return "exp";
    case Pointwise::log: return "log";
    case Pointwise::sigmoid: return "sigmoid";
    case Pointwise::fill: return "fill";
    case Pointwise::sin: return "sin";
    case Pointwise::cos: return "cos";
    case Pointwise::add: return "add";
    case Pointwise::sub: return "sub";
    case Pointwise::mul: return "mul";
    case Pointwise::div: return "div";
    case Pointwise::axpy: return "axpy";
    case Pointwise::copy: return "copy";
    case Pointwise::relu_backward: return "relu_backward";
    case Pointwise::abs_backward: return "abs_backward";
    case Pointwise::sqrt_backward: return "sqrt_backward";
    case Pointwise::pow_backward: return "pow_backward";
    case Pointwise::tanh_backward: return "tanh_backward";
    case Pointwise::sigmoid_backward: return "sigmoid_backward";
    case Pointwise::sin_backward: return "sin_backward";
    case Pointwise::cos_backward: return "cos_backward";
  }
  return "?";
}

}  // namespace dagsim
