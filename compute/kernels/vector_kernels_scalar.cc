// The scalar kernels of vector_math.h, one element at a time through SLEEF's single-lane functions:
// `purecfma` (the FMA variant, so the bits equal the vector paths') for any CPU with FMA, `purec`
// for one without. Compiled for baseline x86-64 with -ffp-contract=off (core/CMakeLists.txt).
//
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

#include "compute/kernels/vector_kernels.inc"

namespace dagsim::vec {

namespace {
template <typename T, auto Tanh, auto Exp, auto Log>
using ScalarLane = Lane<T, 1, [](const T* p) { return *p; }, [](T* p, T v) { *p = v; }, [](T x) { return x; },
                        Tanh, Exp, Log>;
}  // namespace

const KernelTable& scalar_kernels() {
  using F32 = ScalarLane<float, Sleef_tanhf1_u10purecfma, Sleef_expf1_u10purecfma, Sleef_logf1_u10purecfma>;
  using F64 = ScalarLane<double, Sleef_tanhd1_u10purecfma, Sleef_expd1_u10purecfma, Sleef_logd1_u10purecfma>;
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}

const KernelTable& scalar_nofma_kernels() {
  using F32 = ScalarLane<float, Sleef_tanhf1_u10purec, Sleef_expf1_u10purec, Sleef_logf1_u10purec>;
  using F64 = ScalarLane<double, Sleef_tanhd1_u10purec, Sleef_expd1_u10purec, Sleef_logd1_u10purec>;
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}

}  // namespace dagsim::vec
