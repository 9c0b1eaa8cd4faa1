// Names of node states and fault-event kinds: how records and reports write them, and how a
// judge reads them back (cluster.h).
#include "core/runtime/cluster.h"

#include <array>

#include "core/base/assert.h"

namespace dagsim::runtime {

namespace {

constexpr std::array<std::string_view, 5> kNodeStates = {"not started", "up", "paused", "killed", "crashed"};
constexpr std::array<std::string_view, 9> kFaultKinds = {"start", "kill",      "crash", "restart",          "pause",
                                                         "resume", "partition", "heal",  "connection_failed"};

template <typename Enum, size_t N>
bool parse_name(const std::array<std::string_view, N>& names, std::string_view name, Enum& out) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) {
      out = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view node_state_name(NodeState state) {
  const auto i = static_cast<size_t>(state);
  DAGSIM_ASSERT(i < kNodeStates.size());
  return kNodeStates[i];
}

bool parse_node_state(std::string_view name, NodeState& state) { return parse_name(kNodeStates, name, state); }

std::string_view fault_event_kind_name(FaultEvent::Kind kind) {
  const auto i = static_cast<size_t>(kind);
  DAGSIM_ASSERT(i < kFaultKinds.size());
  return kFaultKinds[i];
}

bool parse_fault_event_kind(std::string_view name, FaultEvent::Kind& kind) { return parse_name(kFaultKinds, name, kind); }

}  // namespace dagsim::runtime
