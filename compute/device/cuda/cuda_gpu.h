// CudaGpu: a real GPU behind the device seam (DeviceBackend, core/tensor/device.h), on the CUDA
// runtime: memory from a CachingAllocator, streams and events that are CUDA's, copies through a
// pinned staging buffer, and cuBLAS for matrix products (gemm below).
//
// Waiting never blocks a thread: synchronize() and the host reads poll cudaEventQuery and, while
// the event is not done, sleep the calling fiber on the node's Clock (others run meanwhile), as
// the fiber runtime would otherwise idle. Outside a fiber (a test's main fiber, a benchmark) the
// polling spins instead, with the same result.
//
// dagsim's ops run here through the backend's kernel table (cuda_kernel_table.h) when they are on
// kOpsWithKernels's list; any other op is refused by name (DeviceGuard). cuda_mlp.h runs an MLP
// step on the kernels directly, as the benchmarks' floor. Built only where nvcc is found
// (DAGSIM_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "compute/device/cuda/caching_allocator.h"
#include "core/runtime/clock.h"
#include "core/tensor/device.h"

namespace dagsim::device::cuda {

// How many GPUs the CUDA runtime sees (0 where there is no driver or no device).
int device_count();
// Why device_count() is 0, for a test's skip message ("no CUDA driver", "no CUDA device").
const char* why_no_device();

class CudaKernels;

class CudaGpu final : public DeviceBackend {
 public:
  // `clock`: the node's, for the polling sleeps; null outside any runtime (spins instead).
  // `physical`: the CUDA device it runs on, when not `ordinal` (a simulated node's cuda:1 on a
  // machine with one GPU; each CudaGpu has its own streams, events and memory on it).
  CudaGpu(int ordinal, runtime::Clock* clock, int physical = -1);
  ~CudaGpu() override;

  Device device() const override { return device_; }
  const char* kind() const override { return "cuda"; }
  std::byte* allocate(size_t nbytes) override;
  void release(std::byte* block, size_t nbytes) override;
  // The kernels order themselves on the stream they were launched on: nothing to do.
  void launch(std::span<Storage* const>, std::span<Storage* const>, bool) override {}
  int new_stream() override;
  int current_stream() const override { return current_.get(); }
  void set_current_stream(int stream) override;
  DeviceEvent record(int stream) override;
  void wait(int stream, const DeviceEvent& event) override;
  bool query(const DeviceEvent& event) const override;
  void synchronize(const DeviceEvent& event) override;
  void read_to_host(const Storage& storage, std::byte* out, size_t nbytes) override;
  void write_from_host(Storage& storage, const std::byte* in, size_t nbytes) override;
  DeviceKernels* kernels() override;

  // The cudaStream_t of `stream`, and the current one, as a void* (cuda_kernels.h).
  void* stream_handle(int stream) const;
  void* current_handle() const { return stream_handle(current_.get()); }
  // The cuBLAS handle, bound to the current stream.
  void* cublas();
  CachingAllocator& allocator() { return allocator_; }
  // Makes this GPU the calling thread's current device (the runtime's calls and kernel launches
  // act on it).
  void select() const;

 private:
  void poll_until_done(const DeviceEvent& event);
  // Takes the pinned buffer, grown to `nbytes`, once no copy and no other fiber uses it; give it
  // back with staging_done (an event the next taker waits on, for an asynchronous copy).
  std::byte* take_staging(size_t nbytes);
  void staging_done(std::optional<DeviceEvent> pending_copy);
  // Blocks freed while their stream may still use them go back to the allocator once the event
  // recorded after that use has completed (PyTorch's allocator waits for the stream likewise).
  void reclaim_freed();

  Device device_;
  int physical_;
  runtime::Clock* clock_;
  CachingAllocator allocator_;
  std::vector<void*> streams_;  // cudaStream_t
  CurrentStream current_;  // per fiber
  // Events are reused round-robin: an event is re-recorded only after kEventRing others, far more
  // than anything waits on at once.
  std::vector<void*> events_;  // cudaEvent_t
  size_t next_event_ = 0;
  void* cublas_ = nullptr;     // cublasHandle_t
  std::byte* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  bool staging_taken_ = false;               // a fiber is between take_staging and staging_done
  std::optional<DeviceEvent> staging_busy_;  // the last asynchronous copy out of the buffer
  // A freed block waits on an event of its own, not one of the ring's: a burst of more releases
  // than the ring has slots, queued behind a busy stream, would otherwise re-record a slot that an
  // older release still waits on, and hand its block back before the stream is done with it.
  struct Freed {
    std::byte* block;
    size_t nbytes;
    void* used;  // cudaEvent_t, back to spare_events_ once done
  };
  std::vector<Freed> freed_;
  std::vector<void*> spare_events_;  // cudaEvent_t
  std::unique_ptr<CudaKernels> kernels_;
};

// C = op(A) op(B) (+ beta C), row-major, through cuBLAS on `gpu`'s current stream: A is m x k
// (k x m when trans_a), B is k x n (n x k when trans_b), C is m x n.
template <typename T>
void gemm(CudaGpu& gpu, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T beta,
          T* c);

}  // namespace dagsim::device::cuda
