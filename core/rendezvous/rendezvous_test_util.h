// What the rendezvous unit tests share: a node descriptor by name, settings with a run id and the
// node bounds, and a time point in whole seconds. Tests only.
#pragma once

#include <cstdint>
#include <string>

#include "core/rendezvous/rendezvous_settings.h"
#include "core/rendezvous/rendezvous_state.h"

namespace dagsim::rendezvous::testing {

inline NodeDesc nd(std::string addr, uint64_t pid = 0, uint64_t local_id = 0) {
  NodeDesc node;
  node.addr = std::move(addr);
  node.pid = pid;
  node.local_id = local_id;
  return node;
}

inline RendezvousSettings settings(uint32_t min_nodes, uint32_t max_nodes, std::string run_id = "run") {
  RendezvousSettings s;
  s.run_id = std::move(run_id);
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  return s;
}

inline runtime::TimePoint at_s(int64_t s) { return runtime::TimePoint{std::chrono::seconds(s)}; }

}  // namespace dagsim::rendezvous::testing
