// Elementwise ops: broadcasting binary ops, unary math, and in-place updates.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/autograd/grad_mode.h"
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

namespace {

// out[i] = op(a[i], s): on a device through its kernel table, else inline.
Tensor map1(const Tensor& a, Pointwise op, double s = 0) {
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    k->unary(op, a.dtype(), kernel_input(a), detail::bytes(out), a.numel(), s);
    return out;
  }
  visit_unary(op, [&](auto f) {
    dispatch_dtype(a.dtype(), [&]<typename T>() {
      const T* x = a.data<T>();
      T* y = out.data<T>();
      const int64_t n = a.numel();
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(x[i], s));
    });
  }, [] { DAGSIM_UNREACHABLE(); });
  return out;
}

// out[i] = op(a[i], b[i], s) for equal shapes (backward formulas only).
Tensor map2(const Tensor& a, const Tensor& b, Pointwise op, double s = 0) {
  DAGSIM_ASSERT(a.shape() == b.shape());
  DAGSIM_ASSERT(a.dtype() == b.dtype());
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    const std::vector<int64_t> strides = detail::contiguous_strides(a.shape());
    k->binary(op, a.dtype(), kernel_input(a), strides, kernel_input(b), strides, detail::bytes(out), a.shape(), s);
    return out;
  }
  visit_binary(op, [&](auto f) {
    dispatch_dtype(a.dtype(), [&]<typename T>() {
      const T* x = a.data<T>();
      const T* z = b.data<T>();
      T* y = out.data<T>();
      const int64_t n = a.numel();
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(f(x[i], z[i], s));
    });
  }, [] { DAGSIM_UNREACHABLE(); });
  return out;
}

// The device formula of each vectorised kernel (vector_math.h computes the same on the cpu).
Pointwise as_pointwise(vec::Unary op) {
  switch (op) {
    case vec::Unary::tanh: return Pointwise::tanh;
    case vec::Unary::exp: return Pointwise::exp;
    case vec::Unary::log: return Pointwise::log;
    case vec::Unary::sigmoid: return Pointwise::sigmoid;
  }
  DAGSIM_UNREACHABLE();
}
Pointwise as_pointwise(vec::Binary op) {
  switch (op) {
    case vec::Binary::add: return Pointwise::add;
    case vec::Binary::sub: return Pointwise::sub;
    case vec::Binary::mul: return Pointwise::mul;
    case vec::Binary::div: return Pointwise::div;
    case vec::Binary::tanh_backward: return Pointwise::tanh_backward;
    case vec::Binary::sigmoid_backward: return Pointwise::sigmoid_backward;
  }
  DAGSIM_UNREACHABLE();
}

// out[i] = op(a[i]) through the vectorised kernels (vector_math.h).
Tensor vec_unary(vec::Unary op, const Tensor& a) {
  if (device_kernels() != nullptr) return map1(a, as_pointwise(op));
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_dtype(a.dtype(), [&]<typename T>() { vec::unary(op, a.data<T>(), out.data<T>(), a.numel()); });
  return out;
}

// out[i] = op(a[i], b[i]) through the vectorised kernels, for equal shapes.
Tensor vec_binary(vec::Binary op, const Tensor& a, const Tensor& b) {
  if (device_kernels() != nullptr) return map2(a, b, as_pointwise(op));
  DAGSIM_ASSERT(a.shape() == b.shape());
  DAGSIM_ASSERT(a.dtype() == b.dtype());
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    vec::binary(op, a.data<T>(), b.data<T>(), out.data<T>(), a.numel());
  });
  return out;
}

// Below this many elements a row goes through the element loop: a kernel call per row costs more.
constexpr int64_t kVectorRow = 16;

