// Vectorised elementwise kernels over contiguous arrays, one implementation per CPU capability,
// as PyTorch's ATen dispatches its CPU kernels (DEFAULT, AVX2, AVX512) and with the same library
// doing the transcendental part: SLEEF's 1.0-ULP functions (Sleef_tanhf8_u10 and kin).
//
// Promises:
// - Every capability gives the same bits for the same input. SLEEF evaluates one algorithm in
//   every lane whatever the vector width, and every path here uses its fused-multiply-add
//   variant (the scalar path calls SLEEF's `purecfma` functions); the arithmetic around it
//   (sigmoid's 1/(1+e), the backwards' g*(1-y*y)) is exact IEEE operations, compiled with
//   contraction off. So a seed replays the same trace and gradients whichever path a machine
//   picks: vector_math_test checks it bit for bit on every path this machine can run, and the
//   examples' trace hashes are compared across paths. (A CPU without FMA has one path only, the
//   scalar one over SLEEF's non-FMA functions: its results may differ from an FMA machine's in
//   the last bit, as PyTorch's do between machines.)
// - Accuracy: within 1 ULP of the exact result for tanh, exp and log (SLEEF's bound), checked
//   against long double libm in vector_math_test.
// - No sin or cos here: SLEEF's vector trig picks its argument reduction per vector (the fast one
//   only when every lane is small), so a lane's bits depend on its neighbours and on the width;
//   measured, 1 in 1,000-10,000 inputs differ between paths. Those ops stay on libm.
//
// The capability is chosen once: the best this CPU supports, or DAGSIM_CPU_CAPABILITY
// (scalar | avx2 | avx512, after PyTorch's ATEN_CPU_CAPABILITY) when set. An unknown name or one
// this CPU cannot run is an invalid_argument naming both, not a silent fallback.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace dagsim::vec {

enum class Capability : uint8_t { scalar = 0, avx2 = 1, avx512 = 2 };
inline constexpr int kCapabilityCount = 3;

std::string_view capability_name(Capability capability);
// Throws invalid_argument for a name that is none of scalar, avx2, avx512.
Capability parse_capability(std::string_view name);
bool capability_supported(Capability capability);
// Every capability this CPU can run, scalar first.
std::vector<Capability> supported_capabilities();

// The capability in use (decided on first use: DAGSIM_CPU_CAPABILITY, else the best supported).
Capability capability();
// Switches every later kernel call to `capability` (tests, benchmarks). Throws invalid_argument
// when this CPU cannot run it. Not for use while another thread runs kernels.
void set_capability(Capability capability);

// y[i] = f(x[i]); x and y may be the same array.
enum class Unary : uint8_t { tanh, exp, log, sigmoid };
inline constexpr int kUnaryCount = 4;
// out[i] = f(a[i], b[i]); out may alias a or b. The backwards take (grad, saved output):
// tanh_backward = g * (1 - y*y), sigmoid_backward = g * y * (1 - y), as PyTorch's formulas.
enum class Binary : uint8_t { add, sub, mul, div, tanh_backward, sigmoid_backward };
inline constexpr int kBinaryCount = 6;

void unary(Unary op, const float* x, float* y, int64_t n);
void unary(Unary op, const double* x, double* y, int64_t n);
void binary(Binary op, const float* a, const float* b, float* out, int64_t n);
void binary(Binary op, const double* a, const double* b, double* out, int64_t n);
// self[i] += alpha * other[i] (PyTorch's add_ with alpha): gradient accumulation and SGD. The sum
// is taken in double and rounded once, for float32 as before this kernel existed.
void axpy(double alpha, const float* other, float* self, int64_t n);
void axpy(double alpha, const double* other, double* self, int64_t n);

// softmax (log_form false) or log_softmax (true) of the n >= 1 contiguous elements at x, into y
// (which may be x): line::SoftmaxWith's formula with SLEEF's exp, its max taken in any order (exact)
// and its sum of exponentials in lane order (lane_order.h), so every capability gives the same bits.
void softmax_row(bool log_form, const float* x, float* y, int64_t n);
void softmax_row(bool log_form, const double* x, double* y, int64_t n);
// Their backward over one row, from the forward's output `out` and its gradient `g`, into `dx` (which
// may be g): line::SoftmaxBackwardWith's formula with SLEEF's exp, its sum in lane order.
void softmax_backward_row(bool log_form, const float* out, const float* g, float* dx, int64_t n);
void softmax_backward_row(bool log_form, const double* out, const double* g, double* dx, int64_t n);

