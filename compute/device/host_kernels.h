// HostKernels: the reference kernel table (core/tensor/device_kernels.h) on host memory.
//
// It computes each primitive as the ops' CPU code does, with the same functions in the same
// order (SLEEF's vector kernels for tanh, exp, log and sigmoid; the host BLAS for products; sums
// accumulated in the dtype, element by element in index order), so an op that goes through the
// table gives the CPU's bits. The simulated GPU runs through it when asked
// (SimGpu::use_kernel_table): then every op on the list runs as it would on the cuda backend,
// through the table's calls alone, and a missed call or a wrong stride shows as a value that
// differs from the CPU's, on any machine, without a GPU.
#pragma once

#include "core/tensor/device_kernels.h"

namespace dagsim::device {

class HostKernels final : public DeviceKernels {
 public:
  void unary(Pointwise op, Dtype dtype, const std::byte* x, std::byte* out, int64_t n, double scalar) override;
  void binary(Pointwise op, Dtype dtype, const std::byte* a, std::span<const int64_t> a_strides, const std::byte* b,
              std::span<const int64_t> b_strides, std::byte* out, std::span<const int64_t> shape, double scalar) override;
  void gather(Dtype dtype, const std::byte* x, std::span<const int64_t> x_strides, std::byte* out,
              std::span<const int64_t> shape) override;
  void reduce_sum(Dtype dtype, const std::byte* x, std::span<const int64_t> x_shape, std::byte* out, int64_t out_numel,
                  std::span<const int64_t> out_strides, double scale) override;
  void copy_rows(const std::byte* src, size_t src_pitch, std::byte* dst, size_t dst_pitch, size_t row_bytes,
                 size_t rows) override;
  void gemm(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const std::byte* a, int64_t lda,
            const std::byte* b, int64_t ldb, double beta, std::byte* c, int64_t ldc) override;
  void lines(LineOp op, Dtype dtype, const LineArgs& args) override;
  void cast(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n) override;
};

}  // namespace dagsim::device
