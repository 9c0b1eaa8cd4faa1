#include "compute/device/cuda/cuda_gpu.h"

#include "compute/device/cuda/cuda_kernel_table.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "compute/device/cuda/cuda_check.h"
#include "core/runtime/fiber_context.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/tensor.h"

namespace dagsim::device::cuda {

namespace {
constexpr size_t kEventRing = 4096;
constexpr runtime::Duration kPollInterval = std::chrono::microseconds(20);

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// cuBLAS, loaded when the first GPU starts rather than with the program: libcublasLt alone maps
// hundreds of MiB of address space, which every dagsim run (and its --max-memory) would pay.
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasDgemm_v2) dgemm;
  decltype(&cublasGetStatusString) status_string;
};

template <typename F>
void load_symbol(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(library, name));
  if (out == nullptr) throw errors::invalid_argument(std::string("cuBLAS has no ") + name + ": " + dlerror());
}

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      throw errors::invalid_argument("cannot load cuBLAS (" + name + ", the CUDA Toolkit's; is its lib folder on "
                                     "LD_LIBRARY_PATH?): " + dlerror());
    }
    CublasApi loaded{};
    load_symbol(library, "cublasCreate_v2", loaded.create);
    load_symbol(library, "cublasDestroy_v2", loaded.destroy);
    load_symbol(library, "cublasSetStream_v2", loaded.set_stream);
    load_symbol(library, "cublasSgemm_v2", loaded.sgemm);
    load_symbol(library, "cublasDgemm_v2", loaded.dgemm);
    load_symbol(library, "cublasGetStatusString", loaded.status_string);
    return loaded;  // the library stays loaded for the process's life
  }();
  return api;
}
}  // namespace

void throw_cuda_error(int code, const char* call) {
  throw errors::internal_error(std::string("CUDA error: ") + cudaGetErrorString(static_cast<cudaError_t>(code)) + " (" +
                               call + ")");
}

void throw_kernel_misuse(const char* detail) { throw errors::internal_error(std::string("cuda kernel misuse: ") + detail); }

void throw_cublas_error(int status, const char* call) {
  throw errors::internal_error(std::string("cuBLAS error: ") + cublas_api().status_string(static_cast<cublasStatus_t>(status)) +
                               " (" + call + ")");
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

const char* why_no_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) return "no CUDA device on this machine";
  if (e == cudaErrorInsufficientDriver) return "no CUDA driver on this machine (or one older than the toolkit)";
  if (e != cudaSuccess) return cudaGetErrorString(e);
  return "a CUDA device is present";
}

CudaGpu::CudaGpu(int ordinal, runtime::Clock* clock, int physical)
    : device_(Device::cuda(ordinal)), physical_(physical < 0 ? ordinal : physical), clock_(clock), allocator_(physical_) {
  DAGSIM_CUDA_CHECK(cudaSetDevice(physical_));
  new_stream();
  events_.resize(kEventRing, nullptr);
  for (void*& e : events_) {
    cudaEvent_t event;
    DAGSIM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    e = event;
  }
  cublasHandle_t handle;
  DAGSIM_CUBLAS_CHECK(cublas_api().create(&handle));
  cublas_ = handle;
}

CudaGpu::~CudaGpu() {
  (void)cudaSetDevice(physical_);
  for (void* s : streams_) (void)cudaStreamSynchronize(as_stream(s));
  for (const Freed& f : freed_) {
    allocator_.release(f.block, f.nbytes);
    (void)cudaEventDestroy(as_event(f.used));
  }
  for (void* e : spare_events_) (void)cudaEventDestroy(as_event(e));
  if (cublas_ != nullptr) (void)cublas_api().destroy(static_cast<cublasHandle_t>(cublas_));
  for (void* e : events_) (void)cudaEventDestroy(as_event(e));
  for (void* s : streams_) (void)cudaStreamDestroy(as_stream(s));
  if (staging_ != nullptr) (void)cudaFreeHost(staging_);
}

