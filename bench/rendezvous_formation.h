// One rendezvous formation in the deterministic simulator, for the rendezvous benchmark
// (issue 11 item 8): a store node (node 0, the built-in StoreService) and N rendezvous nodes
// (1..N), each with its own RPC agent, StoreClient and RendezvousHandler, min = max = N. Every
// node calls next_rendezvous() once, at t = 0 or at a seeded instant in the first second, and the
// world runs until every call has returned.
//
// Promises: the same spec gives the same run, byte for byte (the trace hash and every virtual
// figure; only wall_s varies); run_formation() checks what it measured and says what went wrong in
// `error` otherwise: the world finished with no failed fiber; every node returned rank 0..N-1
// exactly once, world size N, round 0; the committed state, read once after the last return,
// decodes, is structurally sound (S5), is round 0 complete with world N, no deadline, not closed,
// no re-rendezvous request, holds exactly the N nodes as participants and nobody waiting or spare,
// ranks them 0..N-1 in node order (S2), and gives each node the rank it returned; and every write
// named the version of the write before it, the last being the one read (S1). Virtual time is the simulator's, wall time a steady clock
// around the world's construction and run (teardown is reported apart).
#pragma once

#include <cstdint>
#include <string>

#include "bench/counting_store.h"
#include "core/runtime/clock.h"

namespace dagsim::bench {

struct FormationSpec {
  uint32_t nodes = 2;
  // 0: event-driven waits (the default); > 0: PyTorch's fixed polling interval.
  runtime::Duration poll_interval = runtime::Duration::zero();
  // Joins spread uniformly over [0, 1 s) (seeded) instead of all at t = 0.
  bool spread_joins = false;
  uint64_t seed = 1;
  // Every message's latency, uniform in [latency_min, latency_max] (seeded).
  runtime::Duration latency_min = std::chrono::microseconds(500);
  runtime::Duration latency_max = std::chrono::microseconds(1000);
  // The nodes' heartbeat interval (RendezvousSettings::keep_alive_interval; PyTorch's 5 s default).
  // See keep_alive_for() in bm_rendezvous.cc for why the large tier sets it longer.
  runtime::Duration keep_alive_interval = std::chrono::seconds(5);
};

struct FormationResult {
  std::string error;                       // empty when the formation checked out
  runtime::Duration last_join{0};          // virtual: the last node's call of next_rendezvous
  runtime::Duration last_done{0};          // virtual: the last node's return from it
  runtime::Duration round_time() const { return last_done - last_join; }
  double build_wall_s = 0;                 // wall: building the world, agents and handlers
  double run_wall_s = 0;                   // wall: running the world to the end of the formation
  double teardown_wall_s = 0;              // wall: killing the nodes and unwinding their fibers
  uint64_t trace_hash = 0;
  StoreCounts store;                       // what the rendezvous nodes asked of the store
  uint64_t wire_reply_bytes = 0;           // value bytes the store's replies carried (deltas as sent)
  uint64_t deltas_sent = 0;                // replies the store sent as deltas
  uint64_t cas_value_bytes = 0;            // states the compare-and-sets wrote, whole
  uint64_t request_value_bytes = 0;        // value bytes the requests carried (deltas as sent)
  uint64_t decodes = 0;                    // states decoded, every node together
  uint64_t actions_applied = 0;            // state changes the nodes decided, every node together
  uint64_t sync_waits = 0;                 // SYNC waits (watches or polls), every node together
  bool invariants_checked = false;         // every check in the file comment ran and held
};

FormationResult run_formation(const FormationSpec& spec);

}  // namespace dagsim::bench
