// The [devices] section of the scenario loader (scenario_devices.cc): every node's simulated GPUs,
// their seeded delays, and the RPC device maps between nodes, checked as PyTorch checks maps
// (rpc::validate_device_maps) before anything runs.
//
// Private to the scenarios library; scenario_loader.cc calls it once [cluster] is known (map
// entries name nodes), and check_device_refs once the workload is read.
#pragma once

#include "scenarios/format/scenario.h"
#include "scenarios/format/toml_reader.h"

namespace dagsim::scenarios::detail {

DevicesSpec read_devices(const TomlReader& reader, const toml::node& devices);

// A device named by a key (`device = "cuda:1"`): parsed as torch.device parses it, and a GPU the
// nodes have under [devices]. Fails at the key otherwise.
Device read_device(const TomlReader& reader, const toml::node& n, std::string_view path, uint32_t gpus);

}  // namespace dagsim::scenarios::detail
