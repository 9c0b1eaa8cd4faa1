// The AVX2 + FMA kernels of vector_math.h: 8 floats or 4 doubles a vector, SLEEF's avx2 functions.
// Compiled with -mavx2 -mfma -ffp-contract=off (core/CMakeLists.txt); called only on a CPU that
// has both (vector_math.cc).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace dagsim::vec {
namespace {

struct F32 {
  using T = float;
  using V = __m256;
  static constexpr int kWidth = 8;
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
  static V splat(T x) { return _mm256_set1_ps(x); }
  static V tanh(V x) { return Sleef_tanhf8_u10avx2(x); }
  static V exp(V x) { return Sleef_expf8_u10avx2(x); }
  static V log(V x) { return Sleef_logf8_u10avx2(x); }
};

struct F64 {
  using T = double;
  using V = __m256d;
  static constexpr int kWidth = 4;
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
  static V splat(T x) { return _mm256_set1_pd(x); }
  static V tanh(V x) { return Sleef_tanhd4_u10avx2(x); }
  static V exp(V x) { return Sleef_expd4_u10avx2(x); }
  static V log(V x) { return Sleef_logd4_u10avx2(x); }
};

}  // namespace
}  // namespace dagsim::vec

#include "core/tensor/vector_kernels.inc"

namespace dagsim::vec {

const KernelTable& avx2_kernels() {
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}
}  // namespace dagsim::vec
