// RendezvousHistory: a rendezvous run as the invariant checker reads it, parsed from the run's
// records alone (rendezvous_workload.h says what each node records), so a run on TCP or on another
// host is judged as one in the simulator.
//
// Reading trusts nothing: a missing or mistyped key, a state that does not decode (the canonical
// decoder, rendezvous_state.h), versions that do not rise, an event that ends before it starts,
// all throw Error(invalid_records) naming the node's incarnation and the key.
#pragma once

#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "core/rendezvous/rendezvous_state.h"
#include "scenarios/format/scenario.h"
#include "scenarios/run/records.h"

namespace dagsim::scenarios {

using runtime::TimePoint;

std::string to_hex(const runtime::Bytes& bytes);
// Throws invalid_records naming `what` for odd lengths and non-hex characters.
runtime::Bytes from_hex(const std::string& text, const std::string& what);

// One committed write of the state key, in the store's order.
struct Commit {
  TimePoint t;
  uint64_t version = 0;
  std::optional<rendezvous::RendezvousState> state;  // nullopt: the key was deleted
};

// One life of the store node: its keys die with it (the next life starts empty, its versions above
// every version of this one: KeyValueTable).
struct StoreLife {
  uint32_t incarnation = 0;
  std::vector<Commit> commits;  // versions strictly rising
  // The commit current at `t` (the last one at or before it), or null before the first.
  const Commit* at(TimePoint t) const;
  const Commit* find(uint64_t version) const;
};

struct AgentEvent {
  std::string op;  // next_rendezvous, num_nodes_waiting, set_closed, leave, shutdown
  TimePoint start;
  std::optional<TimePoint> end;  // nullopt: its incarnation died in the call
  std::optional<TimePoint> wall;  // num_nodes_waiting: the node's wall_now() when it returned
  uint64_t round = 0, rank = 0, world = 0, version = 0, waiting = 0;
  bool ok = true;
  std::string error;  // the error's name (rendezvous_closed, ...), empty on success
  std::string message;
  bool succeeded() const { return end.has_value() && error.empty(); }
};

// A compare-and-set a node sent on the state key (recording_store.h).
struct CasWrite {
  TimePoint t;
  std::optional<TimePoint> t_end;
  TimePoint wall, read_wall;  // the writer's wall_now() then and at its last read of the key
  uint64_t base = 0;
  std::optional<uint64_t> version;  // after the call: the commit's, or the version that won
  std::optional<bool> written;      // nullopt: no reply (the writer died with it in flight)
  std::optional<rendezvous::RendezvousState> state;  // what it wrote, when it committed and values are recorded (etcd runs)
  std::optional<rendezvous::RendezvousState> sent;   // what it sent, when values are recorded (etcd runs)
  bool inferred = false;  // its outcome never came back; later writes prove it committed (etcd runs)
};

struct AgentLife {
  uint32_t node = 0;
  uint32_t incarnation = 0;
  rendezvous::NodeDesc desc;
  std::vector<AgentEvent> events;
  std::vector<CasWrite> writes;
  std::optional<TimePoint> died;  // killed, crashed or restarted at this time
};

// An etcd the store node killed and started again with its data (a store_restart action): from
// the kill to etcd answering again.
struct StoreOutage {
  TimePoint down, up;
};

struct RendezvousHistory {
  std::vector<StoreLife> store;   // by incarnation
  std::vector<AgentLife> agents;  // by (node, incarnation)
  std::vector<StoreOutage> store_outages;  // etcd runs, in time order
  // The life of `desc`, or null.
  const AgentLife* agent(const rendezvous::NodeDesc& desc) const;
  // The write that committed `c` (its version, the commit inside the call's span) and its agent,
  // or nulls when no node recorded it (its writer died with the call in flight).
  std::pair<const AgentLife*, const CasWrite*> writer_of(const Commit& c) const;
};

RendezvousHistory read_history(const Scenario& scenario, const RunRecords& records);
// One incarnation's part of it, from its record as the rendezvous workload writes it: the store
// node's "history" of commits, an agent's "node" descriptor, "events" and "writes". `what` names
// the record in errors. (read_history reads each node with these; other harnesses that record the
// same keys, such as the simulated launcher's, build a history with them.)
StoreLife read_store_life(const NodeRecord& record, const std::string& what);
AgentLife read_agent_life(const NodeRecord& record, const std::string& what);

// When each incarnation of `node` ended by a fault (kill, crash, restart), from the fault history:
// index i is incarnation i's end, nullopt while it never ended.
std::vector<std::optional<TimePoint>> incarnation_ends(const std::vector<runtime::FaultEvent>& history, uint32_t node);

}  // namespace dagsim::scenarios
