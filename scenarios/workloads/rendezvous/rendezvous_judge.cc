// RendezvousJudge (rendezvous_judge.h).
#include "scenarios/workloads/rendezvous/rendezvous_judge.h"

#include <set>

namespace dagsim::scenarios {

namespace {

using rendezvous::NodeDesc;

double ms(TimePoint t) { return static_cast<double>(t.ns()) / 1e6; }

nlohmann::json node_json(const NodeDesc& node) { return {{"node", node.addr}, {"pid", node.pid}}; }

std::set<NodeDesc> listed(const rendezvous::RendezvousState& s) {
  std::set<NodeDesc> out(s.wait_list.begin(), s.wait_list.end());
  out.insert(s.redundancy_list.begin(), s.redundancy_list.end());
  for (const auto& [node, rank] : s.participants) out.insert(node);
  return out;
}

}  // namespace

RendezvousJudge::RendezvousJudge(const Scenario& scenario, const RunRecords& records)
    : scenario_(scenario), history_(read_history(scenario, records)),
      violations_(check_invariants(scenario, records, history_)) {}

CheckResult RendezvousJudge::invariants(const CheckSpec& spec) const {
  if (violations_.empty()) return {spec.kind, true, "S1-S10 and L1-L6 hold"};
  std::string detail = std::to_string(violations_.size()) + " violation(s): ";
  for (size_t i = 0; i < violations_.size() && i < 5; ++i) detail += (i ? "; " : "") + to_string(violations_[i]);
  if (violations_.size() > 5) detail += "; and " + std::to_string(violations_.size() - 5) + " more";
  return {spec.kind, false, detail};
}

CheckResult RendezvousJudge::formed(const CheckSpec& spec) const {
  std::set<std::string> want;
  for (uint32_t n : spec.nodes) want.insert(scenario_.cluster.node_name(n));
  std::string seen;
  for (const StoreLife& life : history_.store) {
    const rendezvous::RendezvousState* prev = nullptr;
    for (const Commit& c : life.commits) {
      // Only the commit that completes a round: a complete round that lost a member is not a new one.
      const bool completes = c.state && c.state->complete && (prev == nullptr || !prev->complete || prev->round != c.state->round);
      if (c.state) prev = &*c.state;
      if (!completes) continue;
      std::set<std::string> got;
      for (const auto& [node, rank] : c.state->participants) got.insert(node.addr);
      if (got == want && c.state->participants.size() == want.size()) {
        return {spec.kind, true, "round " + std::to_string(c.state->round) + " completed at " + std::to_string(ms(c.t)) + " ms"};
      }
      std::string names;
      for (const std::string& n : got) names += (names.empty() ? "" : ", ") + n;
      if (seen.find("[" + names + "]") == std::string::npos) seen += (seen.empty() ? "" : " ") + ("[" + names + "]");
    }
  }
  return {spec.kind, false, "no round completed with exactly these nodes; rounds formed: " + (seen.empty() ? "none" : seen)};
}

CheckResult RendezvousJudge::expect_error(const CheckSpec& spec) const {
  std::string problems;
  for (uint32_t n : spec.nodes) {
    const std::string node = scenario_.cluster.node_name(n);
    const AgentEvent* last_error = nullptr;
    for (const AgentLife& a : history_.agents) {
      if (a.node != n) continue;
      for (const AgentEvent& e : a.events) {
        if (!e.error.empty()) last_error = &e;
      }
    }
    if (last_error == nullptr) {
      problems += node + " ended without an error; ";
    } else if (last_error->error.find(spec.message) == std::string::npos &&
               last_error->message.find(spec.message) == std::string::npos) {
      problems += node + " failed with \"" + last_error->message + "\"; ";
    }
  }
  if (problems.empty()) return {spec.kind, true, "each failed with \"" + spec.message + "\""};
  return {spec.kind, false, problems.substr(0, problems.size() - 2)};
}

nlohmann::json completed_rounds(const RendezvousHistory& history) {
  nlohmann::json rounds = nlohmann::json::array();
  for (const StoreLife& life : history.store) {
    const Commit* prev = nullptr;
    for (const Commit& c : life.commits) {
      if (!c.state) {
        prev = nullptr;
        continue;
      }
      const rendezvous::RendezvousState& s = *c.state;
      if (s.complete && (prev == nullptr || !prev->state->complete || prev->state->round != s.round)) {
        nlohmann::json members = nlohmann::json::array();
        for (const auto& [node, rank] : s.participants) {
          nlohmann::json m = node_json(node);
          m["rank"] = rank;
          members.push_back(m);
        }
        rounds.push_back({{"store_life", life.incarnation}, {"round", s.round}, {"completed_ms", ms(c.t)},
                          {"world_size", s.world_size}, {"members", members}, {"removed", nlohmann::json::array()}});
      }
      // Who left the round, and why: its own exit op, or another node found its heartbeat expired.
      if (prev != nullptr && prev->state->complete && !rounds.empty() &&
          rounds.back()["store_life"].get<uint32_t>() == life.incarnation &&
          prev->state->round == rounds.back()["round"].get<uint64_t>()) {
        const std::set<NodeDesc> after = listed(s);
        const auto [writer, write] = history.writer_of(c);
        for (const auto& [node, rank] : prev->state->participants) {
          if (after.contains(node)) continue;
          nlohmann::json r = node_json(node);
          r["at_ms"] = ms(c.t);
          r["why"] = writer == nullptr ? "unknown" : writer->desc == node ? "exit" : "expired";
          rounds.back()["removed"].push_back(r);
        }
      }
      prev = &c;
    }
  }
  return rounds;
}

nlohmann::json RendezvousJudge::results(const ReportOptions&) const {
  const nlohmann::json rounds = completed_rounds(history_);
  nlohmann::json agents = nlohmann::json::array();
  for (const AgentLife& a : history_.agents) {
    nlohmann::json calls = nlohmann::json::array();
    for (const AgentEvent& e : a.events) {
      nlohmann::json call = {{"op", e.op}, {"start_ms", ms(e.start)}};
      if (e.end) call["end_ms"] = ms(*e.end);
      if (e.op == "next_rendezvous" && e.succeeded()) {
        call["round"] = e.round;
        call["rank"] = e.rank;
        call["world_size"] = e.world;
      }
      if (e.op == "num_nodes_waiting") call["waiting"] = e.waiting;
      if (!e.error.empty()) call["error"] = e.message;
      calls.push_back(call);
    }
    nlohmann::json agent = node_json(a.desc);
    agent["calls"] = calls;
    if (a.died) agent["died_ms"] = ms(*a.died);
    agents.push_back(agent);
  }
  nlohmann::json violations = nlohmann::json::array();
  for (const Violation& v : violations_) violations.push_back(to_string(v));
  // The contract's "rendezvous" key holds the rounds; the agents' calls and the violations ride beside it.
  return {{"rendezvous", rounds}, {"rendezvous_agents", agents}, {"rendezvous_violations", violations}};
}

}  // namespace dagsim::scenarios
