// float64 matrix products on AVX-512 CPUs, through Eigen's GEMM compiled for AVX-512.
//
// Why: OpenBLAS is the project's BLAS, and it runs whatever kernels its build and the environment
// pick. On this project's machines the environment pins it to its Haswell (AVX2) kernels
// (OPENBLAS_CORETYPE=Haswell), where Eigen's AVX-512 GEMM takes 117 us against OpenBLAS's 215 us
// for the MLP's 64x256x256 dgemm. float32 products go to oneDNN, which picks AVX-512 itself
// (linalg.cc); float64 has no oneDNN GEMM, hence Eigen.
//
// Determinism: the kernels are chosen by the CPU alone (avx512_gemm_available), never by
// DAGSIM_CPU_CAPABILITY, so a seed replays the same bits on a machine whichever vector path runs
// the elementwise ops; across CPUs products differ, as DESIGN.md says of BLAS kernels.
#pragma once

#include <cstdint>

namespace dagsim::detail {

// True when this CPU runs the AVX-512 subsets the kernels are compiled for (F, DQ, VL, and FMA).
bool avx512_gemm_available();

// C[m,n] = beta*C + op(A)·op(B), row-major with leading dimensions lda, ldb, ldc, as cblas_dgemm.
// REQUIRES: avx512_gemm_available(); m, n, k > 0; beta is 0 or 1.
void dgemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
                  const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace dagsim::detail