// out = kernel(a, b) a row (the output's last dim) at a time through the vector kernel, when each
// operand either runs along the row (stride 1) or repeats one value across it (stride 0, copied into
// a row first): a bias added to every row, a row scaled by its own sum. The kernel's add, sub, mul
// and div are exact IEEE operations, so the bits are the element loop's. Returns false, doing
// nothing, for shapes it does not take.
template <typename T>
bool broadcast_rows(vec::Binary kernel, const Shape& out_shape, const std::vector<int64_t>& stride_a, const T* x,
                    const std::vector<int64_t>& stride_b, const T* z, T* y) {
  if (out_shape.empty() || out_shape.back() < kVectorRow) return false;
  const int64_t inner = out_shape.back(), step_a = stride_a.back(), step_b = stride_b.back();
  if ((step_a != 0 && step_a != 1) || (step_b != 0 && step_b != 1) || step_a + step_b == 0) return false;
  const Shape rows(out_shape.begin(), out_shape.end() - 1);
  const std::vector<int64_t> rows_a(stride_a.begin(), stride_a.end() - 1), rows_b(stride_b.begin(), stride_b.end() - 1);
  std::vector<T> repeated(step_a == 0 || step_b == 0 ? static_cast<size_t>(inner) : 0);
  const T* repeated_from = nullptr;  // refilled only when the repeated value moves (not for a scalar)
  auto row_of = [&](const T* p, int64_t step) {
    if (step == 1) return p;
    if (p != repeated_from) {
      std::fill(repeated.begin(), repeated.end(), *p);
      repeated_from = p;
    }
    return static_cast<const T*>(repeated.data());
  };
  detail::for_each_broadcast(rows, rows_a, rows_b, [&](int64_t ia, int64_t ib, int64_t row) {
    vec::binary(kernel, row_of(x + ia, step_a), row_of(z + ib, step_b), y + row * inner, inner);
  });
  return true;
}

// out = f(a, b) with broadcasting; equal shapes go to the vector kernel `kernel`, which computes
// the same f. The op name goes into every error.
template <typename F>
Tensor broadcast_map(const char* op, vec::Binary kernel, const Tensor& a, const Tensor& b, F&& f) {
  detail::check_defined(op, a, "self");
  detail::check_defined(op, b, "other");
  detail::check_same_dtype(op, a, b);
  if (a.shape() == b.shape()) return vec_binary(kernel, a, b);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    k->binary(as_pointwise(kernel), a.dtype(), kernel_input(a), detail::broadcast_strides(a.shape(), out_shape),
              kernel_input(b), detail::broadcast_strides(b.shape(), out_shape), detail::bytes(out), out_shape, 0.0);
    return out;
  }
  const std::vector<int64_t> stride_a = detail::broadcast_strides(a.shape(), out_shape);
  const std::vector<int64_t> stride_b = detail::broadcast_strides(b.shape(), out_shape);
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    const T* x = a.data<T>();
    const T* z = b.data<T>();
    T* y = out.data<T>();
    if (broadcast_rows<T>(kernel, out_shape, stride_a, x, stride_b, z, y)) return;
    if (b.numel() == 1 && out_shape == a.shape()) {  // short rows times a scalar
      const T s = z[0];
      for (int64_t i = 0; i < out.numel(); ++i) y[i] = static_cast<T>(f(x[i], s));
      return;
    }
    detail::for_each_broadcast(out_shape, stride_a, stride_b, [&](int64_t ia, int64_t ib, int64_t io) {
      y[io] = static_cast<T>(f(x[ia], z[ib]));
    });
  });
  return out;
}

void check_unary(const char* op, const Tensor& a) { detail::check_defined(op, a); }

void check_inplace(const char* op, const Tensor& self) {
  detail::check_defined(op, self, "self");
  if (autograd::GradMode::is_enabled() && self.requires_grad()) {
    throw errors::invalid_argument(
        std::string(op) + ": a " + (self.is_leaf() ? "leaf " : "") +
        "tensor that requires grad is being used in an in-place operation; wrap the update in "
        "NoGradGuard (as optimizers do) or use the out-of-place op");
  }
}

