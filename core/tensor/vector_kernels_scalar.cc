// The scalar kernels of vector_math.h, one element at a time through SLEEF's single-lane functions:
// `purecfma` (the FMA variant, so the bits equal the vector paths') for any CPU with FMA, `purec`
// for one without. Compiled for baseline x86-64 with -ffp-contract=off (core/CMakeLists.txt).
// SLEEF declares its purecfma functions only where FP_FAST_FMA says fma is fast; this file is
// compiled for baseline x86-64 (it holds the non-FMA table too), and calls them only on a CPU
// with FMA (vector_math.cc), so it declares that itself.
#ifndef FP_FAST_FMA
#define FP_FAST_FMA
#endif
#ifndef FP_FAST_FMAF
#define FP_FAST_FMAF
#endif
#include <sleef.h>

#include <cstdint>

namespace dagsim::vec {
namespace {

// SLEEF's single-lane functions as a lane type of width 1. (Their declared return type is
// `const T`, hence the auto parameters.)
template <typename Scalar, auto Tanh, auto Exp, auto Log>
struct Lane {
  using T = Scalar;
  using V = Scalar;
  static constexpr int kWidth = 1;
  static V load(const T* p) { return *p; }
  static void store(T* p, V v) { *p = v; }
  static V splat(T x) { return x; }
  static V tanh(V x) { return Tanh(x); }
  static V exp(V x) { return Exp(x); }
  static V log(V x) { return Log(x); }
};

}  // namespace
}  // namespace dagsim::vec

#include "core/tensor/vector_kernels.inc"

namespace dagsim::vec {

const KernelTable& scalar_kernels() {
  using F32 = Lane<float, Sleef_tanhf1_u10purecfma, Sleef_expf1_u10purecfma, Sleef_logf1_u10purecfma>;
  using F64 = Lane<double, Sleef_tanhd1_u10purecfma, Sleef_expd1_u10purecfma, Sleef_logd1_u10purecfma>;
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}

const KernelTable& scalar_nofma_kernels() {
  using F32 = Lane<float, Sleef_tanhf1_u10purec, Sleef_expf1_u10purec, Sleef_logf1_u10purec>;
  using F64 = Lane<double, Sleef_tanhd1_u10purec, Sleef_expd1_u10purec, Sleef_logd1_u10purec>;
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}

}  // namespace dagsim::vec
