// SimGpu: a simulated GPU for the simulator and CI (DeviceBackend, core/tensor/device.h).
//
// Its memory is host memory and its kernels are the ops' CPU code, which computes eagerly; what it
// simulates is CUDA's ordering. Each stream is a queue in the node's virtual time: a kernel starts
// when its stream's earlier work and the events the stream waits on are done, and it takes a
// seeded delay drawn per kernel and per copy (the scenario's [devices] delays), so a stream can
// run late. The host never waits for a launch, only when it reads (read_to_host, as .cpu() and
// .item() do) or synchronises an event, and then its fiber sleeps in virtual time.
//
// A race is a kernel (or a host read) that starts before the kernel writing one of its inputs
// ended, which on a real GPU happens when a stream did not wait on the writer's event. The sim
// gives such a read what a real GPU might: poisoned bytes (NaN, zeros or stale garbage, chosen by
// the seed), which spread to everything computed from them. So a missing event wait fails a
// gradient check instead of passing by luck, and the same seed replays the same race.
//
// Determinism: the delays and the poison come from the GPU's own Prng, drawn in launch order,
// which the deterministic scheduler fixes; time is the node's Clock. One node's fibers only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/base/prng.h"
#include "core/runtime/clock.h"
#include "compute/device/host_kernels.h"
#include "core/tensor/device.h"

namespace dagsim::device {

struct SimGpuDelays {
  // Each kernel and each copy takes a delay drawn uniformly from [min, max], in nanoseconds.
  int64_t kernel_min_ns = 2'000;
  int64_t kernel_max_ns = 20'000;
  int64_t copy_min_ns = 5'000;
  int64_t copy_max_ns = 50'000;
};

struct SimGpuStats {
  uint64_t kernels = 0;
  uint64_t copies = 0;
  uint64_t racy_reads = 0;     // kernels or host reads that read an input before its writer ended
  uint64_t host_waits = 0;     // times the host slept for the device
};

class SimGpu final : public DeviceBackend {
 public:
  SimGpu(int ordinal, runtime::Clock& clock, Prng prng, SimGpuDelays delays = {});
  ~SimGpu() override;

  Device device() const override { return device_; }
  const char* kind() const override { return "sim"; }
  std::byte* allocate(size_t nbytes) override;
  void release(std::byte* block, size_t nbytes) override;
  void launch(std::span<Storage* const> reads, std::span<Storage* const> writes, bool copy) override;
  int new_stream() override;
  int current_stream() const override { return current_.get(); }
  void set_current_stream(int stream) override;
  DeviceEvent record(int stream) override;
  void wait(int stream, const DeviceEvent& event) override;
  bool query(const DeviceEvent& event) const override;
  void synchronize(const DeviceEvent& event) override;
  void read_to_host(const Storage& storage, std::byte* out, size_t nbytes) override;
  void write_from_host(Storage& storage, const std::byte* in, size_t nbytes) override;

  const SimGpuStats& stats() const { return stats_; }

  // Runs dagsim's ops through the kernel table (host_kernels.h), as on the cuda backend, instead
  // of their CPU code: the listed ops only (kOpsWithKernels), the others refused by name. Every
  // tensor a kernel is given must be this GPU's memory, as a real GPU needs; a host pointer (a CPU
  // tensor that reached a kernel) fails an assert naming the primitive.
  void use_kernel_table(bool on) { use_kernel_table_ = on; }
  DeviceKernels* kernels() override;
  const SimGpuDelays& delays() const { return delays_; }

 private:
  int64_t now_ns() const;
  int64_t draw_delay(bool copy);
  void poison(std::byte* bytes, size_t nbytes);
  void sleep_until(int64_t ns);

  Device device_;
  runtime::Clock& clock_;
  Prng prng_;
  SimGpuDelays delays_;
  std::vector<int64_t> stream_tail_ns_;  // when each stream's last work ends
  CurrentStream current_;  // per fiber
  SimGpuStats stats_;
  class CheckedKernels;
  // Asserts that [p, p + nbytes) lies in one block this GPU allocated and has not released.
  void check_owned(const std::byte* p, size_t nbytes, const char* primitive) const;

  std::unique_ptr<CheckedKernels> kernels_;
  bool use_kernel_table_ = false;
  std::map<const std::byte*, size_t> blocks_;  // live allocations: start -> bytes
};

}  // namespace dagsim::device
