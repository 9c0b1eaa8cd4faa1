// RendezvousJudge: the rendezvous workload's judge, from a run's records alone.
//
// Checks (docs/scenarios.md, "Rendezvous"):
//  - invariants: no violation of S1-S10 or L1-L6 (rendezvous_invariants.h); the detail lists them;
//  - formed, nodes = [...]: some round completed with exactly these nodes as participants;
//  - expect_error, nodes = [...], message = "...": each of these nodes' agents ended with an error
//    containing the message (its name, "rendezvous_closed", or its text).
// Results: "rendezvous" (each completed round: the store life, the round, when it completed, its
// members with their ranks, and who left it, when and why: exit or expired), "rendezvous_agents" (each
// incarnation's calls), and "rendezvous_violations".
#pragma once

#include "scenarios/workloads/registry.h"
#include "scenarios/workloads/rendezvous/rendezvous_history.h"
#include "scenarios/workloads/rendezvous/rendezvous_invariants.h"

namespace dagsim::scenarios {

// Each round that completed, in store order: its store life, round, completion time, world size
// and members with their ranks, and who left it, when and why ("exit": its own op; "expired":
// another node removed it; "unknown": no recorded writer).
nlohmann::json completed_rounds(const RendezvousHistory& history);

class RendezvousJudge final : public Judge {
 public:
  RendezvousJudge(const Scenario& scenario, const RunRecords& records);

  CheckResult invariants(const CheckSpec& spec) const;
  CheckResult formed(const CheckSpec& spec) const;
  CheckResult expect_error(const CheckSpec& spec) const;
  nlohmann::json results(const ReportOptions& options) const override;
  // Each agent's rendezvous calls (num_nodes_waiting polls aside) and the rounds it was a member of.
  std::vector<WorkloadSpan> spans() const override;

  const RendezvousHistory& history() const { return history_; }
  const std::vector<Violation>& violations() const { return violations_; }

 private:
  // The run in words, in time order: each round with its members and ranks, who left it and why,
  // each fault with what it struck, and each failed next_rendezvous; the text report prints it.
  nlohmann::json timeline(const nlohmann::json& rounds) const;

  const Scenario& scenario_;
  std::vector<runtime::FaultEvent> faults_;  // the run's fault history, for the timeline
  RendezvousHistory history_;
  std::vector<Violation> violations_;
};

}  // namespace dagsim::scenarios