// layer_norm over one row of n >= 1 contiguous elements, into y (which may be x), its mean and rstd
// into *mean and *rstd: line::LayerNorm's formula (statistics in double, their sums in lane order).
// w and b may be null; they come as double for both dtypes (widened once per call, not per row:
// the functor widens each product's operand, which gives the same bits).
void layer_norm_row(const float* x, const double* w, const double* b, float* y, int64_t n, double eps, double* mean,
                    double* rstd);
void layer_norm_row(const double* x, const double* w, const double* b, double* y, int64_t n, double eps,
                    double* mean, double* rstd);
// Its backward over one row, into dx (which may be g): line::LayerNormBackward's formula. w may be
// null. With dw (not null), also layer_norm_weight_row's step into dw in the same pass.
void layer_norm_backward_row(const float* g, const float* x, const float* w, float* dx, float* dw, int64_t n,
                             double mean, double rstd);
void layer_norm_backward_row(const double* g, const double* x, const double* w, double* dx, double* dw, int64_t n,
                             double mean, double rstd);
// One row's step of the weight's gradient: acc[j] = T(acc[j] + g[j] * x_hat[j]), x_hat[j] = (x[j] -
// mean) * rstd in double (line::LayerNormWeight's, with the rows' loop outside).
void layer_norm_weight_row(const float* g, const float* x, double mean, double rstd, float* acc, int64_t n);
void layer_norm_weight_row(const double* g, const double* x, double mean, double rstd, double* acc, int64_t n);
// The position of max (is_max) or min along a row of n >= 1 contiguous elements: line::Extremum's,
// the first NaN if any, else the first element equal to the best.
int64_t extremum_row(bool is_max, const float* x, int64_t n);
int64_t extremum_row(bool is_max, const double* x, int64_t n);

// One capability's kernels; the vector_kernels_*.cc files each define one.
struct KernelTable {
  void (*unary_f32[kUnaryCount])(const float*, float*, int64_t);
  void (*unary_f64[kUnaryCount])(const double*, double*, int64_t);
  void (*binary_f32[kBinaryCount])(const float*, const float*, float*, int64_t);
  void (*binary_f64[kBinaryCount])(const double*, const double*, double*, int64_t);
  void (*axpy_f32)(double, const float*, float*, int64_t);
  void (*axpy_f64)(double, const double*, double*, int64_t);
  void (*softmax_row_f32)(bool, const float*, float*, int64_t);
  void (*softmax_row_f64)(bool, const double*, double*, int64_t);
  void (*softmax_backward_row_f32)(bool, const float*, const float*, float*, int64_t);
  void (*softmax_backward_row_f64)(bool, const double*, const double*, double*, int64_t);
  void (*layer_norm_row_f32)(const float*, const double*, const double*, float*, int64_t, double, double*, double*);
  void (*layer_norm_row_f64)(const double*, const double*, const double*, double*, int64_t, double, double*,
                             double*);
  void (*layer_norm_backward_row_f32)(const float*, const float*, const float*, float*, float*, int64_t, double,
                                      double);
  void (*layer_norm_backward_row_f64)(const double*, const double*, const double*, double*, double*, int64_t, double,
                                      double);
  void (*layer_norm_weight_row_f32)(const float*, const float*, double, double, float*, int64_t);
  void (*layer_norm_weight_row_f64)(const double*, const double*, double, double, double*, int64_t);
  int64_t (*extremum_row_f32)(bool, const float*, int64_t);
  int64_t (*extremum_row_f64)(bool, const double*, int64_t);
};
const KernelTable& scalar_kernels();         // SLEEF purecfma: needs FMA
const KernelTable& scalar_nofma_kernels();   // SLEEF purec: any x86-64
const KernelTable& avx2_kernels();           // AVX2 + FMA
const KernelTable& avx512_kernels();         // AVX-512F + FMA

}  // namespace dagsim::vec