// sum_to(t, shape) as one sum over the middle of [outer, size, inner] (detail::sum_middle), when
// the dims it keeps are a leading run and a trailing run of t's dims and the dims it sums lie
// between: a bias's gradient ([N, C] to [C]), a row's ([N, C] to [N, 1]), a channel's
// ([B, C, L] to [C, 1]). Dims of extent 1 belong to either side. Other patterns return nullopt
// and take the general loop; both add each output's elements in t's order, from +0.
struct MiddleSum {
  int64_t outer = 1, size = 1, inner = 1;
};
std::optional<MiddleSum> as_middle_sum(const Shape& from, const Shape& to) {
  const size_t lead = from.size() - to.size();
  MiddleSum m;
  int phase = 0;  // 0: the leading kept run, 1: the summed dims, 2: the trailing kept run
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == 1) continue;
    const bool kept = d >= lead && to[d - lead] == from[d];
    if (kept) {
      if (phase == 1) phase = 2;
      (phase == 0 ? m.outer : m.inner) *= from[d];
    } else {
      if (phase == 2) return std::nullopt;
      phase = 1;
      m.size *= from[d];
    }
  }
  return m;  // with nothing summed, size is 1: each output is +0 plus its one element, as the loop
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t nd = std::max(a.size(), b.size());
  Shape out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t sa = i < nd - a.size() ? 1 : a[i - (nd - a.size())];
    const int64_t sb = i < nd - b.size() ? 1 : b[i - (nd - b.size())];
    if (sa != sb && sa != 1 && sb != 1) {
      throw errors::shape_mismatch(std::string(op) + ": the size of tensor a (" + std::to_string(sa) +
                                   ") must match the size of tensor b (" + std::to_string(sb) +
                                   ") at non-singleton dimension " + std::to_string(i) +
                                   "; shapes " + shape_str(a) + " and " + shape_str(b));
    }
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  DeviceGuard device_guard("sum_to", {&t});
  if (t.shape() == shape) return t;
  if (shape.size() > t.shape().size()) {
    throw errors::shape_mismatch("sum_to: cannot reduce shape " + shape_str(t.shape()) + " to " +
                                 shape_str(shape));
  }
  // Validate: `shape` must broadcast to t's shape.
  const size_t lead = t.shape().size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && shape[d] != t.shape()[lead + d]) {
      throw errors::shape_mismatch("sum_to: cannot reduce shape " + shape_str(t.shape()) + " to " +
                                   shape_str(shape));
    }
  }
  if (DeviceKernels* k = device_kernels()) {
    Tensor out = Tensor::empty(shape, t.dtype());
    k->reduce_sum(t.dtype(), kernel_input(t), t.shape(), detail::bytes(out), out.numel(),
                  detail::broadcast_strides(shape, t.shape()), 1.0);
    return out;
  }
  if (const std::optional<MiddleSum> m = as_middle_sum(t.shape(), shape)) {
    Tensor out = Tensor::empty(shape, t.dtype());
    dispatch_dtype(t.dtype(), [&]<typename T>() {
      detail::sum_middle(t.data<T>(), out.data<T>(), m->outer, m->size, m->inner, 1.0);
    });
    return out;
  }
  Tensor out = zeros(shape, t.dtype());
  dispatch_dtype(t.dtype(), [&]<typename T>() {
    const T* x = t.data<T>();
    T* y = out.data<T>();
    const std::vector<int64_t> own = detail::contiguous_strides(t.shape());
    detail::for_each_broadcast(t.shape(), own, detail::broadcast_strides(shape, t.shape()),
                               [&](int64_t ix, int64_t iy, int64_t) { y[iy] += x[ix]; });
  });
  return out;
}

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  DeviceGuard device_guard("add", {&a_in, &b_in});
  const auto [a, b] = promote(a_in, b_in);
  Tensor out = broadcast_map("add", vec::Binary::add, a, b, [](auto x, auto y) { return x + y; });
  record_op("AddBackward", {a, b}, {out}, [sa = a.shape(), sb = b.shape()](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    return variable_list{args.needs(0) ? sum_to(g, sa) : Tensor(),
                         args.needs(1) ? sum_to(g, sb) : Tensor()};
  });
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  DeviceGuard device_guard("sub", {&a_in, &b_in});
  const auto [a, b] = promote(a_in, b_in);
  Tensor out = broadcast_map("sub", vec::Binary::sub, a, b, [](auto x, auto y) { return x - y; });
  record_op("SubBackward", {a, b}, {out}, [sa = a.shape(), sb = b.shape()](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    return variable_list{args.needs(0) ? sum_to(g, sa) : Tensor(),
                         args.needs(1) ? sum_to(neg(g), sb) : Tensor()};
  });
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  DeviceGuard device_guard("mul", {&a_in, &b_in});
  const auto [a, b] = promote(a_in, b_in);
  Tensor out = broadcast_map("mul", vec::Binary::mul, a, b, [](auto x, auto y) { return x * y; });
  record_op("MulBackward", {a, b}, {out}, [](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    const Tensor& x = args.saved[0];
    const Tensor& y = args.saved[1];
    return variable_list{args.needs(0) ? sum_to(mul(g, y), x.shape()) : Tensor(),
                         args.needs(1) ? sum_to(mul(g, x), y.shape()) : Tensor()};
  }, {a, b});
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  DeviceGuard device_guard("div", {&a_in, &b_in});
  const auto [a, b] = promote(a_in, b_in);
  Tensor out = broadcast_map("div", vec::Binary::div, a, b, [](auto x, auto y) { return x / y; });
  record_op("DivBackward", {a, b}, {out}, [](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    const Tensor& x = args.saved[0];
    const Tensor& y = args.saved[1];
    Tensor gx = args.needs(0) ? sum_to(div(g, y), x.shape()) : Tensor();
    Tensor gy;
    if (args.needs(1)) {
      // d(x/y)/dy = -x / y^2
      gy = sum_to(neg(div(mul(g, x), mul(y, y))), y.shape());
    }
    return variable_list{gx, gy};
  }, {a, b});
  return out;
}

