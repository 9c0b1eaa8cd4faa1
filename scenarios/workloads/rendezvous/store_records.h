// A rendezvous judged from its store's records alone (issue 24 item 6): `dagsim store --record`
// wrote every client operation (net/tcpstore/store_recorder.h); whoever ran the job wrote what it
// was (its settings) and what was done to it (its faults). From these the state key's history is
// rebuilt, each write tied to the agent process that sent it, and held to the same invariant
// checker as dagsim's own runs (rendezvous_invariants.h). It serves PyTorch's own elastic stack
// (torchrun agents on their c10d backend, whose pickled state pytorch_state.h reads) and
// `dagsim launch` on the same store alike, so the two are judged by one rule.
//
// The directory (docs/cli.md, "dagsim judge"):
//   store.jsonl  the store's record
//   job.json     {"run_id": "...", "min_nodes": N, "max_nodes": N,
//                 "join_timeout_s", "last_call_timeout_s", "close_timeout_s",
//                 "keep_alive_interval_s", "keep_alive_max_attempt",      (the agents' settings)
//                 "monitor_interval_s", "poll_interval_s",                 (how often they look)
//                 "rerendezvous_on_expiry": true,  (the L6 rule judged: true holds the agents to
//                                                   dagsim's re-rendezvous, false to PyTorch's gap)
//                 "faults": [{"t": UNIX_NS, "kind": "kill"|"pause"|"resume", "pid": P},
//                            {"t": UNIX_NS, "kind": "store_pause"|"store_resume"}],
//                 "slack_ms": N,   (extra timing slack for a busy host; default 500)
//                 "writers_known": false}  (the record ties no write to its client, as one written
//                                           from etcd's revisions: S1 is not judged; default true)
// Durations are decimal seconds; times are the store host's wall clock, as the store records.
//
// What cannot be judged from the store's side: S8 and S9 need what next_rendezvous and
// num_nodes_waiting returned to each agent, and L3-L4 the agents' calls; those are not in a
// store's record. Everything about the state itself (S1-S7, S10, L1, L2, L5, L6) is.
//
// Reading trusts nothing (any client of the store wrote most of the record): a malformed line, a
// missing key, a state that does not decode, a line or job.json past its bounds
// (store_record_reader.h), a pickle past the unpickler's (restricted_unpickler.h), all throw
// Error(invalid_records) naming the file and line, every name a record chose escaped
// (printable()). Values the store summarised (store_recorder.h) are judged as the whole ones
// where the judge needs no more (answers, other keys); a state it must decode that was
// summarised is refused naming the line. A record cut at the store's cap is judged up to the cut,
// which the report's "record_cut" names ({"at_ms", "max_bytes", "line"}; null when whole).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "scenarios/workloads/rendezvous/rendezvous_history.h"
#include "scenarios/workloads/rendezvous/rendezvous_invariants.h"
#include "scenarios/workloads/rendezvous/rendezvous_spec.h"

namespace dagsim::scenarios {

struct StoreRecordsJudgement {
  RendezvousSpec spec;
  RendezvousHistory history;
  std::vector<Violation> violations;
  std::string format;  // "pytorch", "dagsim" or "none" (no state was ever written)
  // Writes no process could be tied to (a client on another host): judged as their own agents.
  size_t unattributed_connections = 0;
  // The report: rounds (formation and re-formation times), agents, faults, live members another
  // node removed, and the violations.
  nlohmann::json report;
};

// True when `dir` holds a store's record (store.jsonl), so `dagsim judge` reads it this way.
bool is_store_records_dir(const std::string& dir);

StoreRecordsJudgement judge_store_records(const std::string& dir);

}  // namespace dagsim::scenarios
