// Pointwise: the elementwise formulas dagsim's ops compute, named, and written once for the host
// and for a GPU.
//
// An op on a device whose memory is not the host's (the cuda backend) cannot run its C++ lambda
// there; it names its formula instead (Pointwise::relu), and the device's kernel table runs the
// functor of that name (visit_pointwise). The CPU path of the same ops calls the same functors,
// so a formula cannot differ between devices: it is one line, here. Functions the CPU takes from
// SLEEF (tanh, exp, log, sigmoid: vector_math.h) are the exception: a GPU computes them with its
// own libm, within its documented ULP bounds, and a host reference calls vector_math.h.
//
// This header is plain C++17 that nvcc also compiles (compute/device/cuda): no std:: beyond <cmath>,
// every functor callable on the host and on the device.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DAGSIM_HOST_DEVICE __host__ __device__
#else
#define DAGSIM_HOST_DEVICE
#endif

namespace dagsim {

// Unary formulas take (x, scalar); binary ones (a, b, scalar). The scalar is the op's number
// argument (add(t, 2.0), pow(t, 3.0)), unused by the others.
enum class Pointwise : uint8_t {
  // unary
  add_scalar,   // x + s
  mul_scalar,   // x * s
  neg,          // -x
  pow_scalar,   // x ^ s
  relu,         // max(x, 0), NaN kept
  abs,          // |x|
  sqrt,         // sqrt(x)
  tanh,
  exp,
  log,
  sigmoid,
  fill,         // s (zeros, ones, full, fill_)
  sin,
  cos,
  // binary
  add,               // a + b
  sub,               // a - b
  mul,               // a * b
  div,               // a / b
  axpy,              // a + s * b (add_ with alpha)
  copy,              // b (copy_)
  relu_backward,     // (g, y): 0 where y <= 0, else g
  abs_backward,      // (g, x): g * sign(x), sign(0) = 0
  sqrt_backward,     // (g, y): g / (2 y)
  pow_backward,      // (g, x): g * s * x^(s - 1)
  tanh_backward,     // (g, y): g * (1 - y^2)
  sigmoid_backward,  // (g, y): g * y * (1 - y)
  sin_backward,      // (g, x): g * cos(x)
  cos_backward,      // (g, x): -g * sin(x)
};
inline constexpr bool is_binary(Pointwise op) { return op >= Pointwise::add; }
const char* pointwise_name(Pointwise op);

namespace pointwise {

// T is float or double; the scalar is applied in T, as the CPU ops do (static_cast<T>(s)), except
// axpy's, which the CPU takes in double (vec::axpy).
struct AddScalar { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double s) const { return static_cast<T>(x + s); } };
struct MulScalar { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double s) const { return static_cast<T>(x * s); } };
struct Neg { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return -x; } };
struct PowScalar { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double s) const { return std::pow(x, static_cast<T>(s)); } };
// NaN propagates, as torch.relu's clamp_min does.
struct Relu { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return x > 0 || x != x ? x : T{0}; } };
struct Abs { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::abs(x); } };
struct Sqrt { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::sqrt(x); } };
struct Tanh { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::tanh(x); } };
struct Exp { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::exp(x); } };
struct Log { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::log(x); } };
struct Sigmoid { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return T{1} / (T{1} + std::exp(-x)); } };
struct Fill { template <typename T> DAGSIM_HOST_DEVICE T operator()(T, double s) const { return static_cast<T>(s); } };
struct Sin { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::sin(x); } };
struct Cos { template <typename T> DAGSIM_HOST_DEVICE T operator()(T x, double) const { return std::cos(x); } };

