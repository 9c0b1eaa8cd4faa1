// The AVX-512F + FMA kernels of vector_math.h: 16 floats or 8 doubles a vector, SLEEF's avx512f functions.
// Compiled with -mavx512f -mfma -ffp-contract=off (core/CMakeLists.txt); called only on a CPU that
// has both (vector_math.cc).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace dagsim::vec {
namespace {

struct F32 {
  using T = float;
  using V = __m512;
  static constexpr int kWidth = 16;
  static V load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
  static V splat(T x) { return _mm512_set1_ps(x); }
  static V tanh(V x) { return Sleef_tanhf16_u10avx512f(x); }
  static V exp(V x) { return Sleef_expf16_u10avx512f(x); }
  static V log(V x) { return Sleef_logf16_u10avx512f(x); }
};

struct F64 {
  using T = double;
  using V = __m512d;
  static constexpr int kWidth = 8;
  static V load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
  static V splat(T x) { return _mm512_set1_pd(x); }
  static V tanh(V x) { return Sleef_tanhd8_u10avx512f(x); }
  static V exp(V x) { return Sleef_expd8_u10avx512f(x); }
  static V log(V x) { return Sleef_logd8_u10avx512f(x); }
};

}  // namespace
}  // namespace dagsim::vec

#include "core/tensor/vector_kernels.inc"

namespace dagsim::vec {

const KernelTable& avx512_kernels() {
  static constexpr KernelTable table = make_table<F32, F64>();
  return table;
}
}  // namespace dagsim::vec
