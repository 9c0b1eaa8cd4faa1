#include "scenarios/format/scenario_devices.h"

#include <array>

#include "scenarios/format/scenario_keys.h"

namespace dagsim::scenarios {

std::map<WorkerId, rpc::DeviceMap> DevicesSpec::maps_of(uint32_t index, const std::vector<std::string>& names) const {
  if (maps.empty()) return {};
  return rpc::device_maps_by_id(static_cast<WorkerId>(index), names, maps);
}

std::map<WorkerId, rpc::DeviceMap> DevicesSpec::reverse_maps_of(uint32_t index, const std::vector<std::string>& names) const {
  if (maps.empty()) return {};
  return rpc::reverse_device_maps(static_cast<WorkerId>(index), names, maps);
}

namespace detail {
namespace {

constexpr std::string_view kDevicesKeys[] = {"gpus", "kernel_delay_us", "copy_delay_us", "maps"};
const KeySetRegistration kDevicesKeysListed{{"[devices]", "", "", kDevicesKeys}};
constexpr std::string_view kMapKeys[] = {"from", "to", "map"};
const KeySetRegistration kMapKeysListed{{"[[devices.maps]]", "", "", kMapKeys}};

constexpr int64_t kNsPerUs = 1'000;

// `[min, max]` in microseconds, 0 <= min <= max <= 1 s.
std::pair<int64_t, int64_t> read_delay(const TomlReader& reader, const Table& t, std::string_view key,
                                       std::pair<int64_t, int64_t> fallback) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return fallback;
  const toml::array& pair = reader.array(*node, t.key_path(key));
  if (pair.size() != 2) reader.fail(*node, t.key_path(key), "must be [min, max] in microseconds");
  const Range range{0, 1e6};
  const double lo = reader.number(*pair.get(0), t.key_path(key) + "[0]", range);
  const double hi = reader.number(*pair.get(1), t.key_path(key) + "[1]", range);
  if (lo > hi) reader.fail(*node, t.key_path(key), "min " + format_number(lo) + " is above max " + format_number(hi));
  return {static_cast<int64_t>(lo * kNsPerUs), static_cast<int64_t>(hi * kNsPerUs)};
}

}  // namespace

Device read_device(const TomlReader& reader, const toml::node& n, std::string_view path, uint32_t gpus) {
  const std::string text = reader.string(n, path);
  Device device;
  try {
    device = parse_device(text);
  } catch (const Error& e) {
    reader.fail(n, path, e.detail());
  }
  if (device.is_cuda() && static_cast<uint32_t>(device.index) >= gpus) {
    reader.fail(n, path,
                text + " is not a GPU the nodes have: [devices] gpus = " + std::to_string(gpus) +
                    (gpus == 0 ? " (give the nodes GPUs with [devices] gpus = N)" : ""));
  }
  return device;
}

DevicesSpec read_devices(const TomlReader& reader, const toml::node& node) {
  const Table t{reader.table(node, "devices"), "devices"};
  reader.check_keys(t, kDevicesKeys, "keys in [devices]");
  DevicesSpec spec;
  spec.gpus = static_cast<uint32_t>(reader.opt_integer(t, "gpus", 0, 16).value_or(0));
  const auto kernel = read_delay(reader, t, "kernel_delay_us", {spec.delays.kernel_min_ns, spec.delays.kernel_max_ns});
  const auto copy = read_delay(reader, t, "copy_delay_us", {spec.delays.copy_min_ns, spec.delays.copy_max_ns});
  spec.delays = device::SimGpuDelays{kernel.first, kernel.second, copy.first, copy.second};
  const toml::node* maps = t.get("maps");
  if (maps == nullptr) return spec;
  const ClusterSpec& cluster = reader.cluster();
  spec.maps.resize(cluster.nodes);
  const std::vector<const toml::table*> entries = reader.tables(*maps, "devices.maps");
  for (size_t i = 0; i < entries.size(); ++i) {
    const Table m{*entries[i], "devices.maps[" + std::to_string(i) + "]"};
    reader.check_keys(m, kMapKeys, "keys in [[devices.maps]]");
    const uint32_t from = reader.node_ref(reader.required(m, "from"), m.key_path("from"));
    const uint32_t to = reader.node_ref(reader.required(m, "to"), m.key_path("to"));
    const toml::node& map_node = reader.required(m, "map");
    const toml::table& map_table = reader.table(map_node, m.key_path("map"));
    rpc::DeviceMap map;
    for (const auto& [key, value] : map_table) {
      const std::string path = m.key_path("map") + "." + std::string(key.str());
      Device source;
      try {
        source = parse_device(key.str());
      } catch (const Error& e) {
        reader.fail(value, path, e.detail());
      }
      if (map.count(source) != 0) {
        reader.fail(value, path, "maps " + source.str() + " a second time in this map (\"cuda\" is cuda:0)");
      }
      map[source] = read_device(reader, value, path, 1u << 15);  // ordinals: validate_device_maps, below
    }
    try {
      spec.maps[from].set_device_map(cluster.node_name(to), map);
    } catch (const Error& e) {
      reader.fail(map_node, m.key_path("map"), e.detail());
    }
  }
  std::vector<std::string> names;
  for (uint32_t i = 0; i < cluster.nodes; ++i) names.push_back(cluster.node_name(i));
  try {
    rpc::validate_device_maps(names, std::vector<int>(cluster.nodes, static_cast<int>(spec.gpus)), spec.maps);
  } catch (const Error& e) {
    reader.fail(*maps, "devices.maps", e.detail());
  }
  return spec;
}

}  // namespace detail
}  // namespace dagsim::scenarios