Tensor add(const Tensor& a, double b) {
  DeviceGuard device_guard("add", {&a});
  check_unary("add", a);
  Tensor out = map1(a, Pointwise::add_scalar, b);
  record_op("AddBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{args.grads[0]};
  });
  return out;
}

Tensor mul(const Tensor& a, double b) {
  DeviceGuard device_guard("mul", {&a});
  check_unary("mul", a);
  Tensor out = map1(a, Pointwise::mul_scalar, b);
  record_op("MulBackward", {a}, {out}, [b](const BackwardArgs& args) {
    return variable_list{mul(args.grads[0], b)};
  });
  return out;
}

Tensor neg(const Tensor& a) {
  DeviceGuard device_guard("neg", {&a});
  check_unary("neg", a);
  Tensor out = map1(a, Pointwise::neg);
  record_op("NegBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{neg(args.grads[0])};
  });
  return out;
}

Tensor pow(const Tensor& a, double exponent) {
  DeviceGuard device_guard("pow", {&a});
  check_unary("pow", a);
  Tensor out = map1(a, Pointwise::pow_scalar, exponent);
  record_op("PowBackward", {a}, {out}, [exponent](const BackwardArgs& args) {
    if (exponent == 0.0) return variable_list{zeros_like(args.grads[0])};
    return variable_list{map2(args.grads[0], args.saved[0], Pointwise::pow_backward, exponent)};
  }, {a});
  return out;
}

Tensor exp(const Tensor& a) {
  DeviceGuard device_guard("exp", {&a});
  check_unary("exp", a);
  Tensor out = vec_unary(vec::Unary::exp, a);
  record_op("ExpBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{mul(args.grads[0], args.saved[0])};
  }, {}, {out});
  return out;
}

Tensor log(const Tensor& a) {
  DeviceGuard device_guard("log", {&a});
  check_unary("log", a);
  Tensor out = vec_unary(vec::Unary::log, a);
  record_op("LogBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{div(args.grads[0], args.saved[0])};
  }, {a});
  return out;
}

Tensor sin(const Tensor& a) {
  DeviceGuard device_guard("sin", {&a});
  check_unary("sin", a);
  Tensor out = map1(a, Pointwise::sin);  // libm: see vector_math.h
  record_op("SinBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{map2(args.grads[0], args.saved[0], Pointwise::sin_backward)};
  }, {a});
  return out;
}

Tensor cos(const Tensor& a) {
  DeviceGuard device_guard("cos", {&a});
  check_unary("cos", a);
  Tensor out = map1(a, Pointwise::cos);  // libm: see vector_math.h
  record_op("CosBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{map2(args.grads[0], args.saved[0], Pointwise::cos_backward)};
  }, {a});
  return out;
}

