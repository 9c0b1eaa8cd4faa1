// timeline_text: the words the workloads' report timelines share. A fault with what it struck:
// "kill worker3", "partition {worker0, worker1} | {worker2, worker3}", "partition worker1 ->
// worker2 (one way)", "heal (every partition)"; a training's loss against local training's.
// Pure: the same input gives the same text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/runtime/cluster.h"
#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

std::string describe_fault(const runtime::FaultEvent& fault, const ClusterSpec& cluster);

// "loss 0.812 at step 1, 0.0312 at step 300; local training 0.812 and 0.0312; largest difference 0":
// `losses[i]` is step i+1's (nullopt: no step i+1 was recorded), `local` local training's, as long.
std::string loss_line(const std::vector<std::optional<double>>& losses, const std::vector<double>& local);

}  // namespace dagsim::scenarios
