// The heartbeat workload's node side, its [heartbeat] reader and its registry entry.
#include "scenarios/workloads/heartbeat/heartbeat_workload.h"

#include "core/base/assert.h"
#include "core/rpc/codec.h"
#include "scenarios/format/scenario_keys.h"

namespace dagsim::scenarios {

using runtime::Delivery;
using runtime::Env;
using runtime::TimePoint;

HeartbeatWorkload::HeartbeatWorkload(const Scenario& scenario)
    : scenario_(scenario), spec_(scenario.workload.as<HeartbeatSpec>()) {
  DAGSIM_ASSERT(spec_.monitor < scenario.cluster.nodes);
  DAGSIM_ASSERT(spec_.interval > Duration{0} && spec_.max_attempts > 0);
}

void HeartbeatWorkload::node_main(NodeContext& node) {
  if (node.index() == spec_.monitor) {
    run_monitor(node);
  } else {
    run_sender(node);
  }
}

void HeartbeatWorkload::run_sender(NodeContext& node) {
  Env& env = node.env();
  // Failure notices pile up unread: a sender keeps sending, and its next send opens a new
  // connection. Drain them so a long run does not grow the inbox.
  env.spawner.spawn("drain", [&env] {
    for (;;) env.transport.inbox().pop();
  });
  // Every heartbeat is the same frame: the monitor learns from its arrival, not its contents, so
  // it is encoded once (a sequence number in it would cost an encode and a checksum per send).
  // Its `message_bytes` of payload travel as transport padding (Note [padding on the wire]): they
  // cost bandwidth and time on the link but no memory, so a slow link queueing hundreds of 16 MiB
  // heartbeats holds hundreds of 40-byte frames, not gigabytes.
  rpc::Message heartbeat;
  heartbeat.type = rpc::MessageType::heartbeat;
  const runtime::Bytes frame = rpc::encode(heartbeat);
  DAGSIM_ASSERT(frame.size() + spec_.message_bytes == spec_.frame_bytes());
  for (;;) {
    env.transport.send(spec_.monitor, frame, spec_.message_bytes);
    env.clock.sleep(spec_.interval);
  }
}

void HeartbeatWorkload::run_monitor(NodeContext& node) {
  Env& env = node.env();
  const Duration timeout = spec_.timeout();
  struct Peer {
    TimePoint last_heard;
    bool dead = false;
  };
  // References into the record stay valid: its keys are set once, here.
  nlohmann::json& declarations = node.record()["declarations"] = nlohmann::json::array();
  nlohmann::json& heartbeats_received = node.record()["heartbeats_received"] = 0;
  nlohmann::json& frames_rejected = node.record()["frames_rejected"] = 0;
  // A fresh monitor gives every node a full timeout from its own start.
  std::vector<Peer> peers(scenario_.cluster.nodes, Peer{env.clock.now(), false});
  auto declare = [&](uint32_t peer, bool dead) {
    declarations.push_back({{"time_ns", node.scenario_now().ns()}, {"node", peer}, {"dead", dead}});
    env.log.event(dead ? "declared_dead" : "declared_alive", scenario_.cluster.node_name(peer));
  };
  // Only a well-formed heartbeat frame counts: the detector trusts nothing else on the wire.
  auto is_heartbeat = [&](const Delivery& delivery) {
    if (delivery.kind != Delivery::Kind::message || delivery.peer >= peers.size()) return false;
    try {
      return rpc::decode(delivery.payload).type == rpc::MessageType::heartbeat;
    } catch (const Error& e) {
      DAGSIM_ASSERT(e.code() == ErrorCode::protocol_error);
      frames_rejected = frames_rejected.get<uint64_t>() + 1;
      env.log.event("frame_rejected", e.what());
      return false;
    }
  };
  uint64_t received = 0;
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
      if (is_heartbeat(*delivery)) {
        heartbeats_received = ++received;
        Peer& peer = peers[delivery->peer];
        peer.last_heard = now;
        if (peer.dead) {
          peer.dead = false;
          declare(delivery->peer, false);
        }
      }
      delivery = env.transport.inbox().try_pop();
    }
    for (uint32_t i = 0; i < peers.size(); ++i) {
      if (i == spec_.monitor || peers[i].dead || now < peers[i].last_heard + timeout) continue;
      peers[i].dead = true;
      declare(i, true);
    }
  }
}

namespace {

constexpr std::string_view kKeys[] = {"heartbeat"};
constexpr std::string_view kTableKeys[] = {"monitor", "interval_ms", "max_attempts", "duration_ms", "message_bytes"};
const KeySetRegistration kTableKeysListed{{"[heartbeat]", "", "", kTableKeys}};

void read(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) {
  const detail::Table t{reader.table(*top.get("heartbeat"), "heartbeat"), "heartbeat"};
  reader.check_keys(t, kTableKeys, "keys in [heartbeat]");
  HeartbeatSpec spec;
  spec.monitor = reader.opt_node_ref(t, "monitor").value_or(spec.monitor);
  spec.interval = reader.opt_duration(t, "interval_ms", detail::kPositiveMs).value_or(spec.interval);
  spec.max_attempts = static_cast<uint32_t>(reader.opt_integer(t, "max_attempts", 1, 1000).value_or(spec.max_attempts));
  // A duration past max_virtual_time is legal: the run then fails when it reaches max_virtual_time,
  // which is a verdict about the scenario, not a malformed file.
  spec.duration = reader.opt_duration(t, "duration_ms", detail::kPositiveMs).value_or(spec.duration);
  spec.message_bytes =
      static_cast<uint32_t>(reader.opt_integer(t, "message_bytes", 1, 16'777'216).value_or(spec.message_bytes));
  scenario.workload = WorkloadSpec("heartbeat", spec);
}

std::string summary(const Scenario&) { return "heartbeat"; }

std::unique_ptr<Workload> make(const Scenario& scenario, uint64_t) {
  return std::make_unique<HeartbeatWorkload>(scenario);
}

std::unique_ptr<Judge> make_judge(const Scenario& scenario, const RunRecords& records) {
  return std::make_unique<HeartbeatJudge>(scenario, records);
}

constexpr CheckKind kChecks[] = {
    {"detects_failures", false, false, false, &judge_by<HeartbeatJudge, &HeartbeatJudge::detects_failures>},
    {"no_false_suspicion", false, false, false, &judge_by<HeartbeatJudge, &HeartbeatJudge::no_false_suspicion>},
    {"partition_detected_after_start", false, false, false,
     &judge_by<HeartbeatJudge, &HeartbeatJudge::partition_detected_after_start>},
    {"declared_dead", true, false, false, &judge_by<HeartbeatJudge, &HeartbeatJudge::declared_dead>},
    {"never_declared_dead", true, false, false, &judge_by<HeartbeatJudge, &HeartbeatJudge::never_declared_dead>},
};

}  // namespace

const WorkloadType kHeartbeatWorkload = {
    .name = "heartbeat",
    .keys = kKeys,
    .required = kKeys,
    .shown = "[heartbeat]",
    .to_add = "a [heartbeat] table",
    .read = &read,
    .summary = &summary,
    .make = &make,
    .make_judge = &make_judge,
    .checks = kChecks,
    .fixed_end = [](const Scenario& s) { return s.workload.as<HeartbeatSpec>().duration; },
    .events = {},  // none: its faults strike at times
};

}  // namespace dagsim::scenarios
