// ElasticJudge (elastic_judge.h): the elastic run's checks and results, from its records.
#include "scenarios/workloads/elastic/elastic_judge.h"

#include <algorithm>
#include <cstdio>

#include "scenarios/workloads/program/program_workload.h"
#include "scenarios/workloads/program/tensor_report.h"
#include "core/base/printable.h"

namespace dagsim::scenarios {

namespace {

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) throw errors::invalid_records(what + ": missing \"" + key + "\"");
  return j.at(key);
}

std::string text(const nlohmann::json& j, const char* key, const std::string& what) {
  const nlohmann::json& v = field(j, key, what);
  if (!v.is_string()) throw errors::invalid_records(what + "." + key + ": expected a string");
  return v.get<std::string>();
}

template <typename T>
T integer(const nlohmann::json& j, const char* key, const std::string& what) {
  return integer_from_record<T>(field(j, key, what), what + "." + key);
}

const nlohmann::json& array(const nlohmann::json& j, const char* key, const std::string& what) {
  const nlohmann::json& v = field(j, key, what);
  if (!v.is_array()) throw errors::invalid_records(what + "." + key + ": expected an array");
  return v;
}

}  // namespace

std::string ElasticJudge::seconds(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

ElasticJudge::ElasticJudge(const Scenario& scenario, const RunRecords& records)
    : scenario_(scenario), records_(records), spec_(scenario.workload.as<ElasticSpec>()), model_(spec_, records.seed) {
  for (const NodeRecord& r : records.nodes) {
    const std::string what = scenario.cluster.node_name(r.node) + "." + std::to_string(r.incarnation);
    if (r.node == spec_.rendezvous.store_node) {
      if (!r.data.contains("checkpoints")) continue;  // a life that died before it served
      for (const nlohmann::json& w : array(r.data, "checkpoints", what)) {
        StoreWrite write;
        write.t = integer<int64_t>(w, "t", what + ".checkpoints");
        write.version = integer<uint64_t>(w, "v", what + ".checkpoints");
        write.life = r.incarnation;
        if (w.contains("step")) write.step = integer<uint64_t>(w, "step", what + ".checkpoints");
        if (w.contains("round")) write.round = integer<uint64_t>(w, "round", what + ".checkpoints");
        if (w.contains("deleted")) write.problem = "the checkpoint was deleted";
        if (w.contains("error")) write.problem = "a value that is no checkpoint of this job was written: " + text(w, "error", what);
        if (write.problem.empty() && (!write.step || !write.round)) {
          throw errors::invalid_records(what + ".checkpoints: an entry without step and round");
        }
        writes_.push_back(write);
      }
      if (r.data.contains("final")) {
        const nlohmann::json& f = r.data.at("final");
        final_step_ = integer<uint64_t>(f, "step", what + ".final");
        final_params_.clear();
        for (const nlohmann::json& p : array(f, "params", what + ".final")) {
          final_params_.push_back(tensor_from_record(p, what + ".final.params"));
        }
      } else {
        final_step_.reset();  // a later life without one: the earlier life's checkpoint is gone
        final_params_.clear();
      }
      continue;
    }
    if (!r.data.contains("node")) continue;
    AgentLife life;
    const std::vector<const NodeRecord*> lives = records.records_of(r.node);
    const runtime::NodeState last_state = r.node < records.final_states.size() ? records.final_states[r.node] : runtime::NodeState::up;
    life.died = lives.back() != &r || last_state == runtime::NodeState::killed || last_state == runtime::NodeState::crashed;
    life.name = text(r.data, "node", what) + (r.incarnation == 0 ? "" : " (life " + std::to_string(r.incarnation + 1) + ")");
    life.node = r.node;
    life.life = r.incarnation;
    if (r.data.contains("started")) life.started = integer<int64_t>(r.data, "started", what);
    for (const nlohmann::json& e : array(r.data, "events", what)) {
      Event ev;
      ev.t = integer<int64_t>(e, "t", what + ".events");
      ev.event = text(e, "event", what + ".events");
      ev.round = integer<uint64_t>(e, "round", what + ".events");
      ev.rank = integer<uint32_t>(e, "rank", what + ".events");
      ev.world = integer<uint32_t>(e, "world", what + ".events");
      if (e.contains("waiting")) ev.waiting = integer<uint64_t>(e, "waiting", what + ".events");
      if (e.contains("remaining")) ev.remaining = integer<uint32_t>(e, "remaining", what + ".events");
      if (e.contains("detail")) ev.detail = text(e, "detail", what + ".events");
      life.events.push_back(ev);
    }
    for (const nlohmann::json& g : array(r.data, "groups", what)) {
      Group group;
      group.t = integer<int64_t>(g, "t", what + ".groups");
      group.store_life = integer<uint64_t>(g, "store_life", what + ".groups");
      group.round = integer<uint64_t>(g, "round", what + ".groups");
      group.rank = integer<uint32_t>(g, "rank", what + ".groups");
      group.world = integer<uint32_t>(g, "world", what + ".groups");
      for (const nlohmann::json& m : array(g, "members", what + ".groups")) {
        if (!m.is_string()) throw errors::invalid_records(what + ".groups.members: expected names");
        group.members.push_back(m.get<std::string>());
      }
      if (g.contains("start_step")) group.start_step = integer<uint64_t>(g, "start_step", what + ".groups");
      life.groups.push_back(group);
    }
    for (const nlohmann::json& c : array(r.data, "commits", what)) {
      if (!c.contains("loss")) throw errors::invalid_records(what + ".commits: a commit without its loss");
      life.commits.push_back({integer<int64_t>(c, "t", what + ".commits"), integer<uint64_t>(c, "step", what + ".commits"),
                              integer<uint64_t>(c, "round", what + ".commits"), integer<uint64_t>(c, "v", what + ".commits"),
                              number_from_record(c.at("loss"), what + ".commits.loss")});
    }
    if (r.data.contains("final")) {
      // A rank 0's last commit as the store acknowledged it: the committed parameters when the
      // store died (the store's own record wins while it lives).
      const nlohmann::json& f = r.data.at("final");
      const uint64_t step = integer<uint64_t>(f, "step", what + ".final");
      if (!driver_final_step_ || step > *driver_final_step_) {  // the latest commit any rank 0 kept
        driver_final_step_ = step;
        driver_final_params_.clear();
        for (const nlohmann::json& p : array(f, "params", what + ".final")) {
          driver_final_params_.push_back(tensor_from_record(p, what + ".final.params"));
        }
      }
    }
    if (r.data.contains("result")) {
      const nlohmann::json& res = r.data.at("result");
      Result result;
      result.outcome = text(res, "outcome", what + ".result");
      result.t = integer<int64_t>(res, "t", what + ".result");
      if (res.contains("restarts")) result.restarts = integer<uint32_t>(res, "restarts", what + ".result");
      if (res.contains("error")) result.error = text(res, "error", what + ".result");
      if (res.contains("code")) result.code = text(res, "code", what + ".result");
      life.result = result;
    }
    agents_.push_back(std::move(life));
  }
  if (!final_step_ && driver_final_step_) {
    final_step_ = driver_final_step_;
    final_params_ = driver_final_params_;
  }
}

const ElasticJudge::LocalTraining& ElasticJudge::local_training(uint64_t steps) const {
  if (!local_ || local_->steps != steps) {
    LocalTraining trained{steps, {}, {}};
    trained.params = model_.train_locally(steps, &trained.losses);
    local_ = std::move(trained);
  }
  return *local_;
}

CheckResult ElasticJudge::params_match_local(const CheckSpec& spec) const {
  if (!final_step_) return {spec.kind, false, "no checkpoint survived the run (the store's last life holds none)"};
  const std::vector<Tensor>& local = local_training(*final_step_).params;
  const double rtol = spec.rtol.value_or(1e-9), atol = spec.atol.value_or(1e-12);
  double worst = 0;
  std::string problems;
  for (size_t i = 0; i < local.size(); ++i) {
    if (i >= final_params_.size() || !tensors_allclose(final_params_[i], local[i], rtol, atol, spec.equal_nan, worst)) {
      problems += model_.param_name(i) + (i < final_params_.size() ? ": " + final_params_[i].to_string() : ": missing") +
                  " vs local " + local[i].to_string() + "; ";
    }
  }
  if (!problems.empty()) return {spec.kind, false, "after " + std::to_string(*final_step_) + " steps: " + problems};
  char figures[160];
  std::snprintf(figures, sizeof(figures), " (rtol %g, atol %g); largest difference %g", rtol, atol, worst);
  return {spec.kind, true,
          std::to_string(local.size()) + " parameters after " + std::to_string(*final_step_) + " committed steps equal local training" + figures};
}

CheckResult ElasticJudge::no_step_twice(const CheckSpec& spec) const {
  uint64_t last = 0;
  // Each committed version's step. Versions are unique across store lives (their top 16 bits are
  // the store's incarnation: store_service.h), and so is each life's last recorded version.
  std::map<uint64_t, uint64_t> stored;
  std::map<uint64_t, uint64_t> last_recorded;
  for (const StoreWrite& w : writes_) {
    if (!w.problem.empty()) return {spec.kind, false, "at " + seconds(w.t) + ": " + w.problem};
    if (*w.step != last + 1) {
      return {spec.kind, false,
              "at " + seconds(w.t) + " round " + std::to_string(*w.round) + " committed step " + std::to_string(*w.step) +
                  " after step " + std::to_string(last) + (*w.step <= last ? ": a step applied twice" : ": steps lost")};
    }
    last = *w.step;
    stored[w.version] = *w.step;
    last_recorded[w.version >> 48] = std::max(last_recorded[w.version >> 48], w.version);
  }
  // Over TCP a killed store's record is the one it last flushed, so commits after its life's last
  // recorded version cannot be judged; every earlier one must be there.
  for (const AgentLife& a : agents_) {
    for (const Commit& c : a.commits) {
      const auto it = stored.find(c.version);
      const bool found = it != stored.end() && it->second == c.step;
      const auto recorded = last_recorded.find(c.version >> 48);
      if (!found && recorded != last_recorded.end() && recorded->second > c.version) {
        return {spec.kind, false, a.name + " was told step " + std::to_string(c.step) + " committed as version " +
                                      std::to_string(c.version) + ", which the store's history lacks"};
      }
    }
  }
  return {spec.kind, true, std::to_string(writes_.size()) + " commits, steps 1.." + std::to_string(last) + " each once and in order"};
}

CheckResult ElasticJudge::all_steps_committed(const CheckSpec& spec) const {
  const uint64_t committed = writes_.empty() || !writes_.back().step ? 0 : *writes_.back().step;
  if (committed < spec_.steps) {
    return {spec.kind, false, std::to_string(committed) + " of " + std::to_string(spec_.steps) + " steps committed when the run ended (" +
                                  records_.outcome + " at " + seconds(records_.end.ns()) + ")"};
  }
  if (records_.outcome != "finished") return {spec.kind, false, "the run did not finish: " + records_.outcome};
  for (const AgentLife& a : agents_) {
    if (a.result && a.result->outcome == "failed") return {spec.kind, false, a.name + " failed: " + a.result->error};
  }
  return {spec.kind, true, "all " + std::to_string(spec_.steps) + " steps committed by " + seconds(writes_.back().t)};
}

CheckResult ElasticJudge::restarts(const CheckSpec& spec) const {
  const uint32_t max = spec_.agent.max_restarts;
  uint32_t counted_total = 0, waiting_total = 0, lost_total = 0;
  for (const AgentLife& a : agents_) {
    uint32_t remaining = max, counted = 0;
    bool spent = false;
    for (const Event& e : a.events) {
      if (e.event == "group_failed") {
        if (e.remaining != remaining) {
          return {spec.kind, false, a.name + ": a group failed with " + dagsim::counted(e.remaining, "restart") + " left; " +
                                        std::to_string(remaining) + " remained by PyTorch's count"};
        }
        if (remaining == 0) {
          spent = true;
        } else {
          --remaining;
          ++counted;
        }
      } else if (e.event == "nodes_waiting") {
        if (e.waiting == 0) return {spec.kind, false, a.name + ": restarted for 0 waiting nodes"};
        ++waiting_total;
      } else if (e.event == "round_lost") {
        ++lost_total;
      }
    }
    counted_total += counted;
    if (!a.result || a.result->outcome == "left") continue;
    if (a.result->restarts != counted) {
      return {spec.kind, false, a.name + " reports " + std::to_string(a.result->restarts) + " restarts; its events count " +
                                    std::to_string(counted)};
    }
    if (spent != (a.result->code == "worker_group_failed")) {
      return {spec.kind, false, a.name + (spent ? " had its restarts spent but ended " + a.result->outcome
                                                : " ended worker_group_failed with restarts left")};
    }
  }
  return {spec.kind, true, dagsim::counted(counted_total, "restart") + " counted against max_restarts = " + std::to_string(max) +
                               ", " + std::to_string(waiting_total) + " for waiting nodes and " + std::to_string(lost_total) +
                               " for a lost round (not counted)"};
}

CheckResult ElasticJudge::expect_error(const CheckSpec& spec) const {
  const std::string& message = spec.message;
  for (const AgentLife& a : agents_) {
    if (a.result && a.result->outcome == "failed" && a.result->error.find(message) != std::string::npos) {
      return {spec.kind, true, a.name + " ended the job: " + a.result->error};
    }
  }
  std::string seen;
  for (const AgentLife& a : agents_) {
    if (a.result && !a.result->error.empty()) seen += "; " + a.name + ": " + a.result->error;
  }
  // The expected text is the scenario's, so it is quoted: it may hold anything (a terminal escape).
  return {spec.kind, false, "no agent failed with " + quote(message) + (seen.empty() ? " (none failed)" : seen)};
}

}  // namespace dagsim::scenarios
