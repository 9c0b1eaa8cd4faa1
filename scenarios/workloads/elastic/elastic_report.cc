// ElasticJudge::results (elastic_judge.h): an elastic run's results for the report: the rounds
// (by store life and round, with who left each and why), the job and its agents, each death's recovery, the trained and the
// local parameters, and the timeline, the run told round by round in time order.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "scenarios/workloads/elastic/elastic_judge.h"
#include "scenarios/workloads/timeline_text.h"
#include "scenarios/workloads/program/tensor_report.h"
#include "core/base/printable.h"

namespace dagsim::scenarios {
namespace {

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", s);
  return text;
}

}  // namespace

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
        r = {{"store_life", g.store_life}, {"round", g.round}, {"world_size", g.world}, {"members", members}, {"t", g.t}};
      }
      r["t"] = std::min(r["t"].get<int64_t>(), g.t);
      if (g.start_step) r["start_step"] = *g.start_step;
    }
  }
  nlohmann::json rendezvous = nlohmann::json::array();
  for (auto it = rounds.begin(); it != rounds.end(); ++it) {
    const nlohmann::json& r = it->second;
    nlohmann::json shown = r;
    shown.erase("t");
    shown["completed_ms"] = static_cast<double>(r["t"].get<int64_t>()) / 1e6;  // the rendezvous workload's name
    const auto next = std::next(it);
    shown["removed"] = left_round(r, next == rounds.end() ? nullptr : &next->second);
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
  // The loss of each committed step (the commit that made it, as its rank 0 computed it), and
  // local training's: the same names as the program and model workloads' ("losses", "local_losses").
  std::map<uint64_t, std::pair<int64_t, double>> loss_by_step;  // step -> (t, loss), the latest commit's
  for (const AgentLife& a : agents_) {
    for (const Commit& c : a.commits) {
      auto [it, inserted] = loss_by_step.try_emplace(c.step, c.t, c.loss);
      if (!inserted && c.t >= it->second.first) it->second = {c.t, c.loss};
    }
  }
  out["losses"] = nlohmann::json::array();
  out["local_losses"] = nlohmann::json::array();
  const uint64_t trained = final_step_ ? *final_step_ : committed;
  const LocalTraining& local_run = local_training(trained);
  const std::vector<Tensor>& local = local_run.params;
  const std::vector<double>& local_losses = local_run.losses;
  for (uint64_t step = 1; step <= trained; ++step) {
    const auto it = loss_by_step.find(step);
    out["losses"].push_back(it == loss_by_step.end() ? nlohmann::json(nullptr) : number_record(it->second.second));
    out["local_losses"].push_back(number_record(local_losses[step - 1]));
  }
  if (final_step_) {
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
                       " at " + seconds(r["t"].get<int64_t>()) + ": " + std::to_string(r["world_size"].get<uint32_t>()) + " nodes (" +
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
    lines.emplace_back(f.time.ns(), "fault at " + seconds(f.time.ns()) + ": " + describe_fault(f, scenario_.cluster));
  }
  for (const AgentLife& a : agents_) {
    // A node that joins after the job began: a late join, or an agent restarted with its node.
    if (a.started && *a.started > 0) {
      lines.emplace_back(*a.started, "at " + seconds(*a.started) + " " + a.name + "'s agent " +
                                         (a.life == 0 ? "joined late" : "started again with its node") +
                                         ": it waits for the next round");
    }
    for (const Event& e : a.events) {
      if (e.event == "round_lost") {
        lines.emplace_back(e.t, "at " + seconds(e.t) + " " + a.name + " found its round gone (" + e.detail + "): it rejoins");
      }
      if (e.event == "group_failed") {
        lines.emplace_back(e.t, "at " + seconds(e.t) + " " + a.name + "'s group of round " + std::to_string(e.round) + " failed (" +
                           counted(e.remaining, "restart") + " left): " + e.detail);
      }
    }
    if (a.result && a.result->outcome != "succeeded") {
    lines.emplace_back(a.result->t, "at " + seconds(a.result->t) + " " + a.name + " ended " + a.result->outcome +
                         (a.result->error.empty() ? "" : ": " + a.result->error));
    }
  }
  for (const auto& [t, line] : stall_lines(rounds)) lines.emplace_back(t, line);
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json timeline = nlohmann::json::array();
  for (const auto& [t, line] : lines) timeline.push_back(line);
  timeline.push_back(std::to_string(committed) + " of " + std::to_string(spec_.steps) + " steps committed in " +
                     std::to_string(writes_.size()) + " commits over " + std::to_string(rounds.size()) + " rounds");
  if (!writes_.empty() && committed > 0) {
    // The pace, and what the faults cost of it (each death's recovery, above).
    const double span_s = static_cast<double>(writes_.back().t - writes_.front().t) / 1e9;
    double lost_s = 0;
    for (const nlohmann::json& r : recoveries) lost_s += r.value("recovery_ms", 0.0) / 1e3;
    char line[200];
    std::snprintf(line, sizeof(line), "%.1f steps/s from the first commit to the last (%.3f s)%s", span_s > 0 ? static_cast<double>(committed) / span_s : 0.0,
                  span_s, lost_s > 0 ? (", of which faults cost " + format_seconds(lost_s)).c_str() : "");
    timeline.push_back(line);
    out["elastic"]["steps_per_s"] = span_s > 0 ? static_cast<double>(committed) / span_s : 0.0;
    out["elastic"]["fault_cost_ms"] = lost_s * 1e3;
  }
  if (!loss_by_step.empty() && trained > 0) {
    std::vector<std::optional<double>> losses;
    for (uint64_t step = 1; step <= trained; ++step) {
      const auto it = loss_by_step.find(step);
      losses.push_back(it == loss_by_step.end() ? std::nullopt : std::optional<double>(it->second.second));
    }
    timeline.push_back(loss_line(losses, local_losses));
  }
  out["timeline"] = timeline;
  return out;
}