struct Add { template <typename T> DAGSIM_HOST_DEVICE T operator()(T a, T b, double) const { return a + b; } };
struct Sub { template <typename T> DAGSIM_HOST_DEVICE T operator()(T a, T b, double) const { return a - b; } };
struct Mul { template <typename T> DAGSIM_HOST_DEVICE T operator()(T a, T b, double) const { return a * b; } };
struct Div { template <typename T> DAGSIM_HOST_DEVICE T operator()(T a, T b, double) const { return a / b; } };
struct Axpy { template <typename T> DAGSIM_HOST_DEVICE T operator()(T a, T b, double s) const { return static_cast<T>(a + s * b); } };
struct Copy { template <typename T> DAGSIM_HOST_DEVICE T operator()(T, T b, double) const { return b; } };
// PyTorch's threshold_backward: 0 where y <= 0, else g (so a NaN output passes its gradient).
struct ReluBackward { template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T y, double) const { return y <= 0 ? T{0} : g; } };
struct AbsBackward {
  template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T x, double) const { return x > 0 ? g : x < 0 ? -g : T{0}; }
};
struct SqrtBackward { template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T y, double) const { return g / (2 * y); } };
struct PowBackward {
  template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T x, double s) const {
    return g * static_cast<T>(s) * std::pow(x, static_cast<T>(s - 1.0));
  }
};
struct TanhBackward { template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T y, double) const { return g * (T{1} - y * y); } };
struct SigmoidBackward {
  template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T y, double) const { return g * y * (T{1} - y); }
};
struct SinBackward { template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T x, double) const { return g * std::cos(x); } };
struct CosBackward { template <typename T> DAGSIM_HOST_DEVICE T operator()(T g, T x, double) const { return -g * std::sin(x); } };

}  // namespace pointwise

// Calls visitor(functor) with the functor of the unary `op` (visit_unary) or the binary one
// (visit_binary); `fallback()` for an op of the other arity, which callers rule out first.
// (Host code: the visitor launches or loops; the functors are what runs on a device.)
template <typename Visitor, typename Fallback>
void visit_unary(Pointwise op, Visitor&& visitor, Fallback&& fallback) {
  switch (op) {
    case Pointwise::add_scalar: return visitor(pointwise::AddScalar{});
    case Pointwise::mul_scalar: return visitor(pointwise::MulScalar{});
    case Pointwise::neg: return visitor(pointwise::Neg{});
    case Pointwise::pow_scalar: return visitor(pointwise::PowScalar{});
    case Pointwise::relu: return visitor(pointwise::Relu{});
    case Pointwise::abs: return visitor(pointwise::Abs{});
    case Pointwise::sqrt: return visitor(pointwise::Sqrt{});
    case Pointwise::tanh: return visitor(pointwise::Tanh{});
    case Pointwise::exp: return visitor(pointwise::Exp{});
    case Pointwise::log: return visitor(pointwise::Log{});
    case Pointwise::sigmoid: return visitor(pointwise::Sigmoid{});
    case Pointwise::fill: return visitor(pointwise::Fill{});
    case Pointwise::sin: return visitor(pointwise::Sin{});
    case Pointwise::cos: return visitor(pointwise::Cos{});
    default: return fallback();
  }
}

template <typename Visitor, typename Fallback>
void visit_binary(Pointwise op, Visitor&& visitor, Fallback&& fallback) {
  switch (op) {
    case Pointwise::add: return visitor(pointwise::Add{});
    case Pointwise::sub: return visitor(pointwise::Sub{});
    case Pointwise::mul: return visitor(pointwise::Mul{});
    case Pointwise::div: return visitor(pointwise::Div{});
    case Pointwise::axpy: return visitor(pointwise::Axpy{});
    case Pointwise::copy: return visitor(pointwise::Copy{});
    case Pointwise::relu_backward: return visitor(pointwise::ReluBackward{});
    case Pointwise::abs_backward: return visitor(pointwise::AbsBackward{});
    case Pointwise::sqrt_backward: return visitor(pointwise::SqrtBackward{});
    case Pointwise::pow_backward: return visitor(pointwise::PowBackward{});
    case Pointwise::tanh_backward: return visitor(pointwise::TanhBackward{});
    case Pointwise::sigmoid_backward: return visitor(pointwise::SigmoidBackward{});
    case Pointwise::sin_backward: return visitor(pointwise::SinBackward{});
    case Pointwise::cos_backward: return visitor(pointwise::CosBackward{});
    default: return fallback();
  }
}

}  // namespace dagsim
