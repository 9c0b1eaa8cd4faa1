// DAGSIM_CUDA_CHECK and DAGSIM_CUBLAS_CHECK: a failed CUDA runtime or cuBLAS call becomes
// dagsim::Error(internal_error) naming the call and CUDA's own text, never a silent bad value.
#pragma once

namespace dagsim::device::cuda {

// "CUDA error: out of memory (cudaMalloc(&p, n))"
[[noreturn]] void throw_cuda_error(int code, const char* call);
[[noreturn]] void throw_cublas_error(int status, const char* call);
// A kernel asked to do what it cannot (a programmer error the caller's checks should prevent).
[[noreturn]] void throw_kernel_misuse(const char* detail);

}  // namespace dagsim::device::cuda

#define DAGSIM_CUDA_CHECK(call)                                                       \
  do {                                                                                \
    const auto dagsim_cuda_status_ = (call);                                          \
    if (dagsim_cuda_status_ != 0) ::dagsim::device::cuda::throw_cuda_error(static_cast<int>(dagsim_cuda_status_), #call); \
  } while (false)

#define DAGSIM_CUBLAS_CHECK(call)                                                     \
  do {                                                                                \
    const auto dagsim_cublas_status_ = (call);                                        \
    if (dagsim_cublas_status_ != 0) ::dagsim::device::cuda::throw_cublas_error(static_cast<int>(dagsim_cublas_status_), #call); \
  } while (false)
