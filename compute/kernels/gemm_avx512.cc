// gemm_avx512.h: Eigen's GEMM over the caller's buffers (no copies: Eigen packs the panels
// itself, as any BLAS does). Compiled with -mavx512f -mavx512dq -mavx512vl -mfma (core/CMakeLists.txt)
// and called only where avx512_gemm_available(). Eigen runs single-threaded: built without OpenMP.
#include "compute/kernels/gemm_avx512.h"

#include <Eigen/Core>

#include "core/base/assert.h"

namespace dagsim::detail {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using View = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename A, typename B>
void multiply(const A& a, const B& b, double beta, View& c) {
  if (beta == 0.0) {
    c.noalias() = a * b;
  } else {
    c.noalias() += a * b;
  }
}

}  // namespace

bool avx512_gemm_available() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

void dgemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                  const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  DAGSIM_ASSERT(m > 0 && n > 0 && k > 0);
  DAGSIM_ASSERT(beta == 0.0 || beta == 1.0);
  // op(A) is m x k: A itself is stored m x k, or k x m when transposed (likewise B).
  const ConstView a_stored(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const ConstView b_stored(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  View out(c, m, n, Eigen::OuterStride<>(ldc));
  if (trans_a && trans_b) return multiply(a_stored.transpose(), b_stored.transpose(), beta, out);
  if (trans_a) return multiply(a_stored.transpose(), b_stored, beta, out);
  if (trans_b) return multiply(a_stored, b_stored.transpose(), beta, out);
  multiply(a_stored, b_stored, beta, out);
}

}  // namespace dagsim::detail
