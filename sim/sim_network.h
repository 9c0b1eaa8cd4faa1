// SimNetwork: the simulated network between a SimWorld's nodes, keeping DESIGN.md's delivery
// contract ("The delivery contract (both transports)").
//
// Nodes talk over connections between incarnations, one per pair of nodes, opened by the first
// send. On an open connection, messages arrive reliably, in order, exactly once: each is delayed
// by serialisation (bytes / bandwidth, queued behind earlier ones on its direction) plus a latency
// sample, and never overtakes an earlier message of its direction. Otherwise the connection fails,
// everything in flight on it is lost, and each end still running receives a peer_failed delivery:
//   - kill: the peer learns after about one latency (a TCP reset);
//   - a seeded connection failure (rate per message): both ends learn after about one latency;
//   - partition, or a crashed peer: traffic is held, in order; a partition that heals releases it,
//     but traffic held for connection_timeout fails the connection and both ends learn then.
//     Held traffic is the sender's to retransmit, so a sender that crashes or dies loses it;
//   - sending to a node that is not running is refused: the sender learns after one latency.
// A failure notice (peer_failed) is how an end learns; until it has learned of every failure of its
// connections to a peer, what it sends to that peer is lost, as writes to a reset socket are. An
// end learns of its failures in the order they happened, and learns sooner when it can:
//   - a failure the reset could not reach across a partition is learned about one latency after
//     the partition heals (the next retransmission meets the reset), at the latest at the timeout;
//   - the first message of a peer's new connection tells the receiver that the old one is gone;
//   - learning of a later failure tells of every earlier one.
// So a notice never names a connection the end is still using, and a peer_failed delivery fails only
// calls that were already lost. Every delivery names the peer's incarnation, so a notice about a
// dead incarnation that arrives after its successor's first messages is recognisable.
// Messages are the encoded bytes, exactly as TCP carries them.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/transport.h"
#include "core/runtime/link_queue.h"
#include "core/runtime/network_model.h"

namespace dagsim::sim {

class SimWorld;
using runtime::Bytes;
using runtime::TimePoint;

struct NetworkStats {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t dropped = 0;
  uint64_t held = 0;
  uint64_t connection_failures = 0;
  uint64_t bytes_sent = 0;
};

class SimNetwork {
 public:
  SimNetwork(SimWorld& world, runtime::NetworkModel model);

  // A message from `source` (running as `incarnation`) to `target`. Never blocks.
  // `padding`: zero bytes after the payload, charged but never materialised (transport.h).
  void send(WorkerId source, uint32_t incarnation, WorkerId target, Bytes payload, uint64_t padding = 0);

  // Lifecycle hooks from SimWorld.
  void on_kill(WorkerId node);     // connections reset; peers told after about one latency
  void on_restart(WorkerId node);  // the old incarnation's connections reset likewise
  void on_crash(WorkerId node);    // what it was still trying to send (held) dies with it
  void on_resume_or_heal();        // releases held traffic that may now flow

  uint64_t add_partition(uint64_t id, std::vector<std::pair<WorkerId, WorkerId>> blocked);
  void remove_partition(uint64_t id);
  void remove_all_partitions();
  bool blocked(WorkerId from, WorkerId to) const;

  const NetworkStats& stats() const { return stats_; }

 private:
  struct Message {
    uint64_t id;
    Bytes payload;
    uint64_t padding = 0;
  };
  struct Direction {
    runtime::LinkQueue queue;   // serialisation, latency and order: the TCP transport's rule too
    std::vector<Message> held;  // appended, then released or dropped all at once
    uint64_t silence_timer = 0;
  };
  // What one end learns of one failure of its connection, and when.
  struct Notice {
    uint64_t serial = 0;          // creation order, world-wide: notices are told in this order
    uint32_t peer_incarnation = 0;
    std::string reason;
    // Set while the reset cannot cross a partition (the end learns by its own timeout, `at`):
    // what it learns instead if the partition heals first.
    std::string reason_after_heal;
    TimePoint at;
    runtime::TimerId timer = 0;
  };
  struct Connection {
    bool open = false;
    uint64_t generation = 0;        // bumped on every close, so in-flight events see they are stale
    uint32_t incarnation[2] = {0, 0};
    // Failure notices on their way to each side (to its running incarnation), oldest first: until
    // they have all arrived, that side's sends to the peer are lost (writes to a reset socket).
    std::vector<Notice> notices[2];
    Direction direction[2];         // [0]: low id -> high id, [1]: high -> low
  };
  using Key = std::pair<WorkerId, WorkerId>;  // (low, high)
  // A message on the wire. The arrival event holds only its slot (a posted timer: this and the slot),
  // so a message costs no allocation beyond its payload.
  // `conn` stays valid: connections are never erased, and a deque keeps its elements where they
  // are as it grows.
  struct InFlight {
    Key key;
    Connection* conn = nullptr;
    uint64_t generation = 0;
    int dir = 0;
    Message message;
  };

  static Key key_of(WorkerId a, WorkerId b) { return a < b ? Key{a, b} : Key{b, a}; }
  static int side_of(const Key& key, WorkerId node) { return node == key.first ? 0 : 1; }

  // The connection between the pair, opened (closed, empty) on first use.
  Connection& connection(Key key);
  void insert_index(uint32_t packed, Connection* conn);
  void arrive(uint32_t in_flight_slot);
  // Connections in key order: whatever iterates them may reach the trace, so never hash order.
  std::vector<Key> sorted_keys() const;
  void hand_over(Key key, Connection& conn, int dir, Message&& message);
  // Whether traffic on this direction must wait (partition, crashed target).
  bool must_hold(WorkerId from, WorkerId to) const;
  void hold(Connection& conn, Key key, int dir, Message message);
  void release_held(Key key, Connection& conn);
  // Closes the connection, losing what it carries; tells each end still running, after about one
  // latency when `delay_by_latency`, "connection to PEER " + `what`.
  void fail(Key key, Connection& conn, const std::string& what, bool delay_by_latency);
  // Queues a notice for `side`'s running incarnation, told at `when` (or sooner; see above).
  void notify(Key key, int side, uint32_t peer_incarnation, std::string reason, TimePoint when,
              std::string reason_after_heal = {});
  // Tells `side` every notice queued for it up to and including `serial`, in order.
  void tell(Key key, int side, uint64_t serial);
  // Moves partition-delayed notices to about one latency from now where the path has healed.
  void hasten_notices(Key key, Connection& conn);
  // Forgets the notices queued for `node`'s incarnation that just ended.
  void forget_notices(WorkerId node);
  void drop(WorkerId from, WorkerId to, uint64_t message_id, std::string_view why);

  SimWorld& world_;
  runtime::NetworkModel model_;
  // Every connection ever used, in creation order, and its key; looked up per message through
  // index_, an open-addressing table (linear probing, at most half full). Never iterated in hash
  // order: see sorted_keys.
  struct IndexSlot {
    uint32_t packed = 0;  // (low << 16 | high) + 1; 0: empty
    Connection* conn = nullptr;
  };
  std::deque<Connection> connections_;
  std::vector<Key> connection_keys_;
  std::vector<IndexSlot> index_;
  int index_bits_ = 0;
  std::vector<InFlight> in_flight_;
  std::vector<uint32_t> free_in_flight_;
  std::map<uint64_t, std::set<std::pair<WorkerId, WorkerId>>> partitions_;
  uint64_t next_message_ = 0;
  uint64_t next_notice_ = 0;
  NetworkStats stats_;
};

}  // namespace dagsim::sim
