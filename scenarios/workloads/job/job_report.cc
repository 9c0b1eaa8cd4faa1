// A job run's results and spans for the report (job_records.h: job_results, job_spans).
#include <algorithm>
#include <cstdio>
#include <map>

#include "scenarios/workloads/job/job_records.h"

namespace dagsim::scenarios::job_records {

namespace {

using nlohmann::json;

std::string seconds(double ms) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3f s", ms / 1e3);
  return buf;
}

int64_t ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

json exit_json(const Exit& e) {
  if (e.code) return {{"code", *e.code}};
  if (!e.signal.empty()) return {{"signal", e.signal}};
  return nullptr;
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Which agent incarnation a round's participant is: its name ("agent2"), or a pid in its text
// (PyTorch's node descriptor "HOST_PID_LOCALID"; dagsim launch's names one the same way).
const Incarnation* participant(const JobRecords& job, const std::string& who, double at_ms) {
  const Incarnation* by_name = nullptr;
  for (const Incarnation& inc : job.incarnations) {
    if (who == inc.name && inc.started_ms <= at_ms && (!inc.ended_ms || *inc.ended_ms >= at_ms)) by_name = &inc;
  }
  if (by_name != nullptr) return by_name;
  for (const Incarnation& inc : job.incarnations) {
    const std::string pid = "_" + std::to_string(inc.pid) + "_";
    if ((who + "_").find(pid) != std::string::npos || who == std::to_string(inc.pid)) return &inc;
  }
  for (const Incarnation& inc : job.incarnations) {
    if (who == inc.name) return &inc;
  }
  return nullptr;
}

// The worker groups of an incarnation: the k-th worker of each local rank is in group k.
std::vector<std::vector<const Worker*>> groups_of(const Incarnation& inc) {
  std::vector<const Worker*> sorted;
  for (const Worker& w : inc.workers) sorted.push_back(&w);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Worker* a, const Worker* b) { return a->started_ms < b->started_ms; });
  std::map<uint32_t, size_t> seen;
  std::vector<std::vector<const Worker*>> groups;
  for (const Worker* w : sorted) {
    const size_t g = seen[w->local_rank]++;
    if (groups.size() <= g) groups.resize(g + 1);
    groups[g].push_back(w);
  }
  return groups;
}

std::vector<std::string> job_names(const Scenario& scenario) {
  std::vector<std::string> names;
  for (uint32_t n = 0; n < scenario.cluster.nodes; ++n) names.push_back(scenario.cluster.node_name(n));
  return names;
}

}  // namespace