Tensor tanh(const Tensor& a) {
  DeviceGuard device_guard("tanh", {&a});
  check_unary("tanh", a);
  Tensor out = vec_unary(vec::Unary::tanh, a);
  record_op("TanhBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{vec_binary(vec::Binary::tanh_backward, args.grads[0], args.saved[0])};
  }, {}, {out});
  return out;
}

Tensor sigmoid(const Tensor& a) {
  DeviceGuard device_guard("sigmoid", {&a});
  check_unary("sigmoid", a);
  Tensor out = vec_unary(vec::Unary::sigmoid, a);
  record_op("SigmoidBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{vec_binary(vec::Binary::sigmoid_backward, args.grads[0], args.saved[0])};
  }, {}, {out});
  return out;
}

Tensor relu(const Tensor& a) {
  DeviceGuard device_guard("relu", {&a});
  check_unary("relu", a);
  Tensor out = map1(a, Pointwise::relu);
  record_op("ReluBackward", {a}, {out}, [](const BackwardArgs& args) {
    return variable_list{map2(args.grads[0], args.saved[0], Pointwise::relu_backward)};
  }, {}, {out});
  return out;
}

Tensor abs(const Tensor& a) {
  DeviceGuard device_guard("abs", {&a});
  check_unary("abs", a);
  Tensor out = map1(a, Pointwise::abs);
  record_op("AbsBackward", {a}, {out}, [](const BackwardArgs& args) {
    // g * sign(x), with sign(0) = 0 as torch's sgn: the subgradient PyTorch picks at the kink.
    return variable_list{map2(args.grads[0], args.saved[0], Pointwise::abs_backward)};
  }, {a});
  return out;
}

Tensor sqrt(const Tensor& a) {
  DeviceGuard device_guard("sqrt", {&a});
  check_unary("sqrt", a);
  Tensor out = map1(a, Pointwise::sqrt);
  record_op("SqrtBackward", {a}, {out}, [](const BackwardArgs& args) {
    // d sqrt(x) = 0.5 / sqrt(x), from the saved output (inf at 0, as in PyTorch).
    return variable_list{map2(args.grads[0], args.saved[0], Pointwise::sqrt_backward)};
  }, {}, {out});
  return out;
}

// In-place updates -----------------------------------------------------------------------------

namespace {
// self[i] = f(self[i], other broadcast to self's shape).
template <typename F>
Tensor& inplace_binary(const char* op, Tensor& self, const Tensor& other, Pointwise device_op, double scalar, F&& f) {
  check_inplace(op, self);
  detail::check_defined(op, other, "other");
  detail::check_same_dtype(op, self, other);
  if (broadcast_shapes(self.shape(), other.shape(), op) != self.shape()) {
    throw errors::shape_mismatch(std::string(op) + ": other of shape " + shape_str(other.shape()) +
                                 " does not broadcast to self's shape " + shape_str(self.shape()));
  }
  if (DeviceKernels* k = device_kernels()) {
    k->binary(device_op, self.dtype(), detail::bytes(self), detail::contiguous_strides(self.shape()), kernel_input(other),
              detail::broadcast_strides(other.shape(), self.shape()), detail::bytes(self), self.shape(), scalar);
    self.bump_version();
    return self;
  }
  dispatch_dtype(self.dtype(), [&]<typename T>() {
    T* x = self.data<T>();
    const T* z = other.data<T>();
    if (other.shape() == self.shape()) {
      if constexpr (requires { f.same_shape(x, z, self.numel()); }) {
        f.same_shape(x, z, self.numel());
      } else {
        for (int64_t i = 0; i < self.numel(); ++i) x[i] = static_cast<T>(f(x[i], z[i]));
      }
      return;
    }
    detail::for_each_broadcast(self.shape(), detail::contiguous_strides(self.shape()),
                               detail::broadcast_strides(other.shape(), self.shape()),
                               [&](int64_t ix, int64_t iz, int64_t) { x[ix] = static_cast<T>(f(x[ix], z[iz])); });
  });
  self.bump_version();
  return self;
}

// self += alpha * other: equal shapes (gradient accumulation, SGD) through the vector kernel.
struct AddScaled {
  double alpha;
  auto operator()(auto x, auto y) const { return x + alpha * y; }
  template <typename T>
  void same_shape(T* self, const T* other, int64_t n) const { vec::axpy(alpha, other, self, n); }
};

}  // namespace

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  DeviceGuard device_guard("add_", {&other}, &self);
  return inplace_binary("add_", self, other, Pointwise::axpy, alpha, AddScaled{alpha});
}
Tensor& sub_(Tensor& self, const Tensor& other) {
  DeviceGuard device_guard("sub_", {&other}, &self);
  return inplace_binary("sub_", self, other, Pointwise::sub, 0.0, [](auto x, auto y) { return x - y; });
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  DeviceGuard device_guard("mul_", {&other}, &self);
  return inplace_binary("mul_", self, other, Pointwise::mul, 0.0, [](auto x, auto y) { return x * y; });
}
Tensor& div_(Tensor& self, const Tensor& other) {
  DeviceGuard device_guard("div_", {&other}, &self);
  return inplace_binary("div_", self, other, Pointwise::div, 0.0, [](auto x, auto y) { return x / y; });
}
Tensor& copy_(Tensor& self, const Tensor& src) {
  DeviceGuard device_guard("copy_", {&src}, &self);
  return inplace_binary("copy_", self, src, Pointwise::copy, 0.0, [](auto, auto y) { return y; });
}

