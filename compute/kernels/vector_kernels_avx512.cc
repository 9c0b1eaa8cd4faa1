// The AVX-512F + FMA kernels of vector_math.h: 16 floats or 8 doubles a vector, SLEEF's avx512f
// functions. Compiled with -mavx512f -mfma -ffp-contract=off (core/CMakeLists.txt); called only on
// a CPU that has both (vector_math.cc).
#include <immintrin.h>
#include <sleef.h>

#include "compute/kernels/vector_kernels.inc"

namespace dagsim::vec {

const KernelTable& avx512_kernels() {
  using F32 = Lane<float, 16, [](const float* p) { return _mm512_loadu_ps(p); },
                   [](float* p, __m512 v) { _mm512_storeu_ps(p, v); }, [](float x) { return _mm512_set1_ps(x); },
                   Sleef_tanhf16_u10avx512f, Sleef_expf16_u10avx512f, Sleef_logf16_u10avx512f>;
  using F64 = Lane<double, 8, [](const double* p) { return _mm512_loadu_pd(p); },
                   [](double* p, __m512d v) { _mm512_storeu_pd(p, v); }, [](double x) { return _mm512_set1_pd(x); },
                   Sleef_tanhd8_u10avx512f, Sleef_expd8_u10avx512f, Sleef_logd8_u10avx512f>;
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}

}  // namespace dagsim::vec