nlohmann::json ElasticJudge::left_round(const nlohmann::json& round, const nlohmann::json* next) const {
  // The round is the newest from its forming to the next round's (or the run's end).
  const int64_t begin = round["t"].get<int64_t>();
  const int64_t end = next != nullptr ? (*next)["t"].get<int64_t>() : records_.end.ns() + 1;
  nlohmann::json removed = nlohmann::json::array();
  for (const nlohmann::json& m : round["members"]) {
    const std::string name = m["node"].get<std::string>();
    std::optional<uint32_t> node;
    for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) {
      if (scenario_.cluster.node_name(i) == name) node = i;
    }
    if (!node) continue;
    std::optional<std::pair<int64_t, std::string>> gone;  // (when, why)
    for (const runtime::FaultEvent& f : records_.fault_history) {
      using Kind = runtime::FaultEvent::Kind;
      if (f.node != *node || f.time.ns() < begin || f.time.ns() >= end) continue;
      if (f.kind == Kind::kill || f.kind == Kind::crash) {
        gone = std::make_pair(f.time.ns(), f.kind == Kind::kill ? "killed" : "crashed");
        break;
      }
    }
    for (const AgentLife& a : agents_) {
      if (gone || a.node != *node || !a.result || a.result->outcome == "succeeded") continue;
      if (a.result->t >= begin && a.result->t < end) gone = std::make_pair(a.result->t, a.result->outcome);
    }
    if (!gone && next != nullptr) {
      bool kept = false;
      for (const nlohmann::json& later : (*next)["members"]) kept = kept || later["node"] == name;
      if (!kept) gone = std::make_pair(end, "not in round " + std::to_string((*next)["round"].get<uint64_t>()));
    }
    if (gone) removed.push_back({{"node", name}, {"at_ms", static_cast<double>(gone->first) / 1e6}, {"why", gone->second}});
  }
  // In the order they left, as the rendezvous workload lists its removals.
  std::stable_sort(removed.begin(), removed.end(),
                   [](const nlohmann::json& a, const nlohmann::json& b) { return a["at_ms"].get<double>() < b["at_ms"].get<double>(); });
  return removed;
}