Tensor& mul_(Tensor& self, double value) {
  DeviceGuard device_guard("mul_", {}, &self);
  check_inplace("mul_", self);
  if (DeviceKernels* k = device_kernels()) {
    k->unary(Pointwise::mul_scalar, self.dtype(), detail::bytes(self), detail::bytes(self), self.numel(), value);
  } else {
    dispatch_dtype(self.dtype(), [&]<typename T>() {
      T* x = self.data<T>();
      for (int64_t i = 0; i < self.numel(); ++i) x[i] = static_cast<T>(x[i] * value);
    });
  }
  self.bump_version();
  return self;
}

namespace {
Tensor& fill_named(const char* op, Tensor& self, double value) {
  check_inplace(op, self);
  if (DeviceKernels* k = device_kernels()) {
    k->unary(Pointwise::fill, self.dtype(), nullptr, detail::bytes(self), self.numel(), value);
  } else {
    dispatch_dtype(self.dtype(), [&]<typename T>() { std::fill_n(self.data<T>(), self.numel(), static_cast<T>(value)); });
  }
  self.bump_version();
  return self;
}
}  // namespace

Tensor& fill_(Tensor& self, double value) {
  DeviceGuard device_guard("fill_", {}, &self);
  return fill_named("fill_", self, value);
}
Tensor& zero_(Tensor& self) {
  DeviceGuard device_guard("zero_", {}, &self);
  return fill_named("zero_", self, 0.0);
}

Tensor& addcmul_(Tensor& self, const Tensor& a, const Tensor& b, double value) {
  DeviceGuard device_guard("addcmul_", {&a, &b}, &self);
  check_inplace("addcmul_", self);
  for (const Tensor* t : {&a, &b}) {
    detail::check_defined("addcmul_", *t, "tensor");
    detail::check_same_dtype("addcmul_", self, *t);
    if (t->shape() != self.shape()) {
      throw errors::shape_mismatch("addcmul_: expected shape " + shape_str(self.shape()) + ", got " +
                                   shape_str(t->shape()));
    }
  }
  LineArgs args;
  args.x = kernel_input(a);
  args.w = kernel_input(b);
  args.y = detail::bytes(self);
  args.lines = self.numel();
  args.scalar = value;
  run_lines(LineOp::addcmul, self.dtype(), args);
  self.bump_version();
  return self;
}

Tensor& sqrt_(Tensor& self) {
  DeviceGuard device_guard("sqrt_", {}, &self);
  check_inplace("sqrt_", self);
  if (DeviceKernels* k = device_kernels()) {
    k->unary(Pointwise::sqrt, self.dtype(), detail::bytes(self), detail::bytes(self), self.numel(), 0.0);
  } else {
    dispatch_dtype(self.dtype(), [&]<typename T>() {
      T* x = self.data<T>();
      for (int64_t i = 0; i < self.numel(); ++i) x[i] = std::sqrt(x[i]);
    });
  }
  self.bump_version();
  return self;
}

}  // namespace dagsim
