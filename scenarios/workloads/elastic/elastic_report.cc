// ElasticJudge::results (elastic_judge.h): an elastic run's results for the report: the rounds
// (by store life and round), the job and its agents, each death's recovery, the trained and the
// local parameters, and the timeline, the run told round by round in time order.
#include <algorithm>
#include <cstdio>

#include "scenarios/workloads/elastic/elastic_judge.h"
#include "scenarios/workloads/program/tensor_report.h"

namespace dagsim::scenarios {

nlohmann::json ElasticJudge::results(const ReportOptions& options) const {
  // The rounds, each as its members saw it (the first group of the round per member), by store
  // life and round: a store that restarted counts its rounds from 0 again.
  std::map<std::pair<uint64_t, uint64_t>, nlohmann::json> rounds;
  for (const AgentLife& a : agents_) {
    for (const Group& g : a.groups) {
      nlohmann::json& r = rounds[{g.store_life, g.round}];
      if (r.is_null()) {
        nlohmann::json members = nlohmann::json::array();
        for (size_t rank = 0; rank < g.members.size(); ++rank) members.push_back({{"node", g.members[rank]}, {"rank", rank}});
        r = {{"store_life", g.store_life}, {"round", g.round}, {"world", g.world}, {"members", members}, {"t", g.t}};
      }
      r["t"] = std::min(r["t"].get<int64_t>(), g.t);
      if (g.start_step) r["start_step"] = *g.start_step;
    }
  }
  nlohmann::json rendezvous = nlohmann::json::array();
  for (auto& [key, r] : rounds) {
    nlohmann::json shown = r;
    shown.erase("t");
    shown["formed_at_ms"] = static_cast<double>(r["t"].get<int64_t>()) / 1e6;
    rendezvous.push_back(std::move(shown));
  }

  nlohmann::json agents = nlohmann::json::object();
  for (const AgentLife& a : agents_) {
    nlohmann::json j = {{"outcome", a.result ? a.result->outcome : a.died ? "died" : "running"}};
    if (a.result) j["restarts"] = a.result->restarts;
    if (a.result && !a.result->error.empty()) j["error"] = a.result->error;
    agents[a.name] = std::move(j);
  }
  const uint64_t committed = writes_.empty() || !writes_.back().step ? 0 : *writes_.back().step;
  // Each death's cost: from a kill or crash to the first step committed by a later round than the
  // one training when it came (the re-formed group's first step), if any.
  nlohmann::json recoveries = nlohmann::json::array();
  for (const runtime::FaultEvent& f : records_.fault_history) {
    if (f.kind != runtime::FaultEvent::Kind::kill && f.kind != runtime::FaultEvent::Kind::crash) continue;
    std::optional<std::pair<uint32_t, uint64_t>> training;  // (store life, round) of the last commit before it
    for (const StoreWrite& w : writes_) {
      if (w.t <= f.time.ns() && w.round) training = std::make_pair(w.life, *w.round);
    }
    nlohmann::json r = {{"fault", std::string(runtime::fault_event_kind_name(f.kind))},
                        {"node", scenario_.cluster.node_name(f.node)},
                        {"at_ms", static_cast<double>(f.time.ns()) / 1e6}};
    for (const StoreWrite& w : writes_) {
      if (w.t <= f.time.ns() || !w.round || (training && *training == std::make_pair(w.life, *w.round))) continue;
      r["first_step_ms"] = static_cast<double>(w.t) / 1e6;
      r["recovery_ms"] = static_cast<double>(w.t - f.time.ns()) / 1e6;
      r["round"] = *w.round;
      break;
    }
    recoveries.push_back(std::move(r));
  }
  nlohmann::json out;
  out["rendezvous"] = rendezvous;
  out["elastic"] = {{"steps", spec_.steps}, {"committed", committed}, {"commits", writes_.size()}, {"agents", agents},
                    {"recoveries", recoveries}};
  if (!writes_.empty()) {
    out["elastic"]["first_commit_ms"] = static_cast<double>(writes_.front().t) / 1e6;
    out["elastic"]["last_commit_ms"] = static_cast<double>(writes_.back().t) / 1e6;
  }
  const std::string store = scenario_.cluster.node_name(spec_.rendezvous.store_node);
  out["params"] = {{store, nlohmann::json::object()}};
  out["local_params"] = {{store, nlohmann::json::object()}};
  if (final_step_) {
    const std::vector<Tensor> local = model_.train_locally(*final_step_);
    for (size_t i = 0; i < final_params_.size() && i < local.size(); ++i) {
      out["params"][store][model_.param_name(i)] = tensor_report_json(final_params_[i], options.full_tensors);
      out["local_params"][store][model_.param_name(i)] = tensor_report_json(local[i], options.full_tensors);
    }
  }

  // Round by round, in words: each round's members and start, its commits, what ended it.
  std::vector<std::pair<int64_t, std::string>> lines;  // (time, line), told in time order
  for (const auto& [key, r] : rounds) {
    const auto& [life, round] = key;
    std::string members;
    for (const nlohmann::json& m : r["members"]) members += (members.empty() ? "" : ", ") + m["node"].get<std::string>();
    std::string line = "round " + std::to_string(round) + (life == 0 ? "" : " of the store's life " + std::to_string(life + 1)) +
                       " at " + seconds(r["t"].get<int64_t>()) + ": " + std::to_string(r["world"].get<uint32_t>()) + " nodes (" +
                       members + ")";
    if (r.contains("start_step")) line += ", from step " + std::to_string(r["start_step"].get<uint64_t>());
    uint64_t first = 0, last = 0;
    for (const StoreWrite& w : writes_) {
      if (w.life != life || w.round != round || !w.step) continue;
      if (first == 0) first = *w.step;
      last = *w.step;
    }
    line += first == 0 ? "; committed nothing" : "; committed steps " + std::to_string(first) + ".." + std::to_string(last);
    lines.emplace_back(r["t"].get<int64_t>(), line);
  }
  for (const nlohmann::json& r : recoveries) {
    if (!r.contains("recovery_ms")) continue;
    char line[160];
    std::snprintf(line, sizeof(line), "the %s of %s cost %.3f s: from it to the first step of round %llu",
                  r["fault"].get<std::string>().c_str(), r["node"].get<std::string>().c_str(), r["recovery_ms"].get<double>() / 1e3,
                  static_cast<unsigned long long>(r["round"].get<uint64_t>()));
    lines.emplace_back(static_cast<int64_t>(r["first_step_ms"].get<double>() * 1e6), line);
  }
  for (const runtime::FaultEvent& f : records_.fault_history) {
    if (f.kind == runtime::FaultEvent::Kind::connection_failed || f.kind == runtime::FaultEvent::Kind::start) continue;
    lines.emplace_back(f.time.ns(), "fault at " + seconds(f.time.ns()) + ": " + std::string(runtime::fault_event_kind_name(f.kind)) +
                       (f.kind == runtime::FaultEvent::Kind::partition || f.kind == runtime::FaultEvent::Kind::heal
                            ? std::string()
                            : " " + scenario_.cluster.node_name(f.node)));
  }
  for (const AgentLife& a : agents_) {
    for (const Event& e : a.events) {
      if (e.event == "round_lost") {
        lines.emplace_back(e.t, "at " + seconds(e.t) + " " + a.name + " found its round gone (" + e.detail + "): it rejoins");
      }
      if (e.event == "group_failed") {
        lines.emplace_back(e.t, "at " + seconds(e.t) + " " + a.name + "'s group of round " + std::to_string(e.round) + " failed (" +
                           std::to_string(e.remaining) + " restarts left): " + e.detail);
      }
    }
    if (a.result && a.result->outcome != "succeeded") {
 lines.emplace_back(a.result->t, "at " + seconds(a.result->t) + " " + a.name + " ended " + a.result->outcome +
                         (a.result->error.empty() ? "" : ": " + a.result->error));
    }
  }
 std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json timeline = nlohmann::json::array();
  for (const auto& [t, line] : lines) timeline.push_back(line);
  timeline.push_back(std::to_string(committed) + " of " + std::to_string(spec_.steps) + " steps committed in " +
                     std::to_string(writes_.size()) + " commits over " + std::to_string(rounds.size()) + " rounds");
  out["timeline"] = timeline;
  return out;
}

}  // namespace dagsim::scenarios