json job_results(const Scenario& scenario, const JobRecords& job) {
  (void)scenario;
  json agents = json::array();
  for (const Incarnation& inc : job.incarnations) {
    json workers = json::array();
    for (const Worker& w : inc.workers) {
      workers.push_back({{"local_rank", w.local_rank},
                         {"rank", w.rank ? json(*w.rank) : json(nullptr)},
                         {"pid", w.pid},
                         {"started_ms", w.started_ms},
                         {"ended_ms", opt(w.ended_ms)},
                         {"exit", exit_json(w.exit)}});
    }
    agents.push_back({{"agent", inc.name},
                      {"incarnation", inc.incarnation},
                      {"pid", inc.pid},
                      {"started_ms", inc.started_ms},
                      {"ended_ms", opt(inc.ended_ms)},
                      {"exit", exit_json(inc.exit)},
                      {"stopped_by_run", inc.stopped_by_run},
                      {"restarts", inc.restarts},
                      {"log", inc.log},
                      {"workers", std::move(workers)}});
  }
  json rounds = json::array();
  json rendezvous = json::array();  // the report's rounds table (html_report.cc)
  for (const Round& r : job.rounds) {
    rounds.push_back({{"round", r.round}, {"at_ms", r.at_ms}, {"participants", r.participants}});
    json members = json::array();
    for (size_t i = 0; i < r.participants.size(); ++i) {
      const Incarnation* inc = participant(job, r.participants[i], r.at_ms);
      members.push_back({{"node", inc != nullptr && inc->name != r.participants[i] ? inc->name + " (" + r.participants[i] + ")" : r.participants[i]}, {"rank", i}});
    }
    rendezvous.push_back({{"round", r.round}, {"completed_ms", r.at_ms}, {"members", std::move(members)}, {"removed", json::array()}});
  }
  json faults = json::array();
  for (const Fault& f : job.faults) {
    if (!f.struck()) continue;
    faults.push_back({{"kind", f.kind}, {"target", f.target}, {"line", f.line}, {"at_ms", *f.at_ms},
                      {"until_ms", opt(f.until_ms)}, {"detail", f.detail}});
  }
  json violations = json::array();
  for (const Violation& v : job.violations) violations.push_back(v.text);
  const std::string verdict = !job.store_error.empty() ? "not judged: " + job.store_error
                              : job.violations.empty() ? "the invariants hold"
                                                       : std::to_string(job.violations.size()) + " violation(s)";
  json orphans = json::array();
  for (const Orphan& o : job.orphans) {
    json entry = {{"pid", o.pid}, {"cmdline", o.cmdline}};
    if (o.agent) entry["agent"] = *o.agent;
    if (o.incarnation) entry["incarnation"] = *o.incarnation;
    orphans.push_back(std::move(entry));
  }

  // The story, in time order.
  std::vector<std::pair<double, std::string>> events;
  for (const Incarnation& inc : job.incarnations) {
    events.emplace_back(inc.started_ms, inc.label() + " started (pid " + std::to_string(inc.pid) + ", " +
                                            std::to_string(inc.workers.size()) + " worker process(es) over its life)");
    if (inc.ended_ms) {
      events.emplace_back(*inc.ended_ms, inc.label() + " ended: " + inc.exit.text() +
                                             (inc.stopped_by_run ? " (stopped by the run at its timeout)" : "") +
                                             (inc.restarts > 0 ? ", after " + std::to_string(inc.restarts) + " worker-group restart(s)" : ""));
    }
  }
  for (const Round& r : job.rounds) {
    std::string who;
    for (const std::string& p : r.participants) who += (who.empty() ? "" : ", ") + p;
    events.emplace_back(r.at_ms, "round " + std::to_string(r.round) + " formed: " + std::to_string(r.participants.size()) +
                                     " participant(s) (" + who + ")");
  }
  for (const Fault& f : job.faults) {
    if (!f.struck()) continue;
    events.emplace_back(*f.at_ms, "the " + f.label() + " struck" + (f.trigger.empty() ? "" : " (" + f.trigger + ")") +
                                      (f.detail.empty() ? "" : ": " + f.detail));
    if (f.until_ms) events.emplace_back(*f.until_ms, "the " + f.label() + " ended");
  }
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  json timeline = json::array();
  timeline.push_back(std::string("note: ") + kSeedNote);
  timeline.push_back("job: " + job.launcher + " agents, rendezvous backend " + job.rdzv_backend + ", in " + job.dir);
  for (const auto& [t, line] : events) timeline.push_back(seconds(t) + ": " + line);
  for (const Fault& f : job.faults) {
    if (!f.struck()) timeline.push_back("the " + f.label() + " never struck" + (f.trigger.empty() ? "" : " (" + f.trigger + ")"));
  }
  timeline.push_back("store: " + verdict);

  json out = {{"job",
               {{"note", kSeedNote},
                {"dir", job.dir},
                {"launcher", job.launcher},
                {"rdzv_backend", job.rdzv_backend},
                {"seed", job.seed},
                {"agents", std::move(agents)},
                {"rounds", std::move(rounds)},
                {"faults_fired", std::move(faults)},
                {"store",
                 {{"record", job.store_record},
                  {"format", job.store_format},
                  {"verdict", verdict},
                  {"violations", std::move(violations)},
                  {"error", job.store_error}}},
                {"orphans", std::move(orphans)},
                {"reference", job.reference}}},
              {"rendezvous", std::move(rendezvous)},
              {"timeline", std::move(timeline)}};
  return out;
}

