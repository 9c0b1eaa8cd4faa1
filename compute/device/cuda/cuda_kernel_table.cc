#include "compute/device/cuda/cuda_kernel_table.h"

#include <cuda_runtime.h>

#include <string>

#include "core/base/error.h"
#include "compute/device/cuda/cuda_check.h"
#include "compute/device/cuda/cuda_gpu.h"
#include "compute/device/cuda/cuda_op_kernels.h"

namespace dagsim::device::cuda {

namespace {

int64_t numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

template <typename T>
const T* as(const std::byte* p) { return reinterpret_cast<const T*>(p); }
template <typename T>
T* as(std::byte* p) { return reinterpret_cast<T*>(p); }

}  // namespace

void CudaKernels::unary(Pointwise op, Dtype dtype, const std::byte* x, std::byte* out, int64_t n, double scalar) {
  gpu_.select();
  dispatch_dtype(dtype, [&]<typename T>() { pointwise_unary<T>(op, as<T>(x), as<T>(out), n, scalar, gpu_.current_handle()); });
}

void CudaKernels::binary(Pointwise op, Dtype dtype, const std::byte* a, std::span<const int64_t> a_strides,
                         const std::byte* b, std::span<const int64_t> b_strides, std::byte* out,
                         std::span<const int64_t> shape, double scalar) {
  gpu_.select();
  const StridedShape index = strided(static_cast<int>(shape.size()), shape.data(), a_strides.data(), b_strides.data());
  dispatch_dtype(dtype, [&]<typename T>() {
    pointwise_binary<T>(op, as<T>(a), as<T>(b), as<T>(out), index, numel(shape), scalar, gpu_.current_handle());
  });
}

void CudaKernels::gather(Dtype dtype, const std::byte* x, std::span<const int64_t> x_strides, std::byte* out,
                         std::span<const int64_t> shape) {
  gpu_.select();
  const StridedShape index = strided(static_cast<int>(shape.size()), shape.data(), x_strides.data(), nullptr);
  dispatch_dtype(dtype, [&]<typename T>() { cuda::gather<T>(as<T>(x), as<T>(out), index, numel(shape), gpu_.current_handle()); });
}

void CudaKernels::reduce_sum(Dtype dtype, const std::byte* x, std::span<const int64_t> x_shape, std::byte* out,
                             int64_t out_numel, std::span<const int64_t> out_strides, double scale) {
  gpu_.select();
  StridedShape kept, reduced;
  const int64_t reduced_numel =
      split_for_sum(static_cast<int>(x_shape.size()), x_shape.data(), out_strides.data(), kept, reduced);
  dispatch_dtype(dtype, [&]<typename T>() {
    cuda::reduce_sum<T>(as<T>(x), as<T>(out), kept, out_numel, reduced, reduced_numel, scale, gpu_.current_handle());
  });
}

void CudaKernels::copy_rows(const std::byte* src, size_t src_pitch, std::byte* dst, size_t dst_pitch, size_t row_bytes,
                            size_t rows) {
  gpu_.select();
  if (row_bytes == 0 || rows == 0) return;
  const auto stream = static_cast<cudaStream_t>(gpu_.current_handle());
  if (rows == 1) {
    // One row: a plain copy (a 2-D copy refuses pitches beyond the device's limit).
    DAGSIM_CUDA_CHECK(cudaMemcpyAsync(dst, src, row_bytes, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  DAGSIM_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice,
                                      stream));
}

void CudaKernels::gemm(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const std::byte* a,
                       int64_t lda, const std::byte* b, int64_t ldb, double beta, std::byte* c, int64_t ldc) {
  gpu_.select();
  if (lda != (trans_a ? m : k) || ldb != (trans_b ? k : n) || ldc != n) {
    throw errors::invalid_argument("the cuda gemm takes operands with their natural leading dimensions; got lda " +
                                   std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc));
  }
  dispatch_dtype(dtype, [&]<typename T>() {
    cuda::gemm<T>(gpu_, trans_a, trans_b, m, n, k, as<T>(a), as<T>(b), static_cast<T>(beta), as<T>(c));
  });
}

void CudaKernels::lines(LineOp op, Dtype dtype, const LineArgs& args) {
  gpu_.select();
  run_separately(op, args, [&](LineOp one, const LineArgs& a) {
    dispatch_dtype(dtype, [&]<typename T>() { cuda::lines<T>(one, a, gpu_.current_handle()); });
  });
}

void CudaKernels::cast(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n) {
  gpu_.select();
  dispatch_dtype(from, [&]<typename From>() {
    dispatch_dtype(to, [&]<typename To>() { cuda::cast<From, To>(as<From>(x), as<To>(out), n, gpu_.current_handle()); });
  });
}

}  // namespace dagsim::device::cuda