std::vector<std::pair<int64_t, std::string>> ElasticJudge::stall_lines(
    const std::map<std::pair<uint64_t, uint64_t>, nlohmann::json>& rounds) const {
  std::vector<int64_t> commits;
  for (const StoreWrite& w : writes_) {
    if (w.step) commits.push_back(w.t);
  }
  std::vector<std::pair<int64_t, std::string>> out;
  if (commits.size() < 3) return out;
  std::vector<int64_t> gaps;
  for (size_t i = 1; i < commits.size(); ++i) gaps.push_back(commits[i] - commits[i - 1]);
  std::vector<int64_t> sorted = gaps;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
  // A stall: ten typical steps, and at least a quarter second, without a commit.
  const int64_t bound = std::max<int64_t>(10 * sorted[sorted.size() / 2], 250'000'000);
  for (size_t i = 0; i < gaps.size(); ++i) {
    if (gaps[i] <= bound) continue;
    const int64_t from = commits[i], to = commits[i + 1];
    std::string line = "stall: no step committed from " + seconds(from) + " to " + seconds(to) + " (" +
                       seconds(to - from) + ")";
    for (const auto& [key, r] : rounds) {
      const int64_t formed = r["t"].get<int64_t>();
      if (formed <= from || formed > to) continue;
      line += "; round " + std::to_string(key.second) + ", formed at " + seconds(formed) + ", took training up again";
      break;
    }
    out.emplace_back(from, std::move(line));
  }
  return out;
}

std::vector<WorkloadSpan> ElasticJudge::spans() const {
  std::vector<WorkloadSpan> out;
  const int64_t run_end = records_.end.ns();
  for (const AgentLife& a : agents_) {
    // A life without a result ended with its node: at the first kill, crash or restart of it
    // after the life began.
    int64_t life_end = a.result ? a.result->t : run_end;
    if (!a.result && a.died) {
      const int64_t began = a.started ? *a.started : (a.groups.empty() ? 0 : a.groups.front().t);
      for (const runtime::FaultEvent& f : records_.fault_history) {
        using Kind = runtime::FaultEvent::Kind;
        if (f.node != a.node || f.time.ns() < began) continue;
        if (f.kind == Kind::kill || f.kind == Kind::crash || f.kind == Kind::restart) {
          life_end = f.time.ns();
          break;
        }
      }
    }
    for (size_t g = 0; g < a.groups.size(); ++g) {
      const Group& group = a.groups[g];
      // The group ends at its first failure, success or loss after it began, else at the next
      // group's start or the life's end.
      int64_t end = g + 1 < a.groups.size() ? a.groups[g + 1].t : life_end;
      for (const Event& e : a.events) {
        if (e.t < group.t || e.round != group.round) continue;
        if (e.event == "group_failed" || e.event == "group_succeeded" || e.event == "round_lost") {
          end = std::min(end, e.t);
          break;
        }
      }
      out.push_back({a.node, "round " + std::to_string(group.round) + " (rank " + std::to_string(group.rank) + " of " +
                                 std::to_string(group.world) + ")",
                     "round", group.t, std::max(end, group.t), a.name});
    }
    for (const Event& e : a.events) {
      if (e.event != "group_failed") continue;
      // From the failure to the next group's start: the time the restart took.
      int64_t end = life_end;
      for (const Group& group : a.groups) {
        if (group.t > e.t) {
          end = group.t;
          break;
        }
      }
      out.push_back({a.node, "restart (" + std::to_string(e.remaining) + " left)", "restart", e.t, std::max(end, e.t), e.detail});
    }
    // The steps this life drove as rank 0: each from the previous commit (or its group's start).
    int64_t from = 0;
    for (const Commit& c : a.commits) {
      for (const Group& group : a.groups) {
        if (group.t <= c.t && group.round == c.round && group.t > from) from = group.t;
      }
      char loss[48];
      std::snprintf(loss, sizeof(loss), "loss %.6g", c.loss);
      out.push_back({a.node, "step " + std::to_string(c.step), "step", from, std::max(c.t, from), loss});
      from = c.t;
    }
  }
  return out;
}

}  // namespace dagsim::scenarios
