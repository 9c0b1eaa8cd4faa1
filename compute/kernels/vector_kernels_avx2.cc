// The AVX2 + FMA kernels of vector_math.h: 8 floats or 4 doubles a vector, SLEEF's avx2 functions.
// Compiled with -mavx2 -mfma -ffp-contract=off (core/CMakeLists.txt); called only on a CPU that
// has both (vector_math.cc).
#include <immintrin.h>
#include <sleef.h>

#include "compute/kernels/vector_kernels.inc"

namespace dagsim::vec {

const KernelTable& avx2_kernels() {
  using F32 = Lane<float, 8, [](const float* p) { return _mm256_loadu_ps(p); },
                   [](float* p, __m256 v) { _mm256_storeu_ps(p, v); }, [](float x) { return _mm256_set1_ps(x); },
                   Sleef_tanhf8_u10avx2, Sleef_expf8_u10avx2, Sleef_logf8_u10avx2>;
  using F64 = Lane<double, 4, [](const double* p) { return _mm256_loadu_pd(p); },
                   [](double* p, __m256d v) { _mm256_storeu_pd(p, v); }, [](double x) { return _mm256_set1_pd(x); },
                   Sleef_tanhd4_u10avx2, Sleef_expd4_u10avx2, Sleef_logd4_u10avx2>;
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}

}  // namespace dagsim::vec
