// The judge side of a [job] scenario (job_judge.h): each check from the run's records alone
// (job_records.h reads and checks them), the results and spans in job_report.cc.
#include "scenarios/workloads/job/job_judge.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>

#include "core/base/bounded_file.h"
#include "core/base/printable.h"
#include "scenarios/workloads/job/job_records.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {

namespace {

using namespace job_records;

std::string ms_text(double ms) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.0f ms", ms);
  return buf;
}

// A check's own key, type-checked (the reader checks them too; a scenario built as data may not).
struct Params {
  const CheckSpec& spec;
  std::string error;
  std::optional<int64_t> integer(const char* key, int64_t min) {
    if (!spec.params.is_object() || !spec.params.contains(key)) return std::nullopt;
    const nlohmann::json& v = spec.params.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < min) {
      error = std::string(key) + ": expected a whole number >= " + std::to_string(min) + ", got " + printable(v.dump(), 100);
      return std::nullopt;
    }
    return v.get<int64_t>();
  }
  std::optional<bool> boolean(const char* key) {
    if (!spec.params.is_object() || !spec.params.contains(key)) return std::nullopt;
    const nlohmann::json& v = spec.params.at(key);
    if (!v.is_boolean()) {
      error = std::string(key) + ": expected true or false, got " + printable(v.dump(), 100);
      return std::nullopt;
    }
    return v.get<bool>();
  }
  std::optional<std::string> text(const char* key) {
    if (!spec.params.is_object() || !spec.params.contains(key)) return std::nullopt;
    const nlohmann::json& v = spec.params.at(key);
    if (!v.is_string()) {
      error = std::string(key) + ": expected a string, got " + printable(v.dump(), 100);
      return std::nullopt;
    }
    return v.get<std::string>();
  }
};

