// The delivery contract's promises about failure notices, checked on a simulator trace.
//
// DESIGN.md ("The delivery contract") and sim_network.h promise that an end of a connection learns
// of each failure (a peer_failed notice), in time, and that what it sends is lost as "not learned"
// only while it has not been told of every failure of its connections to that peer. The checker
// reads only the trace (faults, failure records, notices, drops), not the network's own
// bookkeeping, so it finds bookkeeping that disagrees with what the run did:
//   N1  a send is dropped as "not learned" only while a failure its sender must hear of is untold;
//   N2  no end is told more often than its connections failed or were refused;
//   N3  each failure is told within connection_timeout + the largest latency;
//   N4  a failure still untold when the partition between the two ends heals is told within the
//       largest latency of the heal (the next retransmission meets the reset).
// An end is owed a notice for each failure recorded while its incarnation runs (kill, crash and
// restart end what it is owed) and for each of its connection attempts refused.
#pragma once

#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "sim/trace.h"

namespace dagsim::conformance {

struct NoticeBounds {
  runtime::Duration connection_timeout;
  runtime::Duration max_latency;
};

// Every violation of N1–N4 in `trace` (which must keep its events), one line each, naming the
// time, the nodes and the rule.
std::vector<std::string> delivery_contract_violations(const sim::Trace& trace, const std::vector<std::string>& node_names,
                                                      NoticeBounds bounds);

}  // namespace dagsim::conformance
