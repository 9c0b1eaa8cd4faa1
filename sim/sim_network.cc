#include "sim/sim_network.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/base/assert.h"
#include "core/base/hash.h"
#include "core/base/probe.h"
#include "sim/sim_world.h"

namespace dagsim::sim {

using runtime::Delivery;

SimNetwork::SimNetwork(SimWorld& world, NetworkModel model) : world_(world), model_(std::move(model)) {}

void SimNetwork::drop(WorkerId from, WorkerId to, uint64_t message_id, std::string_view why) {
  ++stats_.dropped;
  world_.trace().record(world_.now(), from, TraceKind::drop,
                        "to " + world_.node_name(to) + ": " + std::string(why), message_id, to);
}

void SimNetwork::send(WorkerId source, uint32_t incarnation, WorkerId target, Bytes payload, uint64_t padding) {
  // A target can come off the wire (an RRef's owner in a fork): an operating error, not an assert.
  if (target >= world_.num_nodes()) {
    throw errors::invalid_argument("send to node " + std::to_string(target) + ": the cluster has " +
                                   std::to_string(world_.num_nodes()) + " nodes");
  }
  DAGSIM_ASSERT_MSG(target != source, "a node cannot send to itself");
  const NodeState source_state = world_.state(source);
  const uint64_t id = ++next_message_;
  ++stats_.sent;
  const uint64_t bytes = payload.size() + padding;  // padding is charged, never held
  stats_.bytes_sent += bytes;
  // The digest covers the bytes themselves, so the determinism self-check sees a payload that
  // differs between runs (an unordered map serialised, uninitialised padding), not just its size.
  const uint64_t digest = xxh3_64(payload);
  world_.trace().record_lazy(world_.now(), source, TraceKind::send, digest, id, target, [&] {
    return "to " + world_.node_name(target) + " " + std::to_string(bytes) + "B";
  });
  // A fiber of a dead incarnation unwinding past a send: the process is gone, so is the message.
  if ((source_state != NodeState::up && source_state != NodeState::paused) ||
      world_.incarnation(source) != incarnation) {
    drop(source, target, id, "sender is no longer running");
    return;
  }
  const Key key = key_of(source, target);
  const int side = side_of(key, source);
  const int dir = side;  // direction 0 is low -> high, which is what side 0 sends
  Connection& conn = connection(key);
  if (!conn.notices[side].empty()) {
    // Whatever connection the sender believes in has failed, and it has not been told yet.
    drop(source, target, id, "connection failed; the sender has not learned it yet");
    return;
  }
  if (!conn.open) {
    const NodeState target_state = world_.state(target);
    if (target_state == NodeState::not_started || target_state == NodeState::killed) {
      drop(source, target, id, "connection refused");
      world_.note_connection_refused(source, target);
      const std::string refused = "connection refused: " + world_.node_name(target) + " is not running";
      if (blocked(source, target) || blocked(target, source)) {
        DAGSIM_PROBE("sim.refused_behind_partition");
        // Neither the connection attempt nor a reset crosses a partition: the attempt times out,
        // unless the partition heals first and a retried attempt meets the refusal.
        notify(key, side, world_.incarnation(target), "connection to " + world_.node_name(target) + " timed out",
               world_.now() + model_.connection_timeout, refused);
      } else {
        notify(key, side, world_.incarnation(target), refused,
               world_.now() + model_.latency_for(target, source).sample(world_.random_stream()));
      }
      return;
    }
    // Open: a crashed target is still "there" as far as the sender knows; its traffic is held.
    conn.open = true;
    conn.incarnation[side] = incarnation;
    conn.incarnation[1 - side] = world_.incarnation(target);
    conn.direction[0] = Direction{};
    conn.direction[1] = Direction{};
  }
  DAGSIM_ASSERT_MSG(conn.incarnation[side] == incarnation, "a connection outlived its incarnation");
  Direction& d = conn.direction[dir];
  const std::optional<TimePoint> arrival =
      d.queue.admit(world_.now(), bytes, model_, source, target, world_.random_stream());
  if (!arrival) {
    DAGSIM_PROBE("sim.connection_failure_injected");
    drop(source, target, id, "injected connection failure");
    fail(key, conn, "failed (injected)", true);
    return;
  }
  uint32_t slot;
  if (!free_in_flight_.empty()) {
    slot = free_in_flight_.back();
    free_in_flight_.pop_back();
  } else {
    slot = static_cast<uint32_t>(in_flight_.size());
    in_flight_.emplace_back();
  }
  in_flight_[slot] = InFlight{key, &conn, conn.generation, dir, Message{id, std::move(payload), padding}};
  world_.world_clock().post_at(
      *arrival, [](void* network, uint64_t slot) { static_cast<SimNetwork*>(network)->arrive(static_cast<uint32_t>(slot)); },
      this, slot);
}

namespace {
// Fibonacci hashing: the key's bits spread over the index's top bits, one multiply.
size_t index_slot(uint32_t packed, int bits) {
  return static_cast<size_t>((packed * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}
uint32_t pack(WorkerId low, WorkerId high) { return (static_cast<uint32_t>(low) << 16 | high) + 1; }  // never 0
}  // namespace

SimNetwork::Connection& SimNetwork::connection(Key key) {
  const uint32_t packed = pack(key.first, key.second);
  if (index_bits_ > 0) {
    const size_t mask = index_.size() - 1;
    for (size_t i = index_slot(packed, index_bits_);; i = (i + 1) & mask) {
      const IndexSlot& slot = index_[i];
      if (slot.packed == packed) return *slot.conn;
      if (slot.packed == 0) break;
    }
  }
  Connection& conn = connections_.emplace_back();
  connection_keys_.push_back(key);
  // Keep the index at most half full: rebuild it twice as large from the keys.
  if (2 * connections_.size() > index_.size()) {
    index_bits_ = index_bits_ == 0 ? 6 : index_bits_ + 1;
    index_.assign(size_t{1} << index_bits_, IndexSlot{});
    for (size_t position = 0; position + 1 < connections_.size(); ++position) {
      const Key& k = connection_keys_[position];
      insert_index(pack(k.first, k.second), &connections_[position]);
    }
  }
  insert_index(packed, &conn);
  return conn;
}

void SimNetwork::insert_index(uint32_t packed, Connection* conn) {
  size_t i = index_slot(packed, index_bits_);
  while (index_[i].packed != 0) i = (i + 1) & (index_.size() - 1);
  index_[i] = IndexSlot{packed, conn};
}

std::vector<SimNetwork::Key> SimNetwork::sorted_keys() const {
  std::vector<Key> keys = connection_keys_;
  std::sort(keys.begin(), keys.end());
  return keys;
}

bool SimNetwork::blocked(WorkerId from, WorkerId to) const {
  for (const auto& [id, pairs] : partitions_) {
    if (pairs.count({from, to}) != 0) return true;
  }
  return false;
}

bool SimNetwork::must_hold(WorkerId from, WorkerId to) const {
  return world_.state(to) == NodeState::crashed || blocked(from, to);
}

void SimNetwork::arrive(uint32_t in_flight_slot) {
  InFlight& flight = in_flight_[in_flight_slot];
  const Key key = flight.key;
  const uint64_t generation = flight.generation;
  const int dir = flight.dir;
  Message message = std::move(flight.message);
  free_in_flight_.push_back(in_flight_slot);
  const WorkerId from = dir == 0 ? key.first : key.second;
  const WorkerId to = dir == 0 ? key.second : key.first;
  Connection& conn = *flight.conn;
  if (!conn.open || conn.generation != generation) {
    drop(from, to, message.id, "lost with its connection");
    return;
  }
  Direction& d = conn.direction[dir];
  if (!d.held.empty() || must_hold(from, to)) {
    // Held traffic waits on its sender's retransmissions; a sender that is gone sends no more.
    const NodeState sender = world_.state(from);
    if ((sender != NodeState::up && sender != NodeState::paused) || world_.incarnation(from) != conn.incarnation[dir]) {
      drop(from, to, message.id, "its sender died before it got through");
      return;
    }
    if (blocked(from, to)) DAGSIM_PROBE("sim.held_by_partition");
    hold(conn, key, dir, std::move(message));
    return;
  }
  hand_over(key, conn, dir, std::move(message));
}

void SimNetwork::hand_over(Key key, Connection& conn, int dir, Message&& message) {
  const WorkerId from = dir == 0 ? key.first : key.second;
  const WorkerId to = dir == 0 ? key.second : key.first;
  // A message of a newer connection reaching an end that has not learned of an older one's
  // failure: its handshake names the peer's incarnation, so the end learns now, before reading it.
  if (!conn.notices[1 - dir].empty()) tell(key, 1 - dir, conn.notices[1 - dir].back().serial);
  const uint32_t target_incarnation = conn.incarnation[1 - dir];
  const uint64_t id = message.id;
  const uint64_t bytes = message.payload.size() + message.padding;
  if (!world_.deliver_made(to, target_incarnation, [&] {
        return Delivery{Delivery::Kind::message, from, std::move(message.payload), {}, conn.incarnation[dir], message.padding};
      })) {
    drop(from, to, id, "receiver is no longer running");
    return;
  }
  ++stats_.delivered;
  world_.trace().record_lazy(world_.now(), to, TraceKind::deliver, bytes, id, from, [&] {
    return "from " + world_.node_name(from) + " " + std::to_string(bytes) + "B";
  });
}

void SimNetwork::hold(Connection& conn, Key key, int dir, Message message) {
  const WorkerId from = dir == 0 ? key.first : key.second;
  const WorkerId to = dir == 0 ? key.second : key.first;
  Direction& d = conn.direction[dir];
  ++stats_.held;
  world_.trace().record_lazy(world_.now(), to, TraceKind::hold, message.payload.size() + message.padding, message.id, from,
                             [&] { return "from " + world_.node_name(from) + " (held)"; });
  d.held.push_back(std::move(message));
  if (d.silence_timer == 0) {
    d.silence_timer = world_.world_clock().call_at(
        world_.now() + model_.connection_timeout, [this, key, generation = conn.generation, dir] {
          Connection& c = connection(key);
          if (!c.open || c.generation != generation) return;
          c.direction[dir].silence_timer = 0;
          DAGSIM_PROBE("sim.silent_connection_timed_out");
          fail(key, c, "timed out (no traffic got through)", false);
        });
  }
}

void SimNetwork::release_held(Key key, Connection& conn) {
  for (int dir = 0; dir < 2; ++dir) {
    Direction& d = conn.direction[dir];
    if (d.held.empty()) continue;
    const WorkerId from = dir == 0 ? key.first : key.second;
    const WorkerId to = dir == 0 ? key.second : key.first;
    if (must_hold(from, to)) continue;
    world_.world_clock().cancel(d.silence_timer);
    d.silence_timer = 0;
    std::vector<Message> held = std::move(d.held);
    d.held.clear();
    for (Message& message : held) hand_over(key, conn, dir, std::move(message));
  }
}

void SimNetwork::on_resume_or_heal() {
  for (const Key& key : sorted_keys()) {
    Connection& conn = connection(key);
    if (conn.open) release_held(key, conn);
    hasten_notices(key, conn);
  }
}

void SimNetwork::fail(Key key, Connection& conn, const std::string& what, bool delay_by_latency) {
  DAGSIM_ASSERT(conn.open);
  ++stats_.connection_failures;
  world_.note_connection_failure(key.first, key.second, "connection " + what);
  for (int dir = 0; dir < 2; ++dir) {
    Direction& d = conn.direction[dir];
    const WorkerId from = dir == 0 ? key.first : key.second;
    const WorkerId to = dir == 0 ? key.second : key.first;
    for (const Message& message : d.held) drop(from, to, message.id, "lost with its connection");
    d.held.clear();
    if (d.silence_timer != 0) world_.world_clock().cancel(d.silence_timer);
    d.silence_timer = 0;
  }
  conn.open = false;
  ++conn.generation;  // in-flight arrivals of this connection are now stale: lost
  for (int side = 0; side < 2; ++side) {
    const WorkerId self = side == 0 ? key.first : key.second;
    const WorkerId peer = side == 0 ? key.second : key.first;
    const NodeState state = world_.state(self);
    if ((state != NodeState::up && state != NodeState::paused) || world_.incarnation(self) != conn.incarnation[side]) {
      continue;  // that end is gone; nobody to tell
    }
    TimePoint when = world_.now();
    if (delay_by_latency && blocked(peer, self)) {
      DAGSIM_PROBE("sim.reset_behind_partition");
      // The reset cannot cross the partition: this end finds out by its own timeout, or from the
      // reset once the partition heals.
      notify(key, side, conn.incarnation[1 - side], "connection to " + world_.node_name(peer) + " timed out",
             when + model_.connection_timeout, "connection to " + world_.node_name(peer) + " " + what);
    } else {
      if (delay_by_latency) when = when + model_.latency_for(peer, self).sample(world_.random_stream());
      notify(key, side, conn.incarnation[1 - side], "connection to " + world_.node_name(peer) + " " + what, when);
    }
  }
}

void SimNetwork::notify(Key key, int side, uint32_t peer_incarnation, std::string reason, TimePoint when,
                        std::string reason_after_heal) {
  const uint64_t serial = ++next_notice_;
  const runtime::TimerId timer =
      world_.world_clock().call_at(when, [this, key, side, serial] { tell(key, side, serial); });
  connection(key).notices[side].push_back(
      Notice{serial, peer_incarnation, std::move(reason), std::move(reason_after_heal), when, timer});
}

void SimNetwork::tell(Key key, int side, uint64_t serial) {
  const WorkerId self = side == 0 ? key.first : key.second;
  const WorkerId peer = side == 0 ? key.second : key.first;
  std::vector<Notice>& notices = connection(key).notices[side];
  DAGSIM_ASSERT_MSG(world_.state(self) == NodeState::up || world_.state(self) == NodeState::paused,
                    "a failure notice outlived the incarnation it was for");
  size_t told = 0;
  while (told < notices.size() && notices[told].serial <= serial) ++told;
  std::vector<Notice> now(std::make_move_iterator(notices.begin()), std::make_move_iterator(notices.begin() + told));
  notices.erase(notices.begin(), notices.begin() + told);
  for (Notice& notice : now) {
    world_.world_clock().cancel(notice.timer);  // a no-op for the one firing now
    world_.trace().record(world_.now(), self, TraceKind::connection, notice.reason, 0, peer);
    world_.deliver(self, world_.incarnation(self),
                   Delivery{Delivery::Kind::peer_failed, peer, {}, std::move(notice.reason), notice.peer_incarnation, 0});
  }
}

void SimNetwork::hasten_notices(Key key, Connection& conn) {
  for (int side = 0; side < 2; ++side) {
    const WorkerId self = side == 0 ? key.first : key.second;
    const WorkerId peer = side == 0 ? key.second : key.first;
    if (blocked(peer, self) || blocked(self, peer)) continue;
    for (Notice& notice : conn.notices[side]) {
      if (notice.reason_after_heal.empty()) continue;
      // The end's next retransmission (or retried connection attempt) meets the reset.
      const TimePoint when = world_.now() + model_.latency_for(peer, self).sample(world_.random_stream());
      if (when >= notice.at) continue;
      world_.world_clock().cancel(notice.timer);
      notice.reason = std::move(notice.reason_after_heal);
      notice.reason_after_heal.clear();
      notice.at = when;
      notice.timer = world_.world_clock().call_at(when, [this, key, side, serial = notice.serial] {
        tell(key, side, serial);
      });
    }
  }
}

void SimNetwork::forget_notices(WorkerId node) {
  for (const Key& key : sorted_keys()) {
    if (key.first != node && key.second != node) continue;
    std::vector<Notice>& notices = connection(key).notices[side_of(key, node)];
    for (const Notice& notice : notices) world_.world_clock().cancel(notice.timer);
    notices.clear();
  }
}

void SimNetwork::on_kill(WorkerId node) {
  forget_notices(node);
  for (const Key& key : sorted_keys()) {
    Connection& conn = connection(key);
    if (!conn.open || (key.first != node && key.second != node)) continue;
    fail(key, conn, "reset: " + world_.node_name(node) + " died", true);
  }
}

void SimNetwork::on_crash(WorkerId node) {
  forget_notices(node);
  for (const Key& key : sorted_keys()) {
    Connection& conn = connection(key);
    if (!conn.open || (key.first != node && key.second != node)) continue;
    const int dir = side_of(key, node);  // the direction this node sends on
    Direction& d = conn.direction[dir];
    const WorkerId to = dir == 0 ? key.second : key.first;
    for (const Message& message : d.held) drop(node, to, message.id, "its sender crashed before it got through");
    d.held.clear();
    if (d.silence_timer != 0) world_.world_clock().cancel(d.silence_timer);
    d.silence_timer = 0;
  }
}

void SimNetwork::on_restart(WorkerId node) {
  forget_notices(node);
  for (const Key& key : sorted_keys()) {
    Connection& conn = connection(key);
    if (!conn.open || (key.first != node && key.second != node)) continue;
    fail(key, conn, "reset: " + world_.node_name(node) + " restarted", true);
  }
}

uint64_t SimNetwork::add_partition(uint64_t id, std::vector<std::pair<WorkerId, WorkerId>> blocked) {
  partitions_[id] = std::set<std::pair<WorkerId, WorkerId>>(blocked.begin(), blocked.end());
  return id;
}

void SimNetwork::remove_partition(uint64_t id) {
  partitions_.erase(id);
  on_resume_or_heal();
}

void SimNetwork::remove_all_partitions() {
  partitions_.clear();
  on_resume_or_heal();
}

}  // namespace dagsim::sim
