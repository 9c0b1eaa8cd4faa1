// gemm_avx512.h against OpenBLAS: every transpose combination, beta 0 and 1, leading dimensions
// wider than the operands, odd sizes (Eigen's panels and their edges).
#include "compute/kernels/gemm_avx512.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "core/base/prng.h"

namespace dagsim::detail {
namespace {

TEST(GemmAvx512, EqualsOpenBlasToRoundingForEveryLayout) {
  if (!avx512_gemm_available()) GTEST_SKIP() << "this CPU has no AVX-512";
  Prng prng(5);
  for (const auto& [m, n, k] : {std::tuple{64, 256, 256}, std::tuple{7, 13, 29}, std::tuple{1, 1, 1}, std::tuple{33, 5, 70}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const double beta : {0.0, 1.0}) {
          const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
          std::vector<double> a(static_cast<size_t>((ta ? k : m) * lda)), b(static_cast<size_t>((tb ? n : k) * ldb));
          std::vector<double> c(static_cast<size_t>(m * ldc));
          for (double& x : a) x = prng.uniform(-1, 1);
          for (double& x : b) x = prng.uniform(-1, 1);
          for (double& x : c) x = prng.uniform(-1, 1);
          std::vector<double> want = c;
          cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0,
                      a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
          dgemm_avx512(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              // The padding column past n must be left alone; the rest equal to rounding.
              if (j >= n) {
                ASSERT_EQ(c[at], want[at]);
              } else {
                ASSERT_NEAR(c[at], want[at], 1e-12 * (1 + std::abs(want[at])) * k)
                    << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb << " beta=" << beta;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace dagsim::detail
