// Device maps: where a tensor sent over RPC lands on the callee, as PyTorch's TensorPipe agent
// places it (TensorPipeRpcBackendOptions.set_device_map).
//
// A caller's map for a peer says, per device of the caller, which device of the peer receives its
// tensors ({cuda:0: cuda:1}); a tensor on a GPU that the map does not name cannot be sent, and the
// call fails at once with PyTorch's text. The reply comes back through the reverse map (the peer
// inverts the caller's map), so results, and the gradients of distributed autograd, return to the
// device they came from. A map may name "cpu" on either side. Maps are 1-to-1, checked when set
// (set_device_map's errors) and, for the whole cluster, before it starts (validate_device_maps:
// PyTorch's _validate_device_maps, its texts too).
//
// Data: a tensor travels as host bytes with its target device (codec.h); the sender stages it to
// the host by a copy ordered after its writer, and the receiver copies it onto the target on a
// stream of its own and makes the call's stream wait on that copy's event (rpc_agent.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "core/tensor/device.h"
#include "core/tensor/tensor.h"

namespace dagsim::rpc {

using DeviceMap = std::map<Device, Device>;

// One node's maps, to each peer by name, built as torch's options are.
class DeviceMaps {
 public:
  // torch's set_device_map(to, map), with GPU ordinals (-1 is not the cpu here: torch.device(-1)
  // is an error too). Merges `map` into the map for `to`. Throws invalid_argument when an index is
  // negative ("Device index must not be negative"), or when a device would map to two
  // ("`set_device_map` only supports 1-to-1 mapping, trying to map cuda:0 to cuda:1 and cuda:0").
  void set_device_map(const std::string& to, const std::map<int, int>& map);
  void set_device_map(const std::string& to, const DeviceMap& map);

  const std::map<std::string, DeviceMap>& maps() const { return maps_; }
  const DeviceMap* find(const std::string& to) const;
  bool empty() const { return maps_.empty(); }

 private:
  std::map<std::string, DeviceMap> maps_;
};

// PyTorch's _validate_device_maps over the whole cluster, before any node starts: node `i` is
// named names[i], has device_counts[i] GPUs and the maps maps[i]. Throws invalid_argument with
// PyTorch's first failing text ("Node worker0 has target devices with invalid indices in its
// device map for worker1 ...").
void validate_device_maps(const std::vector<std::string>& names, const std::vector<int>& device_counts,
                          const std::vector<DeviceMaps>& maps);

// Node `self`'s maps by peer id (for RpcOptions), and the maps it answers with: for every node
// whose maps name `self`, the inverse of its map to `self` (PyTorch's _create_reverse_mapping).
// REQUIRES: validate_device_maps passed.
std::map<WorkerId, DeviceMap> device_maps_by_id(WorkerId self, const std::vector<std::string>& names,
                                                const std::vector<DeviceMaps>& maps);
std::map<WorkerId, DeviceMap> reverse_device_maps(WorkerId self, const std::vector<std::string>& names,
                                                  const std::vector<DeviceMaps>& maps);

// The device each of `tensors` lands on at `remote_name`, through `map` (null: no map for that
// peer), as TensorPipe's getDevicesForRemote: empty when every tensor stays on the cpu. Throws
// invalid_argument with PyTorch's text for a GPU tensor the map does not place ("TensorPipe RPC
// backend only supports CPU tensors by default, ... Request device mapping is not available for
// destination worker1, but found tensor on device: cuda:0").
std::vector<Device> target_devices(const std::vector<Tensor>& tensors, const DeviceMap* map,
                                   const std::string& remote_name, bool is_request);

// As Python prints the dict: "{device(type='cuda', index=0): device(type='cuda', index=1)}".
std::string describe(const DeviceMap& map);

}  // namespace dagsim::rpc