std::string trimmed(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The faults that end an agent's incarnation by design: its death is not the job's failure.
bool ends_agent(const std::string& kind) { return kind == "kill" || kind == "crash" || kind == "leave"; }

class JobJudge final : public Judge {
 public:
  JobJudge(const Scenario& scenario, const RunRecords& records)
      : scenario_(scenario), records_(records), spec_(scenario.workload.as<JobSpec>()),
        job_(read_job_records(scenario, records)) {}

  nlohmann::json results(const ReportOptions&) const override { return job_results(scenario_, job_); }
  std::vector<WorkloadSpan> spans() const override { return job_spans(scenario_, job_); }

  CheckResult rendezvous_invariants(const CheckSpec& spec) const {
    CheckResult r{spec.kind, false, ""};
    Params p{spec, ""};
    const std::optional<std::string> l6 = p.text("l6");
    if (!p.error.empty()) return {spec.kind, false, p.error};
    if (l6 && *l6 != "dagsim" && *l6 != "pytorch") return {spec.kind, false, "l6: expected \"dagsim\" or \"pytorch\", got " + quote(*l6)};
    if (!job_.store_error.empty()) {
      r.detail = "the store's record could not be judged: " + job_.store_error;
      return r;
    }
    // The record was judged at run time by [job] rerendezvous_on_expiry's rule. `l6 = "pytorch"`
    // on a record judged by dagsim's rule ignores its L6 violations (PyTorch's known gap); `l6 =
    // "dagsim"` on one judged by PyTorch's cannot be re-judged from the violations alone.
    const bool pytorch_rule = l6 ? *l6 == "pytorch" : !spec_.rerendezvous_on_expiry;
    if (!pytorch_rule && !spec_.rerendezvous_on_expiry) {
      r.detail = "l6 = \"dagsim\", but the run judged the store's record by PyTorch's rule ([job] "
                 "rerendezvous_on_expiry = false): its L6 cannot be re-judged from the records; set "
                 "rerendezvous_on_expiry = true to hold it to dagsim's rule";
      return r;
    }
    std::vector<std::string> counted, ignored;
    for (const Violation& v : job_.violations) {
      if (pytorch_rule && v.invariant == "L6") {
        ignored.push_back(v.text);
      } else {
        counted.push_back(v.text);
      }
    }
    const std::string rounds = std::to_string(job_.rounds.size()) + " round(s) in the store's record (" +
                               (job_.store_format.empty() ? std::string("?") : job_.store_format) + " state)";
    std::string gap;
    if (!ignored.empty()) {
      gap = "\n" + std::to_string(ignored.size()) +
            " L6 violation(s) not counted (l6 = \"pytorch\": PyTorch's known gap, pytorch/pytorch#111646, "
            "survivors do not re-form when a member of a complete round expires):";
      for (const std::string& t : ignored) gap += "\n  " + t;
    }
    if (counted.empty()) {
      r.passed = true;
      // On etcd the record is the runner's reading of etcd's revisions: no write is tied to its agent.
      const bool etcd = spec_.rdzv_backend == JobRdzvBackend::etcd;
      r.detail = "the invariants the store's record shows hold (" + std::string(etcd ? "S2-S7" : "S1-S7") + ", S10, L1, L2, L5, L6 by " +
                 std::string(pytorch_rule ? "PyTorch's" : "dagsim's") + " rule); " + rounds +
                 (etcd ? "; not judged: S1 (the rendezvous lived in etcd, which keeps no record of which client wrote each "
                         "revision; the record is etcd's revisions as the runner read them, timed when it read them)"
                       : "") +
                 gap;
      return r;
    }
    r.detail = std::to_string(counted.size()) + " violation(s) of the rendezvous invariants; " + rounds + ":";
    for (const std::string& t : counted) r.detail += "\n  " + t;
    r.detail += gap;
    return r;
  }

  CheckResult job_succeeded(const CheckSpec& spec) const {
    Params p{spec, ""};
    const bool expect_failure = p.boolean("expect_failure").value_or(false);
    if (!p.error.empty()) return {spec.kind, false, p.error};
    std::vector<std::string> failed, excused, ok;
    std::set<uint32_t> started;
    std::map<uint32_t, uint32_t> last;  // each agent's last incarnation
    for (const Incarnation& inc : job_.incarnations) last[inc.node] = std::max(last[inc.node], inc.incarnation);
    bool completed = false;  // some agent's last incarnation exited 0
    for (const Incarnation& inc : job_.incarnations) {
      started.insert(inc.node);
      // A run that stopped an agent at the job's timeout is never excused: a fault may have struck
      // it first (a leave that hung), but the job did not end.
      if (inc.stopped_by_run) {
        failed.push_back(inc.label() + ": still running at the job's timeout; the run stopped it (" + inc.exit.text() + ")");
        continue;
      }
      const Fault* struck = fault_that_ended(inc);
      if (inc.exit.ok()) {
        ok.push_back(inc.label());
        if (last[inc.node] == inc.incarnation) completed = true;
      } else if (struck != nullptr) {
        excused.push_back(inc.label() + " (" + inc.exit.text() + ": the " + struck->label() + " ended it)");
      } else if (!inc.exit.ended()) {
        failed.push_back(inc.label() + ": no exit recorded");
      } else {
        failed.push_back(inc.label() + ": " + inc.exit.text() + log_hint(inc));
      }
    }
    // The job must have completed: the run saw it finish, and some agent's last incarnation
    // exited 0 (a job whose every agent a fault ended did not).
    if (records_.outcome != "finished") {
      failed.push_back("the job did not complete: the run's outcome is " + quote(records_.outcome));
    } else if (!completed) {
      failed.push_back("the job did not complete: no agent's last incarnation exited 0");
    }
    std::string summary = std::to_string(ok.size()) + " agent incarnation(s) exited 0";
    if (!excused.empty()) {
      summary += "; ended by a fault, not counted:";
      for (const std::string& e : excused) summary += " " + e + ";";
      summary.pop_back();
    }
    for (uint32_t n = 0; n < records_.node_names.size(); ++n) {
      if (!started.contains(n)) summary += "; " + records_.node_names[n] + " never started";
    }
    std::string failures;
    for (const std::string& f : failed) failures += "\n  " + f;
    if (!expect_failure) {
      if (failed.empty()) return {spec.kind, true, summary};
      return {spec.kind, false, "the job failed:" + failures + "\n" + summary};
    }
    // The job must fail, and with `message`, say so in some agent's log.
    if (failed.empty()) {
      return {spec.kind, false, "expected the job to fail, but every agent not ended by a fault exited 0; " + summary};
    }
    if (spec.message.empty()) return {spec.kind, true, "failed as expected:" + failures};
    std::string unread;
    for (const Incarnation& inc : job_.incarnations) {
      const std::optional<std::string> log = read_log(inc, &unread);
      if (log && log->find(spec.message) != std::string::npos) {
        return {spec.kind, true, "failed as expected, and " + inc.label() + "'s log (" + inc.log + ") says " +
                                     quote(spec.message) + ":" + failures};
      }
    }
    return {spec.kind, false, "the job failed, but no agent's log says " + quote(spec.message) + unread + ":" + failures};
  }

  CheckResult no_orphans(const CheckSpec& spec) const {
    // Two kinds: a process an agent left alive below it when it exited (its guard killed it:
    // torchrun or dagsim launch leaving workers behind), and one alive after the whole run. An
    // agent that a signal ended (a kill, crash, the run's SIGKILL) could not clean up: what it
    // left is named, not counted.
    std::vector<std::string> counted, excused;
    for (const Orphan& o : job_.orphans) {
      const std::string what = "pid " + std::to_string(o.pid) + ": " + printable(o.cmdline, 400);
      if (!o.agent) {
        counted.push_back(what + " (alive after the run; the run killed it)");
        continue;
      }
      const Incarnation* inc = incarnation_of(*o.agent, o.incarnation.value_or(0));
      const std::string who = inc != nullptr ? inc->label() : agent_name(*o.agent) + " (incarnation " +
                                                                  std::to_string(o.incarnation.value_or(0)) + ")";
      if (inc != nullptr && !inc->exit.signal.empty()) {
        excused.push_back(what + " (below " + who + ", which " + inc->exit.text() + " ended)");
      } else {
        counted.push_back(what + " (left behind by " + who + " when it exited; killed by its guard)");
      }
    }
    std::string note;
    if (!excused.empty()) {
      note = "\n" + std::to_string(excused.size()) + " process(es) below an agent a signal ended, not counted:";
      for (const std::string& e : excused) note += "\n  " + e;
    }
    if (counted.empty()) return {spec.kind, true, "nothing the job started outlived its agent or the run" + note};
    std::string detail = std::to_string(counted.size()) + " process(es) the job left behind:";
    for (const std::string& c : counted) detail += "\n  " + c;
    return {spec.kind, false, detail + note};
  }

  CheckResult reformed_within(const CheckSpec& spec) const {
    Params p{spec, ""};
    const std::optional<int64_t> bound = p.integer("ms", 1);
    if (!p.error.empty()) return {spec.kind, false, p.error};
    if (!bound) return {spec.kind, false, "ms: missing (reformed_within takes ms = N)"};
    if (*bound > 1'000'000'000) return {spec.kind, false, "ms: expected a whole number from 1 to 1000000000, got " + std::to_string(*bound)};
    std::vector<std::string> late, in_time, skipped;
    const auto store_layer = [](const std::string& k) { return k == "store_delay" || k == "store_drop" || k == "store_reset"; };
    for (const Fault& f : job_.faults) {
      if (!f.struck() || f.kind == "partition") continue;
      if (store_layer(f.kind) && f.detail.starts_with("not struck")) continue;
      // Before the first round there is nothing to re-form: the first forming is not a recovery.
      if (job_.rounds.empty() || *f.at_ms < job_.rounds.front().at_ms) {
        skipped.push_back("the " + f.label() + " at " + ms_text(*f.at_ms) + ": not judged, struck before the first round formed");
        continue;
      }
      // The newest round complete when it struck; the recovery is a later round.
      uint64_t newest = 0;
      for (const Round& r : job_.rounds) {
        if (r.at_ms <= *f.at_ms) newest = std::max(newest, r.round);
      }
      const auto next = std::find_if(job_.rounds.begin(), job_.rounds.end(),
                                     [&](const Round& r) { return r.at_ms > *f.at_ms && r.round > newest; });
      const std::string maybe = store_layer(f.kind) && f.detail.find("with probability") != std::string::npos
                                    ? " (a store-layer fault with probability < 1: it may not have hit any query)"
                                    : "";
      if (next == job_.rounds.end()) {
        late.push_back("the " + f.label() + " at " + ms_text(*f.at_ms) + ": no round formed after it (none after round " +
                       std::to_string(newest) + "; the run ended at " + ms_text(job_.end_ms) + ")" + maybe);
        continue;
      }
      const double gap = next->at_ms - *f.at_ms;
      const std::string line = "the " + f.label() + " at " + ms_text(*f.at_ms) + ": round " + std::to_string(next->round) +
                               " formed " + ms_text(gap) + " later";
      const std::string after = " (round " + std::to_string(newest) + " was the newest when it struck)" + maybe;
      if (gap > static_cast<double>(*bound)) {
        late.push_back(line + ", more than " + std::to_string(*bound) + " ms" + after);
      } else {
        in_time.push_back(line + after);
      }
    }
    std::string detail;
    for (const std::string& l : late) detail += (detail.empty() ? "" : "\n") + l;
    for (const std::string& l : in_time) detail += (detail.empty() ? "" : "\n") + l;
    for (const std::string& l : skipped) detail += (detail.empty() ? "" : "\n") + l;
    if (late.empty() && in_time.empty()) {
      return {spec.kind, true, "no fault struck an agent, a worker or the store after the first round" + (detail.empty() ? "" : ":\n" + detail)};
    }
    return {spec.kind, late.empty(), detail};
  }

  CheckResult restarts(const CheckSpec& spec) const {
    Params p{spec, ""};
    const std::optional<int64_t> min = p.integer("min", 0);
    const std::optional<int64_t> max = p.integer("max", 0);
    if (!p.error.empty()) return {spec.kind, false, p.error};
    if (!min && !max) return {spec.kind, false, "restarts takes min = N and/or max = N"};
    uint64_t total = 0;
    std::string each;
    for (const Incarnation& inc : job_.incarnations) {
      total += inc.restarts;
      if (inc.restarts > 0) each += (each.empty() ? "" : ", ") + inc.label() + " " + std::to_string(inc.restarts);
    }
    const std::string counted = std::to_string(total) + " worker-group restart(s)" + (each.empty() ? "" : " (" + each + ")");
    if (min && total < static_cast<uint64_t>(*min)) return {spec.kind, false, counted + ", fewer than min = " + std::to_string(*min)};
    if (max && total > static_cast<uint64_t>(*max)) return {spec.kind, false, counted + ", more than max = " + std::to_string(*max)};
    return {spec.kind, true, counted};
  }

  CheckResult command(const CheckSpec& spec) const {
    const std::optional<size_t> index = index_of(spec);
    if (!index) return {spec.kind, false, "this check is not one of the scenario's"};
    for (const Command& c : job_.commands) {
      if (c.check != *index) continue;
      std::string argv;
      for (const std::string& a : c.argv) argv += (argv.empty() ? "" : " ") + a;
      const std::string output = trimmed(c.output);
      if (c.exit && *c.exit == 0) return {spec.kind, true, output.empty() ? argv + ": exit 0" : output};
      return {spec.kind, false,
              argv + ": " + (c.exit ? "exit " + std::to_string(*c.exit) : std::string("could not be run")) +
                  (output.empty() ? "" : "\n" + output)};
    }
    return {spec.kind, false, "the run recorded no result of this command (check " + std::to_string(*index) + ", line " +
                                  std::to_string(spec.line) + ")"};
  }

 private:
  // The fault that ended `inc` by design: a kill, crash or leave of its agent while it ran.
  const Fault* fault_that_ended(const Incarnation& inc) const {
    for (const Fault& f : job_.faults) {
      if (!f.struck() || !ends_agent(f.kind) || f.target.find(':') != std::string::npos) continue;
      const std::optional<uint32_t> agent = target_agent(f.target, records_.node_names);
      if (!agent || *agent != inc.node) continue;
      // A kill lands within a moment of its time; the incarnation's times are the runner's.
      if (*f.at_ms + 1 < inc.started_ms) continue;
      if (inc.ended_ms && *inc.ended_ms + 1 < *f.at_ms) continue;
      return &f;
    }
    return nullptr;
  }

  const Incarnation* incarnation_of(uint32_t node, uint32_t incarnation) const {
    for (const Incarnation& inc : job_.incarnations) {
      if (inc.node == node && inc.incarnation == incarnation) return &inc;
    }
    return nullptr;
  }

  std::string agent_name(uint32_t node) const {
    return node < records_.node_names.size() ? records_.node_names[node] : "agent" + std::to_string(node);
  }

  // The agent's log, when it can be read here (records from another host may not have it).
  std::optional<std::string> read_log(const Incarnation& inc, std::string* unread) const {
    if (inc.log.empty()) return std::nullopt;
    const std::string path = inc.log.front() == '/' ? inc.log : job_.dir + "/" + inc.log;
    try {
      return read_bounded_file(path, size_t{64} << 20, ErrorCode::invalid_records, "an agent's log");
    } catch (const Error& e) {
      if (unread->empty()) *unread = " (" + e.detail() + ")";
      return std::nullopt;
    }
  }

  std::string log_hint(const Incarnation& inc) const { return inc.log.empty() ? "" : " (log: " + job_.dir + "/" + inc.log + ")"; }

  std::optional<size_t> index_of(const CheckSpec& spec) const {
    const std::vector<CheckSpec>& checks = scenario_.checks;
    if (!checks.empty() && &spec >= checks.data() && &spec < checks.data() + checks.size()) {
      return static_cast<size_t>(&spec - checks.data());
    }
    for (size_t i = 0; i < checks.size(); ++i) {
      if (checks[i].kind == spec.kind && checks[i].line == spec.line && checks[i].params == spec.params) return i;
    }
    return std::nullopt;
  }

  const Scenario& scenario_;
  const RunRecords& records_;
  const JobSpec& spec_;
  const JobRecords job_;
};

constexpr std::string_view kInvariantKeys[] = {"l6"};
constexpr std::string_view kSucceededKeys[] = {"expect_failure"};
constexpr std::string_view kReformedKeys[] = {"ms"};
constexpr std::string_view kRestartsKeys[] = {"min", "max"};
constexpr std::string_view kCommandKeys[] = {"run", "reference_run"};

constexpr CheckKind kChecks[] = {
    {"rendezvous_invariants", false, false, false, &judge_by<JobJudge, &JobJudge::rendezvous_invariants>, nullptr,
     kInvariantKeys},
    // `message` only with expect_failure = true (the reader's finish_job says so).
    {"job_succeeded", false, false, true, &judge_by<JobJudge, &JobJudge::job_succeeded>, nullptr, kSucceededKeys, true},
    {"no_orphans", false, false, false, &judge_by<JobJudge, &JobJudge::no_orphans>},
    {"reformed_within", false, false, false, &judge_by<JobJudge, &JobJudge::reformed_within>, nullptr, kReformedKeys},
    {"restarts", false, false, false, &judge_by<JobJudge, &JobJudge::restarts>, nullptr, kRestartsKeys},
    {"command", false, false, false, &judge_by<JobJudge, &JobJudge::command>, nullptr, kCommandKeys},
};

}  // namespace

std::span<const CheckKind> job_check_kinds() { return kChecks; }

std::unique_ptr<Judge> make_job_judge(const Scenario& scenario, const RunRecords& records) {
  return std::make_unique<JobJudge>(scenario, records);
}

}  // namespace dagsim::scenarios