void CudaGpu::select() const { DAGSIM_CUDA_CHECK(cudaSetDevice(physical_)); }

DeviceKernels* CudaGpu::kernels() {
  if (kernels_ == nullptr) kernels_ = std::make_unique<CudaKernels>(*this);
  return kernels_.get();
}

std::byte* CudaGpu::allocate(size_t nbytes) {
  reclaim_freed();
  return static_cast<std::byte*>(allocator_.allocate(nbytes));
}

void CudaGpu::release(std::byte* block, size_t nbytes) {
  // From ~Storage: no throwing. A block whose event cannot be recorded waits for the stream.
  void* event = nullptr;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else {
    cudaEvent_t fresh;
    if (cudaEventCreateWithFlags(&fresh, cudaEventDisableTiming) == cudaSuccess) event = fresh;
  }
  if (event != nullptr && cudaSetDevice(physical_) == cudaSuccess &&
      cudaEventRecord(as_event(event), as_stream(current_handle())) == cudaSuccess) {
    freed_.push_back(Freed{block, nbytes, event});
    return;
  }
  (void)cudaGetLastError();
  if (event != nullptr) spare_events_.push_back(event);
  (void)cudaStreamSynchronize(as_stream(current_handle()));
  allocator_.release(block, nbytes);
}

void CudaGpu::reclaim_freed() {
  size_t kept = 0;
  cudaError_t failed = cudaSuccess;
  for (Freed& f : freed_) {
    const cudaError_t e = cudaEventQuery(as_event(f.used));
    if (e == cudaSuccess) {
      allocator_.release(f.block, f.nbytes);
      spare_events_.push_back(f.used);
      continue;
    }
    if (e != cudaErrorNotReady && failed == cudaSuccess) failed = e;
    freed_[kept++] = f;  // not done (or failed): kept, and tried again
  }
  freed_.resize(kept);
  DAGSIM_CUDA_CHECK(failed);
}

int CudaGpu::new_stream() {
  select();
  cudaStream_t s;
  // Non-blocking: no implicit synchronisation with the legacy default stream.
  DAGSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  streams_.push_back(s);
  return static_cast<int>(streams_.size() - 1);
}

void CudaGpu::set_current_stream(int stream) {
  DAGSIM_ASSERT(stream >= 0 && static_cast<size_t>(stream) < streams_.size());
  current_.set(stream);
}

void* CudaGpu::stream_handle(int stream) const {
  DAGSIM_ASSERT(stream >= 0 && static_cast<size_t>(stream) < streams_.size());
  return streams_[static_cast<size_t>(stream)];
}

void* CudaGpu::cublas() {
  select();
  DAGSIM_CUBLAS_CHECK(cublas_api().set_stream(static_cast<cublasHandle_t>(cublas_), as_stream(current_handle())));
  return cublas_;
}

DeviceEvent CudaGpu::record(int stream) {
  select();
  const size_t slot = next_event_++ % events_.size();
  DAGSIM_CUDA_CHECK(cudaEventRecord(as_event(events_[slot]), as_stream(stream_handle(stream))));
  return DeviceEvent{device_, stream, static_cast<int64_t>(slot)};
}

void CudaGpu::wait(int stream, const DeviceEvent& event) {
  DAGSIM_ASSERT(event.device == device_);
  select();
  DAGSIM_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_handle(stream)), as_event(events_[static_cast<size_t>(event.mark)]), 0));
}

bool CudaGpu::query(const DeviceEvent& event) const {
  const cudaError_t e = cudaEventQuery(as_event(events_[static_cast<size_t>(event.mark)]));
  if (e == cudaErrorNotReady) return false;
  DAGSIM_CUDA_CHECK(e);
  return true;
}

void CudaGpu::poll_until_done(const DeviceEvent& event) {
  DeviceGuard::Suspend off_device;
  const bool in_fiber = clock_ != nullptr && runtime::current_fiber() != nullptr;
  while (!query(event)) {
    // The fiber sleeps and the node's other fibers run; no thread blocks in the driver.
    if (in_fiber) clock_->sleep(kPollInterval);
  }
}

