// RendezvousSpec: the rendezvous workload's data ([rendezvous] and its [[rendezvous.actions]];
// docs/scenarios.md, "Rendezvous").
//
// One node hosts the built-in store (StoreService, reachable only over the transport); every other
// node is a participant running a small elastic agent (reference §5): it joins at its join time
// (0 unless an action says otherwise), calls next_rendezvous, then "trains" until the run's
// duration, asking num_nodes_waiting every monitor_interval and re-rendezvousing when it is above
// 0, and finally shuts its handler down. Actions make one node join late, leave early (shutdown),
// or close the rendezvous for everyone at a given time. A restarted node (a new incarnation, so a
// new NodeDesc pid) joins again at once. On etcd the store node may also restart the etcd it
// started (store_restart): killed at its time and started again `down` later with its data, as an
// operator restarts one.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/rendezvous/rendezvous_settings.h"
#include "core/runtime/clock.h"

namespace dagsim::scenarios {

struct RendezvousAction {
  enum class Kind : uint8_t { join, leave, close, store_restart };
  Kind kind = Kind::join;
  runtime::Duration at{0};  // the scenario's time
  uint32_t node = 0;
  runtime::Duration down{std::chrono::seconds(1)};  // store_restart: how long etcd stays down
  int line = 0;
};

struct RendezvousSpec {
  // builtin: store_node hosts the built-in store (both transports). etcd (over TCP only): the
  // nodes use etcd at etcd_endpoint, or, when that is empty, at a throwaway etcd that store_node
  // starts (Debian's etcd-server) and names to the others.
  enum class Backend : uint8_t { builtin, etcd };
  Backend backend = Backend::builtin;
  std::string etcd_endpoint;  // "host:port"
  uint32_t store_node = 0;
  rendezvous::RendezvousSettings settings;  // run_id defaults to the scenario's name
  runtime::Duration poll_interval{0};        // 0: event-driven waits; > 0: PyTorch's polling
  // PyTorch's c10d rendezvous backend reads with a 60 s timeout.
  runtime::Duration store_timeout{std::chrono::seconds(60)};
  // How often an agent asks num_nodes_waiting (PyTorch's monitor_interval).
  runtime::Duration monitor_interval{std::chrono::seconds(1)};
  // When participants still running shut down (the job's end), on the scenario's clock.
  runtime::Duration duration{std::chrono::seconds(60)};
  std::vector<RendezvousAction> actions;  // in the file's order

  bool is_participant(uint32_t node) const { return node != store_node; }
  // The node's first action of `kind`, if any.
  std::optional<runtime::Duration> action_time(uint32_t node, RendezvousAction::Kind kind) const {
    for (const RendezvousAction& a : actions) {
      if (a.node == node && a.kind == kind) return a.at;
    }
    return std::nullopt;
  }
};

}  // namespace dagsim::scenarios
