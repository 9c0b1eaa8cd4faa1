#include "core/rendezvous/rendezvous_state.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/base/planted.h"
#include "core/base/printable.h"
#include "core/rpc/wire.h"

namespace dagsim::rendezvous {

namespace {

using rpc::WireReader;
using rpc::WireWriter;

// The layout's version: the first byte, so a later layout is refused by name, not misread.
constexpr uint8_t kStateVersion = 2;  // 2: world_size
// The fewest bytes one node takes on the wire: its address's length, pid and local_id.
constexpr size_t kNodeBytes = 4 + 8 + 8;

void write_node(WireWriter& w, const NodeDesc& node) {
  w.str("rendezvous_state.node.addr", node.addr, kMaxNodeAddr);
  w.num("rendezvous_state.node.pid", node.pid);
  w.num("rendezvous_state.node.local_id", node.local_id);
}

// One list entry, its node and then `extra_bytes` of `extra` (a rank, a heartbeat; 0 bytes for
// none), appended in one go: the very bytes write_node() and WireWriter::num() write, little end
// first, without their per-byte appends (encode was a tenth of a 1,000-node formation).
void append_entry(runtime::Bytes& out, const NodeDesc& node, uint64_t extra, size_t extra_bytes) {
  if (node.addr.size() > kMaxNodeAddr) {
    WireWriter w(out);
    write_node(w, node);  // throws the writer's error for an over-long address
  }
  DAGSIM_ASSERT(extra_bytes == 0 || extra_bytes == 4 || extra_bytes == 8);
  uint8_t entry[4 + kMaxNodeAddr + 8 + 8 + 8];
  uint8_t* p = entry;
  const auto put = [&p](uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  };
  put(node.addr.size(), 4);
  std::memcpy(p, node.addr.data(), node.addr.size());
  p += node.addr.size();
  put(node.pid, 8);
  put(node.local_id, 8);
  put(extra, extra_bytes);
  out.insert(out.end(), entry, p);
}

// The names a list's node fields go by in errors ("rendezvous_state.wait_list.pid"), built once
// per list rather than once per node.
struct NodeFields {
  explicit NodeFields(const std::string& list) : addr(list + ".addr"), pid(list + ".pid"), local_id(list + ".local_id") {}
  std::string addr, pid, local_id;
};

NodeDesc read_node(WireReader& r, const NodeFields& fields) {
  NodeDesc node;
  r.str(fields.addr.c_str(), node.addr, kMaxNodeAddr);
  r.num(fields.pid.c_str(), node.pid);
  r.num(fields.local_id.c_str(), node.local_id);
  return node;
}

void write_count(WireWriter& w, size_t n) {
  // Encoding never makes what decoding refuses. The settings bound max_nodes, but the lists hold
  // whatever the store held: a state written by someone else (anyone may write a TCPStore's key)
  // with 65536 heartbeats gains one more when this node joins. Its error, not an assertion.
  if (n > kMaxRendezvousNodes) {
    throw errors::protocol_error("rendezvous state: a list of " + std::to_string(n) + " nodes, more than the " +
                                 std::to_string(kMaxRendezvousNodes) + " a state holds (the stored state was not " +
                                 "written by these settings)");
  }
  w.u32(static_cast<uint32_t>(n));
}

const NodeDesc& node_of(const NodeDesc& node) { return node; }
template <typename V>
const NodeDesc& node_of(const std::pair<NodeDesc, V>& entry) {
  return entry.first;
}

// Reads a list of `entry_bytes`-or-more entries, each starting with a node, in strictly
// increasing node order (the canonical form: no repeats, one encoding per state). `each` reads
// the rest of the entry and appends it to `list`, a vector reserved for the count once it is known
// to fit in the bytes left, so each list is one allocation.
template <typename List, typename Each>
void read_nodes(WireReader& r, const std::string& field, size_t entry_bytes, List& list, Each each) {
  const uint32_t n = r.length(field.c_str(), "count", kMaxRendezvousNodes);
  if (n > r.remaining() / entry_bytes) {
    throw errors::protocol_error(field + ": count " + std::to_string(n) + " cannot fit in " +
                                 std::to_string(r.remaining()) + " bytes (truncated or forged)");
  }
  list.reserve(n);
  DAGSIM_ASSERT(entry_bytes >= kNodeBytes);
  const NodeFields fields(field);
  const NodeDesc* previous = nullptr;  // the last node `each` appended (list is reserved: it stays put)
  for (uint32_t i = 0; i < n; ++i) {
    NodeDesc node = read_node(r, fields);
    if (previous != nullptr && !(*previous < node)) {
      throw errors::protocol_error(field + ": node " + printable(to_string(node)) + " is out of order or repeated");
    }
    each(std::move(node));
    previous = list.empty() ? nullptr : &node_of(list.back());
  }
}

void append_nodes(std::ostringstream& out, const ChunkedSortedSet<NodeDesc>& nodes) {
  out << "{";
  const char* sep = "";
  for (const NodeDesc& node : nodes) {
    out << sep << node;
    sep = ", ";
  }
  out << "}";
}

}  // namespace

std::string to_string(const NodeDesc& node) {
  return node.addr + "_" + std::to_string(node.pid) + "_" + std::to_string(node.local_id);
}

std::ostream& operator<<(std::ostream& out, const NodeDesc& node) { return out << to_string(node); }

std::string to_string(const RendezvousState& state) {
  std::ostringstream out;
  out << "round " << state.round << (state.complete ? " complete" : " incomplete") << (state.closed ? " closed" : "");
  if (state.deadline) out << " deadline " << state.deadline->ns() << "ns";
  if (state.rerendezvous_requested) out << " rerendezvous_requested";
  if (state.complete) out << " world " << state.world_size;
  out << " participants {";
  const char* sep = "";
  for (const auto& [node, rank] : state.participants) {
    out << sep << node << ":" << rank;
    sep = ", ";
  }
  out << "} wait_list ";
  append_nodes(out, state.wait_list);
  out << " redundancy_list ";
  append_nodes(out, state.redundancy_list);
  out << " last_heartbeats {";
  sep = "";
  for (const auto& [node, last] : state.last_heartbeats) {
    out << sep << node << "@" << last.ns() << "ns";
    sep = ", ";
  }
  out << "}";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const RendezvousState& state) { return out << to_string(state); }

uint64_t num_nodes_waiting(const RendezvousState& state) {
  // The request exists only in a complete round (structural_violation), where it stands for the
  // dead participant's seat: see Note [re-rendezvous on expiry].
  DAGSIM_ASSERT(!state.rerendezvous_requested || state.complete);
  return state.wait_list.size() + (state.rerendezvous_requested ? 1 : 0);
}

namespace {

// S5 in one merge walk (every container is in node order): each heartbeat's node on exactly one
// list, and no list member left without a heartbeat. Equivalent to the lookups below, which run
// only when this fails, to name the first offender; at 1,000 nodes those lookups were most of
// every encode and decode.
bool lists_match_heartbeats(const RendezvousState& state) {
  auto p = state.participants.begin();
  auto w = state.wait_list.begin();
  auto r = state.redundancy_list.begin();
  for (const auto& [node, last] : state.last_heartbeats) {
    const bool in_p = p != state.participants.end() && p->first == node;
    const bool in_w = w != state.wait_list.end() && *w == node;
    const bool in_r = r != state.redundancy_list.end() && *r == node;
    if (int{in_p} + int{in_w} + int{in_r} != 1) return false;
    // A member that sorts before this heartbeat's node has none of its own.
    if ((!in_p && p != state.participants.end() && p->first < node) ||
        (!in_w && w != state.wait_list.end() && *w < node) ||
        (!in_r && r != state.redundancy_list.end() && *r < node)) {
      return false;
    }
    p = in_p ? std::next(p) : p;
    w = in_w ? std::next(w) : w;
    r = in_r ? std::next(r) : r;
  }
  return p == state.participants.end() && w == state.wait_list.end() && r == state.redundancy_list.end();
}

std::optional<std::string> membership_violation(const RendezvousState& state) {
  const auto named = [](const NodeDesc& node) { return printable(to_string(node)); };
  for (const NodeDesc& node : state.wait_list) {
    if (state.participants.contains(node)) {
      return "rendezvous_state.wait_list: node " + named(node) + " is also a participant";
    }
  }
  for (const NodeDesc& node : state.redundancy_list) {
    if (state.participants.contains(node)) {
      return "rendezvous_state.redundancy_list: node " + named(node) + " is also a participant";
    }
    if (state.wait_list.contains(node)) {
      return "rendezvous_state.redundancy_list: node " + named(node) + " is also on the wait list";
    }
  }
  for (const auto& [node, last] : state.last_heartbeats) {
    if (!state.participants.contains(node) && !state.wait_list.contains(node) && !state.redundancy_list.contains(node)) {
      return "rendezvous_state.last_heartbeats: node " + named(node) + " is on no list";
    }
  }
  // Disjoint lists, each member with a heartbeat, no other heartbeats: the sizes add up exactly.
  if (state.last_heartbeats.size() !=
      state.participants.size() + state.wait_list.size() + state.redundancy_list.size()) {
    for (const auto& [node, rank] : state.participants) {
      if (!state.last_heartbeats.contains(node)) {
        return "rendezvous_state.participants: node " + named(node) + " has no heartbeat";
      }
    }
    for (const NodeDesc& node : state.wait_list) {
      if (!state.last_heartbeats.contains(node)) {
        return "rendezvous_state.wait_list: node " + named(node) + " has no heartbeat";
      }
    }
    return "rendezvous_state.redundancy_list: a node has no heartbeat";
  }
  // The walk and these lookups disagree: a bug in one of them.
  DAGSIM_ASSERT_MSG(false, "lists_match_heartbeats refused a state the lookups accept: " + to_string(state));
  return std::nullopt;
}

std::optional<std::string> round_violation(const RendezvousState& state) {
  const auto named = [](const NodeDesc& node) { return printable(to_string(node)); };
  if (state.complete) {
    // S4: completion clears the last-call deadline. A complete round always has a participant:
    // the epilogue advances the round when the last one leaves.
    if (state.deadline) return "rendezvous_state.deadline: set in a complete round";
    if (state.participants.empty()) return "rendezvous_state.participants: none in a complete round";
    if (state.world_size < state.participants.size() || state.world_size > kMaxRendezvousNodes) {
      return "rendezvous_state.world_size: " + std::to_string(state.world_size) + " for " +
             std::to_string(state.participants.size()) + " participants";
    }
    std::vector<bool> ranks(state.world_size, false);  // world_size <= kMaxRendezvousNodes, checked above
    for (const auto& [node, rank] : state.participants) {
      if (rank >= state.world_size || ranks[rank]) {
        return "rendezvous_state.participants: rank " + std::to_string(rank) + " of node " + named(node) +
               " is out of range or repeated";
      }
      ranks[rank] = true;
    }
  } else {
    for (const auto& [node, rank] : state.participants) {
      if (rank != 0) {
        return "rendezvous_state.participants: rank " + std::to_string(rank) + " of node " + named(node) +
               " before completion";
      }
    }
    if (state.rerendezvous_requested) return "rendezvous_state.rerendezvous_requested: set in an incomplete round";
    if (state.world_size != 0) return "rendezvous_state.world_size: set in an incomplete round";
  }
  // S6: the round can always advance (a wrapped round would go back to 0).
  if (state.round == std::numeric_limits<uint64_t>::max()) return "rendezvous_state.round: no next round";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> structural_violation(const RendezvousState& state) {
  // S5: the lists are pairwise disjoint, and the heartbeats are exactly theirs.
  if (!lists_match_heartbeats(state)) {
    if (std::optional<std::string> why = membership_violation(state)) return why;
  }
  return round_violation(state);
}

bool is_quiet_change(const RendezvousState& before, const RendezvousState& after) {
  if (before.round != after.round || before.complete != after.complete || before.closed != after.closed ||
      before.deadline != after.deadline || before.world_size != after.world_size ||
      before.rerendezvous_requested != after.rerendezvous_requested) {
    return false;
  }
  // Every node of `before` is still there, a participant with the same rank; the lists are sorted
  // alike (node order), so each check is one merge walk.
  auto same_node = [](const auto& a, const auto& b) { return a.first < b.first; };
  return std::includes(after.participants.begin(), after.participants.end(), before.participants.begin(),
                       before.participants.end()) &&
         std::includes(after.wait_list.begin(), after.wait_list.end(), before.wait_list.begin(), before.wait_list.end()) &&
         std::includes(after.redundancy_list.begin(), after.redundancy_list.end(), before.redundancy_list.begin(),
                       before.redundancy_list.end()) &&
         std::includes(after.last_heartbeats.begin(), after.last_heartbeats.end(), before.last_heartbeats.begin(),
                       before.last_heartbeats.end(), same_node);
}

namespace {

// The exact length encode() writes, so its buffer is allocated once: at 1,000 nodes a state is
// 100 KB and growing it by doubling copied it twice over and faulted in fresh pages each time.
size_t encoded_size(const RendezvousState& state) {
  const auto node_bytes = [](const NodeDesc& node) { return 4 + node.addr.size() + 8 + 8; };
  size_t n = 1 + 8 + 1 + 1 + 1 + (state.deadline ? 8 : 0) + 1 + 4 + 4 * 4;
  for (const auto& [node, rank] : state.participants) n += node_bytes(node) + 4;
  for (const NodeDesc& node : state.wait_list) n += node_bytes(node);
  for (const NodeDesc& node : state.redundancy_list) n += node_bytes(node);
  for (const auto& [node, last] : state.last_heartbeats) n += node_bytes(node) + 8;
  return n;
}

}  // namespace

runtime::Bytes encode(const RendezvousState& state) {
  DAGSIM_ASSERT_MSG(!structural_violation(state), structural_violation(state).value_or(""));
  runtime::Bytes out;
  const size_t size = encoded_size(state);
  out.reserve(size);
  WireWriter w(out);
  w.u8(kStateVersion);
  w.num("rendezvous_state.round", state.round);
  w.num("rendezvous_state.complete", state.complete);
  w.num("rendezvous_state.closed", state.closed);
  w.num("rendezvous_state.has_deadline", state.deadline.has_value());
  if (state.deadline) w.num("rendezvous_state.deadline", state.deadline->since_epoch.count());
  w.num("rendezvous_state.rerendezvous_requested", state.rerendezvous_requested);
  w.num("rendezvous_state.world_size", state.world_size);
  // The flat lists iterate in node order: the canonical order decode() demands.
  write_count(w, state.participants.size());
  for (const auto& [node, rank] : state.participants) append_entry(out, node, rank, sizeof(rank));
  write_count(w, state.wait_list.size());
  for (const NodeDesc& node : state.wait_list) append_entry(out, node, 0, 0);
  write_count(w, state.redundancy_list.size());
  for (const NodeDesc& node : state.redundancy_list) append_entry(out, node, 0, 0);
  write_count(w, state.last_heartbeats.size());
  for (const auto& [node, last] : state.last_heartbeats) {
    append_entry(out, node, static_cast<uint64_t>(last.since_epoch.count()), 8);
  }
  DAGSIM_ASSERT_EQ(out.size(), size);  // paired with encoded_size()
  return out;
}

RendezvousState decode(std::span<const uint8_t> bytes, const RendezvousState* base) {
  WireReader r(bytes);
  const uint8_t version = r.u8("rendezvous_state.version");
  if (version != kStateVersion) {
    throw errors::protocol_error("rendezvous_state.version: " + std::to_string(version) + ", expected " +
                                 std::to_string(kStateVersion));
  }
  RendezvousState state;
  r.num("rendezvous_state.round", state.round);
  r.num("rendezvous_state.complete", state.complete);
  r.num("rendezvous_state.closed", state.closed);
  bool has_deadline = false;
  r.num("rendezvous_state.has_deadline", has_deadline);
  if (has_deadline) state.deadline = TimePoint{Duration(r.i64("rendezvous_state.deadline"))};
  r.num("rendezvous_state.rerendezvous_requested", state.rerendezvous_requested);
  r.num("rendezvous_state.world_size", state.world_size);
  // Each list is read into one vector, then cut into chunks: those equal to the base's are the
  // base's, shared (chunked_sorted.h), so a state one join away from its base costs a few chunks.
  std::vector<std::pair<NodeDesc, uint32_t>> participants;
  read_nodes(r, "rendezvous_state.participants", kNodeBytes + 4, participants, [&](NodeDesc&& node) {
    uint32_t rank = 0;
    r.num("rendezvous_state.participants.rank", rank);
    participants.emplace_back(std::move(node), rank);
  });
  std::vector<NodeDesc> wait_list;
  read_nodes(r, "rendezvous_state.wait_list", kNodeBytes, wait_list,
             [&](NodeDesc&& node) { wait_list.push_back(std::move(node)); });
  std::vector<NodeDesc> redundancy_list;
  read_nodes(r, "rendezvous_state.redundancy_list", kNodeBytes, redundancy_list,
             [&](NodeDesc&& node) { redundancy_list.push_back(std::move(node)); });
  std::vector<std::pair<NodeDesc, TimePoint>> last_heartbeats;
  read_nodes(r, "rendezvous_state.last_heartbeats", kNodeBytes + 8, last_heartbeats, [&](NodeDesc&& node) {
    const TimePoint last{Duration(r.i64("rendezvous_state.last_heartbeats.time"))};
    last_heartbeats.emplace_back(std::move(node), last);
  });
  state.participants.assign_sorted(std::move(participants), base ? &base->participants : nullptr);
  state.wait_list.assign_sorted(std::move(wait_list), base ? &base->wait_list : nullptr);
  state.redundancy_list.assign_sorted(std::move(redundancy_list), base ? &base->redundancy_list : nullptr);
  state.last_heartbeats.assign_sorted(std::move(last_heartbeats), base ? &base->last_heartbeats : nullptr);
  r.expect_end("rendezvous_state");
  if (std::optional<std::string> violation = structural_violation(state)) throw errors::protocol_error(*violation);
  // Paired with encode(): what decode accepts, encode writes back byte for byte.
  DAGSIM_ASSERT(r.position() == bytes.size());
  return state;
}

RendezvousState remove_participant_epilogue(RendezvousState state, const RendezvousSettings& settings) {
  const uint64_t round_before = state.round;
  if (state.complete) {
    // The last participant of a complete round left: the next round begins (S6: +1, only here).
    if (state.participants.empty()) {
      DAGSIM_PROBE("rendezvous.last_participant_left_round_advanced");
      DAGSIM_ASSERT(state.round < std::numeric_limits<uint64_t>::max());
      state.complete = false;
      state.round += 1;
      state.rerendezvous_requested = false;  // the survivors have all left: the request is met
      state.world_size = 0;
    }
  } else if (state.participants.size() < settings.min_nodes) {
    // S4: below min there is no last call to wait for.
    if (state.deadline) DAGSIM_PROBE("rendezvous.last_call_cancelled_below_min");
    state.deadline.reset();
  }
  DAGSIM_ASSERT(!state.rerendezvous_requested || state.complete);
  // S6: +1 exactly when the round emptied, never back; S4: below min, no last call.
  DAGSIM_ASSERT(state.round == round_before || (state.round == round_before + 1 && !state.complete));
  if (!state.complete && state.participants.size() < settings.min_nodes) DAGSIM_ASSERT(!state.deadline);
  return state;
}

RendezvousState sanitize(RendezvousState state, const RendezvousSettings& settings, TimePoint wall_now,
                         std::vector<NodeDesc>* dead_nodes) {
  // Strict `<`, as the reference gives PyTorch's rule (§1 `_sanitize`, S10): a node is dead iff
  // its last heartbeat < wall_now - interval * attempts. A heartbeat exactly interval * attempts
  // old still counts (the node missed max_attempt heartbeats but not yet one more instant), so
  // with the defaults a node is removed only after strictly more than 15 s of silence. The
  // comparison keeps the heartbeat on one side alone: a forged timestamp cannot overflow it.
  const TimePoint expire_time = wall_now - settings.expiry();
  const uint64_t round_before = state.round;
  const bool closed_before = state.closed;
  std::vector<NodeDesc> dead;
  for (const auto& [node, last] : state.last_heartbeats) {
    if (last < expire_time) dead.push_back(node);  // map order: `dead` is in node order
  }
  bool participant_removed = false;
  for (const NodeDesc& node : dead) {
    state.last_heartbeats.erase(node);
    if (state.participants.erase(node) > 0) {
      DAGSIM_PROBE("rendezvous.participant_expired_by_heartbeat");
      participant_removed = true;
    }
    if (state.wait_list.erase(node) > 0) DAGSIM_PROBE("rendezvous.waiting_node_expired");
    if (state.redundancy_list.erase(node) > 0) DAGSIM_PROBE("rendezvous.spare_expired");
  }
  if (participant_removed) {
    state = remove_participant_epilogue(std::move(state), settings);
    // Still complete means survivors remain (an emptied round advanced in the epilogue): they
    // must re-form without the dead one. See Note [re-rendezvous on expiry].
    // Planted (core/base/planted.h, rendezvous_reform_below_min): survivors re-form only below min.
    const bool reform = !DAGSIM_PLANTED("rendezvous_reform_below_min") || state.participants.size() < settings.min_nodes;
    if (settings.rerendezvous_on_expiry && state.complete && reform) {
      DAGSIM_ASSERT(!state.participants.empty());
      DAGSIM_PROBE("rendezvous.re_rendezvous_on_expiry");
      state.rerendezvous_requested = true;
    }
  }
  for (const auto& [node, last] : state.last_heartbeats) DAGSIM_ASSERT(!(last < expire_time));
  // Sanitize only removes nodes: the round may advance (the last participant expired), never go
  // back, and `closed` stays as it was (S6, S7).
  DAGSIM_ASSERT(state.round >= round_before);
  DAGSIM_ASSERT_EQ(state.closed, closed_before);
  if (dead_nodes != nullptr) *dead_nodes = std::move(dead);
  return state;
}

}  // namespace dagsim::rendezvous