std::vector<WorkloadSpan> job_spans(const Scenario& scenario, const JobRecords& job) {
  const uint32_t agents = scenario.cluster.nodes;
  std::vector<WorkloadSpan> out;
  auto end_of = [&](const std::optional<double>& ended) { return std::max(0.0, ended.value_or(job.end_ms)); };
  // Agent incarnations first: the rest is drawn over them.
  for (const Incarnation& inc : job.incarnations) {
    const double end = std::max(inc.started_ms, end_of(inc.ended_ms));
    out.push_back({inc.node, inc.label() + " pid " + std::to_string(inc.pid), "agent", ns(inc.started_ms), ns(end),
                   inc.exit.text() + (inc.stopped_by_run ? " (stopped by the run)" : "") +
                       (inc.restarts > 0 ? ", " + std::to_string(inc.restarts) + " restart(s)" : "")});
  }
  // Rounds: on each participant's row, until the next round formed or its incarnation ended.
  for (size_t i = 0; i < job.rounds.size(); ++i) {
    const Round& r = job.rounds[i];
    const double next = i + 1 < job.rounds.size() ? job.rounds[i + 1].at_ms : job.end_ms;
    for (size_t rank = 0; rank < r.participants.size(); ++rank) {
      const Incarnation* inc = participant(job, r.participants[rank], r.at_ms);
      if (inc == nullptr) continue;
      const double end = std::max(r.at_ms, std::min(next, end_of(inc->ended_ms)));
      out.push_back({inc->node, "round " + std::to_string(r.round) + " (rank " + std::to_string(rank) + " of " +
                                    std::to_string(r.participants.size()) + ")",
                     "round", ns(r.at_ms), ns(end), r.participants[rank]});
    }
  }
  // Workers, and the restarts between an incarnation's worker groups.
  for (const Incarnation& inc : job.incarnations) {
    for (const Worker& w : inc.workers) {
      out.push_back({inc.node, inc.name + ":" + std::to_string(w.local_rank) + " pid " + std::to_string(w.pid), "worker",
                     ns(w.started_ms), ns(std::max(w.started_ms, end_of(w.ended_ms))),
                     (w.rank ? "rank " + std::to_string(*w.rank) + ", " : std::string()) + w.exit.text()});
    }
    const auto groups = groups_of(inc);
    for (size_t g = 1; g < groups.size(); ++g) {
      double from = 0, to = groups[g].front()->started_ms;
      for (const Worker* w : groups[g - 1]) from = std::max(from, end_of(w->ended_ms));
      for (const Worker* w : groups[g]) to = std::min(to, w->started_ms);
      from = std::min(from, to);
      out.push_back({inc.node, "restart " + std::to_string(g) + " of " + inc.label(), "restart", ns(from), ns(to),
                     "worker group " + std::to_string(g) + " started"});
    }
  }
  // Faults, on the rows they struck (a store fault on the store's row, after the agents').
  for (const Fault& f : job.faults) {
    if (!f.struck()) continue;
    const double end = std::max(*f.at_ms, f.until_ms.value_or(*f.at_ms));
    const std::string detail = f.detail.empty() ? f.trigger : f.detail;
    if (f.kind == "partition") {
      for (const auto& group : partition_groups(f.target)) {
        for (const std::string& name : group) {
          if (auto a = target_agent(name, job_names(scenario))) out.push_back({*a, f.label(), "fault", ns(*f.at_ms), ns(end), detail});
        }
      }
    } else if (f.target == "store") {
      out.push_back({agents, f.label(), "fault", ns(*f.at_ms), ns(end), detail});
    } else if (auto a = target_agent(f.target, job_names(scenario))) {
      out.push_back({*a, f.label(), "fault", ns(*f.at_ms), ns(end), detail});
    }
  }
  return out;
}

}  // namespace dagsim::scenarios::job_records
