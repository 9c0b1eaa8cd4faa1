#include "core/rpc/device_maps.h"

#include <algorithm>
#include <set>

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim::rpc {

namespace {

std::string repr(Device d) {
  return d.is_cpu() ? "device(type='cpu')" : "device(type='cuda', index=" + std::to_string(d.index) + ")";
}

std::string py_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i > 0 ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

// torch's _tensorpipe_validate_devices: the cpu, or a GPU the node has.
bool valid_devices(const std::vector<Device>& devices, int device_count) {
  for (Device d : devices) {
    if (d.is_cuda() && !(d.index >= 0 && d.index < device_count)) return false;
  }
  return true;
}

}  // namespace

std::string describe(const DeviceMap& map) {
  std::string out = "{";
  for (const auto& [from, to] : map) {
    if (out.size() > 1) out += ", ";
    out += repr(from) + ": " + repr(to);
  }
  return out + "}";
}

void DeviceMaps::set_device_map(const std::string& to, const std::map<int, int>& map) {
  DeviceMap devices;
  for (const auto& [k, v] : map) {
    if (k < 0 || v < 0) throw errors::invalid_argument("Device index must not be negative");
    devices.emplace(Device::cuda(k), Device::cuda(v));
  }
  set_device_map(to, devices);
}

void DeviceMaps::set_device_map(const std::string& to, const DeviceMap& map) {
  // Within the one dict (torch's _to_device_map): no two devices to one.
  std::map<Device, Device> reverse;
  for (const auto& [k, v] : map) {
    if (k.is_cuda() && k.index < 0) throw errors::invalid_argument("Device index must not be negative");
    if (v.is_cuda() && v.index < 0) throw errors::invalid_argument("Device index must not be negative");
    if (auto it = reverse.find(v); it != reverse.end()) {
      throw errors::invalid_argument("`device_map` only supports 1-to-1 mapping, trying to map " + k.str() + " and " +
                                     it->second.str() + " to " + v.str());
    }
    reverse.emplace(v, k);
  }
  // Across calls (set_device_map): a device keeps the one target it was given.
  DeviceMap& current = maps_[to];
  for (const auto& [k, v] : map) {
    if (auto it = current.find(k); it != current.end() && it->second != v) {
      throw errors::invalid_argument("`set_device_map` only supports 1-to-1 mapping, trying to map " + k.str() + " to " +
                                     v.str() + " and " + it->second.str());
    }
  }
  for (const auto& [k, v] : map) current[k] = v;
}

const DeviceMap* DeviceMaps::find(const std::string& to) const {
  const auto it = maps_.find(to);
  return it == maps_.end() ? nullptr : &it->second;
}

void validate_device_maps(const std::vector<std::string>& names, const std::vector<int>& device_counts,
                          const std::vector<DeviceMaps>& maps) {
  DAGSIM_ASSERT(names.size() == device_counts.size() && names.size() == maps.size());
  const std::set<std::string> known(names.begin(), names.end());
  for (size_t source = 0; source < names.size(); ++source) {
    std::vector<std::string> targets;
    bool all_known = true;
    for (const auto& [target, map] : maps[source].maps()) {
      targets.push_back(target);
      all_known = all_known && known.count(target) == 1;
    }
    if (!all_known) {
      throw errors::invalid_argument("Node " + names[source] + " has invalid target node names in its device maps\n" +
                                     "device maps = dict_keys(" + py_list(targets) + ")\nnode names = " + py_list(names));
    }
    for (const auto& [target, map] : maps[source].maps()) {
      const size_t target_index = static_cast<size_t>(std::find(names.begin(), names.end(), target) - names.begin());
      std::vector<Device> keys, values;
      for (const auto& [k, v] : map) {
        keys.push_back(k);
        values.push_back(v);
      }
      if (std::set<Device>(values.begin(), values.end()).size() != values.size()) {
        throw errors::invalid_argument("Node " + names[source] + " has duplicated target devices in its device map for " +
                                       target + "\ndevice map = " + describe(map));
      }
      if (!valid_devices(keys, device_counts[source])) {
        throw errors::invalid_argument("Node " + names[source] + " has source devices with invalid indices in its device map for " +
                                       target + "\ndevice map = " + describe(map) +
                                       "\ndevice count = " + std::to_string(device_counts[source]));
      }
      if (!valid_devices(values, device_counts[target_index])) {
        throw errors::invalid_argument("Node " + names[source] + " has target devices with invalid indices in its device map for " +
                                       target + "\ndevice map = " + describe(map) +
                                       "\ndevice count = " + std::to_string(device_counts[target_index]));
      }
    }
  }
}

std::map<WorkerId, DeviceMap> device_maps_by_id(WorkerId self, const std::vector<std::string>& names,
                                                const std::vector<DeviceMaps>& maps) {
  std::map<WorkerId, DeviceMap> out;
  for (const auto& [target, map] : maps[self].maps()) {
    const auto it = std::find(names.begin(), names.end(), target);
    DAGSIM_ASSERT_MSG(it != names.end(), "validate_device_maps first");
    out[static_cast<WorkerId>(it - names.begin())] = map;
  }
  return out;
}

std::map<WorkerId, DeviceMap> reverse_device_maps(WorkerId self, const std::vector<std::string>& names,
                                                  const std::vector<DeviceMaps>& maps) {
  std::map<WorkerId, DeviceMap> out;
  for (size_t node = 0; node < names.size(); ++node) {
    if (const DeviceMap* map = maps[node].find(names[self]); map != nullptr) {
      DeviceMap& reverse = out[static_cast<WorkerId>(node)];
      for (const auto& [k, v] : *map) reverse[v] = k;
    }
  }
  return out;
}

std::vector<Device> target_devices(const std::vector<Tensor>& tensors, const DeviceMap* map,
                                   const std::string& remote_name, bool is_request) {
  const std::string err = std::string(
                              "TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to "
                              "CPU before sending them over RPC, or call `set_device_map` on "
                              "`TensorPipeRpcBackendOptions` to explicitly configure device mapping. ") +
                          (is_request ? "Request" : "Response") + " device mapping is not available for destination " +
                          remote_name;
  if (map == nullptr) {
    for (const Tensor& t : tensors) {
      if (!t.device().is_cpu()) throw errors::invalid_argument(err + ", but found tensor on device: " + t.device().str());
    }
    return {};
  }
  std::vector<Device> devices;
  bool mapped = false;
  for (const Tensor& t : tensors) {
    const auto it = map->find(t.device());
    if (t.device().is_cpu()) {
      devices.push_back(it == map->end() ? Device::cpu() : it->second);
      mapped = mapped || it != map->end();
      continue;
    }
    if (it == map->end()) {
      // PyTorch nests its own message here (the whole text where the name goes); dagsim says it once.
      throw errors::invalid_argument(err + " for device " + t.device().str() + " but received a tensor on that device.");
    }
    devices.push_back(it->second);
    mapped = true;
  }
  if (!mapped) devices.clear();
  return devices;
}

}  // namespace dagsim::rpc
