// Device: where a tensor's bytes live and whose work orders them (PyTorch's torch.device), and
// DeviceBackend, the one interface that device work goes through (allocate, copy, launch an op on
// a stream, record and wait on events, query an event).
//
// Implementations: the cpu has none (a CPU tensor's Storage has no backend and every op runs
// inline, as before devices existed); compute/device/sim_gpu.h is the simulated GPU the simulator and
// CI use; compute/device/cuda/ holds the CUDA runtime's pieces, built only where nvcc is found.
//
// How an op runs on a device (device_guard.h): the op's CPU code computes the values eagerly into
// the device's memory (the sim GPU's memory is host memory), and the backend then orders that
// work as one kernel on its current stream: when it starts and ends, and whether its inputs were
// ready when it started. A backend decides what a read of a storage before its writer finished
// sees; the sim GPU poisons it, so a missing event wait fails a gradient check instead of passing
// by luck.
//
// Promises: a Device prints as PyTorch prints one ("cpu", "cuda:0") and parses what
// torch.device parses; backends are per node (a DeviceSet), found through the running fiber's
// context, so two simulated nodes never share a GPU.
#pragma once

#include <compare>
#include <iosfwd>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dagsim {

class Storage;
class DeviceKernels;

enum class DeviceType : uint8_t { cpu = 0, cuda = 1 };

struct Device {
  DeviceType type = DeviceType::cpu;
  int16_t index = -1;  // cuda: the ordinal; cpu: -1

  static constexpr Device cpu() { return Device{}; }
  static constexpr Device cuda(int ordinal) { return Device{DeviceType::cuda, static_cast<int16_t>(ordinal)}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  // "cpu", "cuda:0".
  std::string str() const;

  friend constexpr auto operator<=>(const Device&, const Device&) = default;
};
// Prints str() (test failures name devices, not bytes).
std::ostream& operator<<(std::ostream& out, const Device& device);

// What torch.device accepts: "cpu", "cuda" (ordinal 0, the current device), "cuda:N". Throws
// invalid_argument with PyTorch's text for anything else.
Device parse_device(std::string_view text);

// A point in a stream's work (a CUDA event once recorded): the work before it on `stream`.
// `mark` is the backend's own: the sim GPU's virtual nanoseconds, the cuda backend's event slot.
struct DeviceEvent {
  Device device;
  int stream = 0;
  int64_t mark = 0;
};

// A GPU backend's current stream, as torch.cuda.current_stream(): PyTorch keeps one per thread and
// device, and a fiber is dagsim's logical thread, so each fiber has its own, and a fiber starts on
// the default stream, 0. A fiber that makes a side stream current and then blocks (the RPC agent
// placing a tensor, waiting for the staging buffer) leaves the node's other fibers on theirs.
// Outside any fiber (a test's main thread, a benchmark) the backend keeps one of its own.
class CurrentStream {
 public:
  CurrentStream();
  int get() const;
  void set(int stream);

 private:
  uint64_t key_;  // unique per backend for the process's life: a fiber's entry never aliases another's
  int outside_fibers_ = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual Device device() const = 0;
  // "sim" or "cuda", for messages and reports.
  virtual const char* kind() const = 0;

  // Device memory for a Storage of `nbytes` (> 0). Host-addressable on the sim GPU.
  virtual std::byte* allocate(size_t nbytes) = 0;
  virtual void release(std::byte* block, size_t nbytes) = 0;

  // Orders an op that just computed as one kernel on the current stream: after the stream's
  // earlier work and the events the stream waits on. `reads` are its inputs on this device
  // (a read of one whose writer had not finished when the kernel started sees what the backend
  // says a race sees); `writes` become ready when the kernel ends. `copy` kernels take the copy
  // delay instead of the kernel delay.
  virtual void launch(std::span<Storage* const> reads, std::span<Storage* const> writes, bool copy) = 0;

  // Streams, as torch.cuda.Stream: 0 is the default stream; new_stream makes another.
  virtual int new_stream() = 0;
  virtual int current_stream() const = 0;
  virtual void set_current_stream(int stream) = 0;

  // Events, as torch.cuda.Event: record marks the stream's work so far; wait makes a stream's
  // later work start after the event (the host does not block); query says whether the event's
  // work has finished; synchronize blocks the calling fiber, never the OS thread, until it has.
  virtual DeviceEvent record(int stream) = 0;
  virtual void wait(int stream, const DeviceEvent& event) = 0;
  virtual bool query(const DeviceEvent& event) const = 0;
  virtual void synchronize(const DeviceEvent& event) = 0;

  // Copies `storage`'s bytes to host memory as a read by the host now sees them: the host must
  // have waited for their writer (through an event, or by synchronising the stream that wrote
  // them), or the sim GPU hands back what a racing read would.
  virtual void read_to_host(const Storage& storage, std::byte* out, size_t nbytes) = 0;
  // Copies host bytes into `storage` as a copy on the current stream: the storage is ready when
  // that copy ends. The host does not wait (the bytes are staged first, as a pinned buffer).
  virtual void write_from_host(Storage& storage, const std::byte* in, size_t nbytes) = 0;

  // The kernels dagsim's ops run with on this device (device_kernels.h); null where the host
  // addresses the device's memory and the ops' CPU code computes there (the sim GPU's default).
  virtual DeviceKernels* kernels() { return nullptr; }
};

// The devices of one node (cuda:0 .. cuda:N-1), as the node's process would see them.
class DeviceSet {
 public:
  void add(std::shared_ptr<DeviceBackend> backend);
  // The backend of `device`. Throws invalid_argument naming the device and what the node has.
  const std::shared_ptr<DeviceBackend>& get(Device device) const;
  bool has(Device device) const;
  size_t cuda_count() const { return backends_.size(); }
  // "cuda:0, cuda:1" or "no cuda device".
  std::string describe() const;

 private:
  std::vector<std::shared_ptr<DeviceBackend>> backends_;  // by ordinal
};

// The running fiber's node's devices (runtime::FiberContext::devices), else the one a
// ScopedDeviceSet installed for this thread (tests on the main fiber), else none.
const DeviceSet* current_device_set();

// Installs `set` for this thread's fibers that have no context of their own, for its lifetime.
class ScopedDeviceSet {
 public:
  explicit ScopedDeviceSet(const DeviceSet* set);
  ~ScopedDeviceSet();
  ScopedDeviceSet(const ScopedDeviceSet&) = delete;
  ScopedDeviceSet& operator=(const ScopedDeviceSet&) = delete;

 private:
  const DeviceSet* previous_;
};

// The backend for `device` on the running node. Throws invalid_argument as DeviceSet::get, or,
// with no devices at all, PyTorch's "Torch not compiled with CUDA enabled"-like text naming the node.
std::shared_ptr<DeviceBackend> backend_for(Device device);

}  // namespace dagsim
