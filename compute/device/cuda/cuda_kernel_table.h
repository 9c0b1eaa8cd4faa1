// CudaKernels: the cuda backend's kernel table (core/tensor/device_kernels.h), through which
// dagsim's ops run on a real GPU: the pointwise formulas, gathers, sums, line kernels and dtype
// casts of cuda_op_kernels.h, and cuBLAS for products, each enqueued on the GPU's current stream.
//
// Promises: nothing here blocks the host or reads device memory on it; an index space of more
// than kMaxDims dimensions, or a product whose leading dimensions are not its operands' natural
// ones (dagsim's ops never ask for one), is refused with an error naming it rather than computed
// wrong.
#pragma once

#include "core/tensor/device_kernels.h"

namespace dagsim::device::cuda {

class CudaGpu;

class CudaKernels final : public DeviceKernels {
 public:
  explicit CudaKernels(CudaGpu& gpu) : gpu_(gpu) {}

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

 private:
  CudaGpu& gpu_;
};

}  // namespace dagsim::device::cuda
