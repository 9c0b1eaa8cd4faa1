// The rendezvous invariant checker (issue 11 item 5): a run's history (rendezvous_history.h)
// judged against shared/reference/rendezvous.md §3, safety S1-S10 and liveness L1-L6, with the
// scenario's timeouts. A violation names the invariant, the store life and round, and the nodes.
//
// Safety is judged on every committed state and every value returned to an agent, always:
//  S1 each commit was written by a node on the token of the commit before it (a stale token never
//     writes), and every write a node saw succeed is a commit; S2 completion ranks the participants
//     0..n-1 in node order, ranks never change within a round, and no two nodes of a round return the
//     same rank; S3 min <= n <= max at completion, an incomplete round holds fewer than max; S4 the
//     last-call deadline is set exactly while an incomplete round holds min or more; S5 the lists
//     are disjoint and the heartbeats cover exactly them (structural_violation); S6 the round rises
//     by exactly one, and only from a complete round; S7 closed is sticky, and after it nobody is
//     added, no round completes and no call started afterwards succeeds; S8 next_rendezvous returns
//     a committed, complete state holding the node with the rank and world it returned; S9 an agent
//     restarts only when the state it read has nodes waiting (redundant nodes never count); S10 a
//     node another node removed had expired by the writer's clock, and one that had expired by the
//     writer's last read was removed.
// Liveness is judged only where the fault history leaves a quiet window (no fault from shortly
// before the window to its end), since a partition or a death may rightly delay anything:
//  L1 a round with min nodes completes within last_call (at once at max); L2 a dead node leaves every
//     list within expiry + one keep-alive interval while a live node keeps syncing; L3 a join times
//     out no sooner than its timeout and no later than it plus the 5 s rollback, calls never hang,
//     a redundant node never times out while the round is full; L4 after close every joiner fails
//     promptly; L5 a waiting node makes the round advance within one monitor interval and is in the
//     next round; L6 (re-rendezvous on, the default) a participant whose heartbeat expires in a
//     complete round makes the survivors re-form; with it off, PyTorch's behaviour: no request.
// "Promptly" is the checker's slack: two clock skews, the 1 s state cache, the poll interval, ten
// network latencies and 50 ms; durations on a node's clock are scaled by its worst drift.
#pragma once

#include <string>
#include <vector>

#include "scenarios/workloads/rendezvous/rendezvous_history.h"
#include "scenarios/workloads/rendezvous/rendezvous_spec.h"

namespace dagsim::scenarios {

struct Violation {
  std::string invariant;  // "S2", "L3"
  std::string where;      // "store life 0, round 3"
  std::vector<std::string> nodes;  // "worker1_0_0", PyTorch's NodeDesc repr
  std::string text;
};
std::string to_string(const Violation& violation);

// What the checker derives from the scenario.
struct CheckerBounds {
  Duration slack;
  double drift = 0;  // the worst rate error of a node's clock, as a fraction
  Duration expiry;   // keep_alive_interval * keep_alive_max_attempt
  Duration round_trip;  // one store request and its reply, at the network's worst latency
  // `d` on the slowest clock, in world time.
  Duration slow(Duration d) const;
};
CheckerBounds checker_bounds(const Scenario& scenario);

struct RunFacts {
  std::string outcome;  // RunRecords::outcome
  std::string stuck_report;
  TimePoint end;
  std::vector<runtime::FaultEvent> faults;
};

std::vector<Violation> check_safety(const RendezvousSpec& spec, const RendezvousHistory& history,
                                    bool store_ever_died);
std::vector<Violation> check_liveness(const RendezvousSpec& spec, const CheckerBounds& bounds,
                                      const RendezvousHistory& history, const RunFacts& facts);

// Both, for a run's records.
std::vector<Violation> check_invariants(const Scenario& scenario, const RunRecords& records,
                                        const RendezvousHistory& history);

}  // namespace dagsim::scenarios
