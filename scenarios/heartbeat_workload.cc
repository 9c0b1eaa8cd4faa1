#include "scenarios/heartbeat_workload.h"

#include <cstring>

#include "core/base/assert.h"

namespace dagsim::scenarios {

using runtime::Delivery;
using runtime::Env;
using runtime::TimePoint;

HeartbeatWorkload::HeartbeatWorkload(const Scenario& scenario) : scenario_(scenario), spec_(*scenario.heartbeat) {
  DAGSIM_ASSERT(spec_.monitor < scenario.cluster.nodes);
  DAGSIM_ASSERT(spec_.interval > Duration{0} && spec_.max_attempts > 0);
}

sim::SimWorld::NodeMain HeartbeatWorkload::node_main(uint32_t index) {
  if (index == spec_.monitor) return [this](Env& env) { run_monitor(env); };
  return [this](Env& env) { run_sender(env); };
}

void HeartbeatWorkload::run_sender(Env& env) {
  // Failure notices pile up unread: a sender keeps sending, and its next send opens a new
  // connection. Drain them so a long run does not grow the inbox.
  env.spawner.spawn("drain", [&env] {
    for (;;) env.transport.inbox().pop();
  });
  runtime::Bytes heartbeat(spec_.message_bytes, 0);
  for (uint64_t seq = 0;; ++seq) {
    std::memcpy(heartbeat.data(), &seq, std::min<size_t>(sizeof(seq), heartbeat.size()));
    env.transport.send(spec_.monitor, heartbeat);
    env.clock.sleep(spec_.interval);
  }
}

void HeartbeatWorkload::run_monitor(Env& env) {
  DAGSIM_ASSERT_MSG(world_ != nullptr, "install() before the run");
  const uint32_t incarnation = world_->incarnation(env.self);
  const Duration timeout = spec_.timeout();
  struct Peer {
    TimePoint last_heard;
    bool dead = false;
  };
  // A fresh monitor gives every node a full timeout from its own start.
  std::vector<Peer> peers(scenario_.cluster.nodes, Peer{env.clock.now(), false});
  auto record = [&](uint32_t node, bool dead) {
    declarations_.push_back({world_->now(), node, dead, incarnation});
    env.log.event(dead ? "declared_dead" : "declared_alive", scenario_.cluster.node_name(node));
  };
  for (;;) {
    TimePoint deadline = TimePoint::max();
    for (uint32_t i = 0; i < peers.size(); ++i) {
      if (i != spec_.monitor && !peers[i].dead) deadline = std::min(deadline, peers[i].last_heard + timeout);
    }
    std::optional<Delivery> delivery = env.transport.inbox().pop_until(deadline);
    const TimePoint now = env.clock.now();
    // Everything that has arrived counts before any deadline is judged (after a pause, a burst
    // of heartbeats is waiting; judging after the first would declare the rest dead for nothing).
    while (delivery) {
      if (delivery->kind == Delivery::Kind::message && delivery->peer < peers.size()) {
        ++heartbeats_received_;
        Peer& peer = peers[delivery->peer];
        peer.last_heard = now;
        if (peer.dead) {
          peer.dead = false;
          record(delivery->peer, false);
        }
      }
      delivery = env.transport.inbox().try_pop();
    }
    for (uint32_t i = 0; i < peers.size(); ++i) {
      if (i == spec_.monitor || peers[i].dead || now < peers[i].last_heard + timeout) continue;
      peers[i].dead = true;
      record(i, true);
    }
  }
}

nlohmann::json HeartbeatWorkload::results(const sim::SimWorld&) const {
  nlohmann::json declarations = nlohmann::json::array();
  for (const Declaration& d : declarations_) {
    declarations.push_back({{"time_ms", static_cast<double>(d.time.ns()) / 1e6},
                            {"node", scenario_.cluster.node_name(d.node)},
                            {"declared", d.dead ? "dead" : "alive"},
                            {"monitor_incarnation", d.monitor_incarnation}});
  }
  return {{"heartbeat",
           {{"monitor", scenario_.cluster.node_name(spec_.monitor)},
            {"heartbeats_received", heartbeats_received_},
            {"declarations", std::move(declarations)}}}};
}


}  // namespace dagsim::scenarios
