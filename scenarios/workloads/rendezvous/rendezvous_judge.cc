// RendezvousJudge (rendezvous_judge.h).
#include "scenarios/workloads/rendezvous/rendezvous_judge.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "scenarios/workloads/timeline_text.h"
#include "core/base/printable.h"

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
    : scenario_(scenario), faults_(records.fault_history), history_(read_history(scenario, records)),
      violations_(check_invariants(scenario, records, history_)) {}

CheckResult RendezvousJudge::invariants(const CheckSpec& spec) const {
  if (violations_.empty()) return {spec.kind, true, "S1-S10 and L1-L6 hold"};
  std::string detail = counted(violations_.size(), "violation") + ": ";
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
  if (problems.empty()) return {spec.kind, true, "each failed with " + quote(spec.message)};
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
          if (const auto last = prev->state->last_heartbeats.find(node); last != prev->state->last_heartbeats.end()) {
            r["last_heartbeat_ms"] = ms(last->second);  // by the node's own clock, as it stamped it
          }
          if (writer != nullptr && writer->desc != node) r["removed_by"] = writer->desc.addr;
          rounds.back()["removed"].push_back(r);
        }
      }
      prev = &c;
    }
  }
  return rounds;
}

nlohmann::json RendezvousJudge::timeline(const nlohmann::json& rounds) const {
  auto seconds = [](double ms_value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3f s", ms_value / 1e3);
    return std::string(text);
  };
  std::vector<std::pair<double, std::string>> lines;  // (ms, line)
  for (const nlohmann::json& r : rounds) {
    const uint32_t life = r["store_life"].get<uint32_t>();
    const std::string round = "round " + std::to_string(r["round"].get<uint64_t>()) +
                              (life == 0 ? "" : " of the store's life " + std::to_string(life + 1));
    std::string members;
    for (const nlohmann::json& m : r["members"]) {
      members += (members.empty() ? "" : ", ") + m["node"].get<std::string>() + " rank " + std::to_string(m["rank"].get<uint32_t>());
    }
    const double at = r["completed_ms"].get<double>();
    lines.emplace_back(at, round + " formed at " + seconds(at) + ": " + std::to_string(r["world_size"].get<uint32_t>()) +
                               " nodes (" + members + ")");
    for (const nlohmann::json& gone : r["removed"]) {
      const double t = gone["at_ms"].get<double>();
      const std::string node = gone["node"].get<std::string>();
      const std::string why = gone["why"].get<std::string>();
      std::string line = "at " + seconds(t) + " " + node + " left " + round;
      if (why == "exit") {
        line += ": its agent ended (exit)";
      } else if (why == "expired") {
        line += ": its heartbeat expired";
        if (gone.contains("last_heartbeat_ms")) line += " (last stamped " + seconds(gone["last_heartbeat_ms"].get<double>()) + ")";
        if (gone.contains("removed_by")) line += " and " + gone["removed_by"].get<std::string>() + " removed it";
      } else {
        line += ": no recorded writer removed it";
      }
      lines.emplace_back(t, line);
    }
  }
  for (const runtime::FaultEvent& f : faults_) {
    if (f.kind == runtime::FaultEvent::Kind::start || f.kind == runtime::FaultEvent::Kind::connection_failed) continue;
    const double t = static_cast<double>(f.time.ns()) / 1e6;
    lines.emplace_back(t, "fault at " + seconds(t) + ": " + describe_fault(f, scenario_.cluster));
  }
  for (const AgentLife& a : history_.agents) {
    for (const AgentEvent& e : a.events) {
      if (e.op != "next_rendezvous" || e.error.empty() || !e.end) continue;
      const double t = ms(*e.end);
      lines.emplace_back(t, "at " + seconds(t) + " " + a.desc.addr + "'s next_rendezvous failed: " + e.message);
    }
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [t, line] : lines) out.push_back(line);
  out.push_back(counted(rounds.size(), "round") + " formed; " + counted(history_.agents.size(), "agent incarnation"));
  return out;
}

std::vector<WorkloadSpan> RendezvousJudge::spans() const {
  std::vector<WorkloadSpan> out;
  int64_t run_end = 0;
  for (const AgentLife& a : history_.agents) {
    for (const AgentEvent& e : a.events) run_end = std::max(run_end, (e.end ? *e.end : e.start).ns());
  }
  for (const AgentLife& a : history_.agents) {
    for (const AgentEvent& e : a.events) {
      if (e.op == "num_nodes_waiting") continue;  // a poll every monitor interval: noise at this level
      const int64_t end = e.end ? e.end->ns() : (a.died ? a.died->ns() : run_end);
      std::string detail = e.error.empty() ? "ok" : e.error + ": " + e.message;
      if (e.op == "next_rendezvous" && e.succeeded()) {
        detail = "round " + std::to_string(e.round) + ", rank " + std::to_string(e.rank) + " of " + std::to_string(e.world);
      }
      out.push_back({a.node, e.op, "rendezvous", e.start.ns(), std::max(end, e.start.ns()), detail});
    }
  }
  const nlohmann::json rounds = completed_rounds(history_);
  for (const nlohmann::json& r : rounds) {
    const auto begin = static_cast<int64_t>(r["completed_ms"].get<double>() * 1e6);
    for (const nlohmann::json& m : r["members"]) {
      const std::string name = m["node"].get<std::string>();
      std::optional<uint32_t> node;
      for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) {
        if (scenario_.cluster.node_name(i) == name) node = i;
      }
      if (!node) continue;
      int64_t end = std::max(run_end, begin);
      for (const nlohmann::json& gone : r["removed"]) {
        if (gone["node"] == name) end = static_cast<int64_t>(gone["at_ms"].get<double>() * 1e6);
      }
      out.push_back({*node,
                     "round " + std::to_string(r["round"].get<uint64_t>()) + " (rank " + std::to_string(m["rank"].get<uint32_t>()) +
                         " of " + std::to_string(r["world_size"].get<uint32_t>()) + ")",
                     "round", begin, std::max(end, begin), name});
    }
  }
  return out;
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
  return {{"rendezvous", rounds}, {"rendezvous_agents", agents}, {"rendezvous_violations", violations},
          {"timeline", timeline(rounds)}};
}

}  // namespace dagsim::scenarios