void CudaGpu::synchronize(const DeviceEvent& event) { poll_until_done(event); }

std::byte* CudaGpu::take_staging(size_t nbytes) {
  // Another fiber's copy may be in flight through the buffer: wait for it, fiber by fiber.
  const bool in_fiber = clock_ != nullptr && runtime::current_fiber() != nullptr;
  while (staging_taken_) {
    DAGSIM_ASSERT_MSG(in_fiber, "the staging buffer is taken, and only another fiber could give it back");
    DeviceGuard::Suspend off_device;
    clock_->sleep(kPollInterval);
  }
  staging_taken_ = true;
  if (staging_busy_) {
    const DeviceEvent busy = *staging_busy_;
    staging_busy_.reset();
    try {
      poll_until_done(busy);
    } catch (...) {
      staging_taken_ = false;
      throw;
    }
  }
  if (nbytes > staging_bytes_) {
    if (staging_ != nullptr) DAGSIM_CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    staging_bytes_ = 0;
    void* p = nullptr;
    if (cudaMallocHost(&p, nbytes) != cudaSuccess) {
      staging_taken_ = false;
      DAGSIM_CUDA_CHECK(cudaGetLastError());
    }
    staging_ = static_cast<std::byte*>(p);
    staging_bytes_ = nbytes;
  }
  return staging_;
}

void CudaGpu::staging_done(std::optional<DeviceEvent> pending_copy) {
  DAGSIM_ASSERT(staging_taken_);
  staging_busy_ = pending_copy;
  staging_taken_ = false;
}

void CudaGpu::read_to_host(const Storage& storage, std::byte* out, size_t nbytes) {
  DAGSIM_ASSERT(storage.backend() == this && nbytes <= storage.nbytes());
  if (nbytes == 0) return;
  std::byte* pinned = take_staging(nbytes);
  struct Give {
    CudaGpu& gpu;
    ~Give() { gpu.staging_done(std::nullopt); }
  } give{*this};
  select();
  DAGSIM_CUDA_CHECK(cudaMemcpyAsync(pinned, storage.data(), nbytes, cudaMemcpyDeviceToHost, as_stream(current_handle())));
  const DeviceEvent copied = record(current_.get());
  poll_until_done(copied);
  std::memcpy(out, pinned, nbytes);
}

void CudaGpu::write_from_host(Storage& storage, const std::byte* in, size_t nbytes) {
  DAGSIM_ASSERT(storage.backend() == this && nbytes <= storage.nbytes());
  if (nbytes == 0) return;
  std::byte* pinned = take_staging(nbytes);
  std::optional<DeviceEvent> copied;
  struct Give {
    CudaGpu& gpu;
    std::optional<DeviceEvent>& copied;
    ~Give() { gpu.staging_done(copied); }  // the next taker waits for this copy
  } give{*this, copied};
  std::memcpy(pinned, in, nbytes);
  select();
  DAGSIM_CUDA_CHECK(cudaMemcpyAsync(storage.data(), pinned, nbytes, cudaMemcpyHostToDevice, as_stream(current_handle())));
  copied = record(current_.get());
}

template <typename T>
void gemm(CudaGpu& gpu, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T beta,
          T* c) {
  // Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: swap the operands.
  const auto handle = static_cast<cublasHandle_t>(gpu.cublas());
  const T alpha{1};
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>) {
    DAGSIM_CUBLAS_CHECK(cublas_api().sgemm(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
                                    b, ldb, a, lda, &beta, c, static_cast<int>(n)));
  } else {
    DAGSIM_CUBLAS_CHECK(cublas_api().dgemm(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
                                    b, ldb, a, lda, &beta, c, static_cast<int>(n)));
  }
}

template void gemm<float>(CudaGpu&, bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float, float*);
template void gemm<double>(CudaGpu&, bool, bool, int64_t, int64_t, int64_t, const double*, const double*, double, double*);

}  // namespace dagsim::device::cuda
