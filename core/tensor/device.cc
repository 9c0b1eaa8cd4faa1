#include "core/tensor/device.h"

#include <atomic>
#include <charconv>
#include <ostream>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/fiber_context.h"

namespace dagsim {

namespace {
std::atomic<uint64_t> next_stream_key{1};
}  // namespace

CurrentStream::CurrentStream() : key_(next_stream_key.fetch_add(1, std::memory_order_relaxed)) {}

int CurrentStream::get() const {
  const runtime::FiberContext* fiber = runtime::current_fiber();
  if (fiber == nullptr) return outside_fibers_;
  for (const auto& [key, stream] : fiber->current_streams) {
    if (key == key_) return stream;
  }
  return 0;
}

void CurrentStream::set(int stream) {
  runtime::FiberContext* fiber = runtime::current_fiber();
  if (fiber == nullptr) {
    outside_fibers_ = stream;
    return;
  }
  for (auto& [key, current] : fiber->current_streams) {
    if (key == key_) {
      current = stream;
      return;
    }
  }
  fiber->current_streams.emplace_back(key_, stream);
}

namespace {
thread_local const DeviceSet* tl_device_set = nullptr;
}  // namespace

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

Device parse_device(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view type = text.substr(0, colon);
  if (type != "cpu" && type != "cuda") {
    // torch.device("gpu") says this, listing every type it knows; dagsim knows two.
    throw errors::invalid_argument("Expected one of cpu, cuda device type at start of device string: " +
                                   std::string(text));
  }
  if (colon == std::string_view::npos) return type == "cpu" ? Device::cpu() : Device::cuda(0);
  const std::string_view digits = text.substr(colon + 1);
  int ordinal = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || ordinal < 0 ||
      ordinal > 255) {
    throw errors::invalid_argument("Invalid device string: '" + std::string(text) + "'");
  }
  if (type == "cpu") {
    // A cpu has one device; torch.device("cpu:1") is accepted and means the cpu, dagsim's too.
    return Device::cpu();
  }
  return Device::cuda(ordinal);
}

void DeviceSet::add(std::shared_ptr<DeviceBackend> backend) {
  DAGSIM_ASSERT(backend != nullptr);
  DAGSIM_ASSERT_MSG(backend->device() == Device::cuda(static_cast<int>(backends_.size())),
                    "devices are added in ordinal order");
  backends_.push_back(std::move(backend));
}

bool DeviceSet::has(Device device) const {
  return device.is_cuda() && device.index >= 0 && static_cast<size_t>(device.index) < backends_.size();
}

const std::shared_ptr<DeviceBackend>& DeviceSet::get(Device device) const {
  if (!has(device)) {
    throw errors::invalid_argument("CUDA error: invalid device ordinal: " + device.str() + " (this node has " +
                                   describe() + ")");
  }
  return backends_[static_cast<size_t>(device.index)];
}

std::string DeviceSet::describe() const {
  if (backends_.empty()) return "no cuda device";
  std::string out;
  for (const auto& b : backends_) {
    if (!out.empty()) out += ", ";
    out += b->device().str();
  }
  return out;
}

const DeviceSet* current_device_set() {
  if (const runtime::FiberContext* fiber = runtime::current_fiber(); fiber != nullptr && fiber->devices != nullptr) {
    return fiber->devices;
  }
  return tl_device_set;
}

ScopedDeviceSet::ScopedDeviceSet(const DeviceSet* set) : previous_(tl_device_set) { tl_device_set = set; }
ScopedDeviceSet::~ScopedDeviceSet() { tl_device_set = previous_; }

std::shared_ptr<DeviceBackend> backend_for(Device device) {
  DAGSIM_ASSERT(device.is_cuda());
  const DeviceSet* set = current_device_set();
  if (set == nullptr || set->cuda_count() == 0) {
    const runtime::FiberContext* fiber = runtime::current_fiber();
    const std::string where = fiber != nullptr && !fiber->node_name.empty() ? fiber->node_name : "this process";
    throw errors::invalid_argument("Torch not compiled with CUDA enabled: " + device.str() + " was asked for, and " +
                                   where + " has no cuda device (give it one with [devices] in the scenario)");
  }
  return set->get(device);
}

}  // namespace dagsim
