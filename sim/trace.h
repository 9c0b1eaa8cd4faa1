// Trace: the ordered record of everything that happens in a simulated run, and its hash.
//
// Every send, delivery, drop, timer, fault and workload event is appended as (virtual time, node,
// kind, digest of its detail) and folded into a 64-bit rolling hash: records are gathered as
// fixed-width words in blocks of kFoldRecords, and each full block is hashed with XXH3 seeded with
// the hash so far (one long hash per block costs a fraction of one short hash per record, and the
// fold runs for every send, delivery and timer). `hash()` covers the records of the part-filled
// block too, computed on demand, so it is a function of the records alone. Two runs of one seed on one build must give the same `hash()`: that is
// the determinism self-check. When asked to keep events, the trace also holds their details and
// writes Chrome trace-event JSON (Perfetto, chrome://tracing): one named track per node, and each
// message as a flow from its send to its delivery.
//
// Details must be functions of the run's inputs: no pointers, no wall time, no unordered order.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/clock.h"

namespace dagsim::sim {

enum class TraceKind : uint8_t {
  send,         // a message left its node (flow start)
  deliver,      // a message reached its node's inbox (flow end)
  drop,         // a message was lost (dead connection, dead node)
  hold,         // a message is held by a partition, a crashed or a paused node
  timer,        // a node's timer fired
  fault,        // kill, crash, restart, pause, resume, partition, heal
  connection,   // a connection failed or a failure notice arrived
  workload,     // an event logged by core or workload code through Env::log
  fiber_failed, // a node fiber ended with an exception
  autograd,     // a distributed backward's work on a node: a pass begins or ends, a function runs
};

std::string_view trace_kind_name(TraceKind kind);

// A node id for events that belong to the world, not to one node (partitions, heals).
inline constexpr uint32_t kWorldTrack = 0xffffffff;

struct TraceEvent {
  runtime::TimePoint time;
  uint32_t node = 0;
  TraceKind kind = TraceKind::workload;
  uint64_t digest = 0;
  uint64_t flow = 0;   // send/deliver/drop: the message id; 0 otherwise
  uint32_t peer = 0;   // send/deliver: the other end
  std::string detail;  // kept only when the trace keeps events
};

// How much of the run a Chrome trace shows: `workload` the workload's spans (rounds, steps,
// backward passes, calls), its events and the faults; `rpc` also every message and autograd
// function; `network` also timers and held traffic: everything.
enum class TraceLevel : uint8_t { workload, rpc, network };
std::string_view trace_level_name(TraceLevel level);
// "workload", "rpc" or "network"; false for anything else.
bool parse_trace_level(std::string_view name, TraceLevel& level);

// A stretch of a node's time the workload names (a round it is a member of, a step it drives),
// drawn on the node's track above the network's events. Spans come from the run's records after
// it ended, so they are not part of the trace or its hash.
struct TraceSpan {
  uint32_t node = 0;
  std::string name;      // "round 2", "step 17"
  std::string category;  // "round", "step", "restart", "rendezvous", ...
  runtime::TimePoint begin;
  runtime::TimePoint end;  // >= begin
  std::string detail;
};

class Trace {
 public:
  explicit Trace(bool keep_events) : keep_events_(keep_events) {}

  void record(runtime::TimePoint time, uint32_t node, TraceKind kind, std::string_view detail,
              uint64_t flow = 0, uint32_t peer = 0);

  // For the hot events (sends, deliveries, timers): the digest is a number the caller derives
  // from the event's fields, and the text is built only when the trace keeps its events.
  template <typename MakeDetail>
  void record_lazy(runtime::TimePoint time, uint32_t node, TraceKind kind, uint64_t digest, uint64_t flow,
                   uint32_t peer, MakeDetail&& make_detail) {
    fold(time, node, kind, digest, flow);
    if (keep_events_) events_.push_back(TraceEvent{time, node, kind, digest, flow, peer, make_detail()});
  }

  uint64_t hash() const;
  uint64_t count() const { return count_; }
  uint64_t count(TraceKind kind) const { return per_kind_[static_cast<size_t>(kind)]; }
  bool keeps_events() const { return keep_events_; }
  const std::vector<TraceEvent>& events() const { return events_; }

  // Chrome trace-event JSON at `level`, with the workload's `spans` and each node's backward
  // passes (its autograd "pass begins"/"pass ends" events, paired) as spans. REQUIRES:
  // keeps_events(). `node_names[i]` names track i.
  void write_chrome_json(std::ostream& out, const std::vector<std::string>& node_names,
                         TraceLevel level = TraceLevel::network, const std::vector<TraceSpan>& spans = {}) const;

 private:
  void fold(runtime::TimePoint time, uint32_t node, TraceKind kind, uint64_t digest, uint64_t flow);

  static constexpr size_t kFoldWords = 5;     // time, node, kind, digest, flow
  static constexpr size_t kFoldRecords = 64;  // 2,560 bytes a block

  bool keep_events_;
  uint64_t hash_ = 0x64616773696d;  // "dagsim": the seed, then the hash of every full block
  uint64_t block_[kFoldRecords * kFoldWords];
  size_t block_words_ = 0;  // filled words of block_
  uint64_t count_ = 0;
  uint64_t per_kind_[10] = {};  // one per TraceKind
  std::vector<TraceEvent> events_;
};

}  // namespace dagsim::sim
