// What a job run leaves (job_spec.h's layout): job.json for the store's judge, one NodeRecord per
// agent incarnation, the fault timeline, the orphans, and the `command` checks (job_runner.h).
#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/scenario_text.h"
#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_runner.h"
#include "scenarios/workloads/rendezvous/store_records.h"

namespace dagsim::scenarios::job {

namespace fs = std::filesystem;

namespace {

double conf_seconds(const std::map<std::string, std::string>& conf, const std::string& key, double fallback) {
  const auto it = conf.find(key);
  if (it == conf.end()) return fallback;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    return fallback;
  }
}

// Output as JSON can hold it: ASCII, with newlines and tabs; any other byte is '?'.
std::string text_of(const std::string& bytes) {
  std::string out = bytes;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || (u < 0x20 && c != '\n' && c != '\t')) c = '?';
  }
  return out;
}

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::string trigger_text(const JobTrigger& t) {
  const auto ms = [](Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
  std::string s;
  switch (t.kind) {
    case JobTrigger::Kind::at: return "at_ms = " + ms(t.at);
    case JobTrigger::Kind::round: s = "round = " + std::to_string(t.round); break;
    case JobTrigger::Kind::store_key: s = "store_key = " + quote(t.pattern); break;
    case JobTrigger::Kind::output:
      s = "output = " + quote(t.pattern);
      if (t.from) {
        s += ", from = \"agent" + std::to_string(t.from->agent) +
             (t.from->kind == JobTarget::Kind::worker ? ":" + std::to_string(t.from->local_rank) : "") + "\"";
      }
      break;
  }
  if (t.after.count() != 0) s += ", after_ms = " + ms(t.after);
  return "{ " + s + " }";
}

std::string fault_kind(JobFault::Kind k) { return std::string(job_fault_kind_name(k)); }

}  // namespace

std::string scenario_text(const Scenario& scenario) {
  if (scenario.file.empty()) return "";
  // As the loader read it: a regular file of at most kMaxScenarioBytes, never waited on.
  return read_head(scenario.file, detail::kMaxScenarioBytes).value_or("");
}

void JobRunner::write_job_json() const {
  const std::map<std::string, std::string>& c = spec_.rdzv_conf;
  nlohmann::json agents = nlohmann::json::object();
  for (const auto& inc : incarnations_) agents["agent" + std::to_string(inc->agent) + "." + std::to_string(inc->incarnation)] = inc->pid;
  nlohmann::json job = {{"run_id", "job"},
                        {"min_nodes", spec_.min_nodes},
                        {"max_nodes", spec_.max_nodes},
                        {"join_timeout_s", conf_seconds(c, "join_timeout", 600)},
                        {"last_call_timeout_s", conf_seconds(c, "last_call_timeout", 30)},
                        {"close_timeout_s", conf_seconds(c, "close_timeout", 30)},
                        {"keep_alive_interval_s", conf_seconds(c, "keep_alive_interval", 5)},
                        {"keep_alive_max_attempt", static_cast<uint32_t>(conf_seconds(c, "keep_alive_max_attempt", 3))},
                        {"monitor_interval_s", std::chrono::duration<double>(spec_.monitor_interval).count()},
                        {"poll_interval_s", 1.0},
                        {"rerendezvous_on_expiry", spec_.rerendezvous_on_expiry},
                        {"faults", store_faults_},
                        {"system", spec_.launcher == JobLauncher::torchrun ? "torchrun" : "dagsim"},
                        {"agents", agents},
                        {"started_ns", start_unix_ns_}};
  // A record written from etcd's revisions (job_etcd.cc) ties no write to its agent: S1 not judged.
  if (on_etcd()) job["writers_known"] = false;
  std::ofstream out(dir_ + "/store/job.json");
  out << job.dump(1) << "\n";
  if (!out) throw errors::invalid_argument(dir_ + "/store/job.json: cannot be written");
}

nlohmann::json JobRunner::node_data(const Incarnation& inc) const {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerSeen& w : inc.workers) {
    workers.push_back({{"local_rank", w.local_rank},
                       {"rank", w.rank ? nlohmann::json(*w.rank) : nlohmann::json()},
                       {"pid", w.pid},
                       {"started_ms", w.started_ms},
                       {"ended_ms", opt(w.ended_ms)},
                       {"exit", w.exit}});
  }
  return {{"pid", inc.pid},
          {"started_ms", inc.started_ms},
          {"ended_ms", opt(inc.ended_ms)},
          {"exit", inc.exit},
          {"stopped_by_run", inc.stopped_by_run},
          {"argv", inc.argv},
          {"log", inc.log},
          {"workers", workers},
          {"restarts", restarts_of(inc)}};
}

nlohmann::json JobRunner::find_orphans() {
  nlohmann::json orphans = nlohmann::json::array();
  std::vector<MarkedProcess> left = marked_processes(token_);
  for (const MarkedProcess& p : left) orphans.push_back({{"pid", p.pid}, {"cmdline", p.cmdline}});
  for (int round = 0; round < 5 && !left.empty(); ++round) {
    for (const MarkedProcess& p : left) ::kill(p.pid, SIGKILL);
    sleep_ms(50);
    left = marked_processes(token_);
  }
  if (!orphans.empty()) say(std::to_string(orphans.size()) + " process(es) of the run outlived it (orphans): killed");
  return orphans;
}

RunRecords JobRunner::gather() {
  stop_store();
  // A store started again wrote a record of its own: the judge reads one, so they are joined.
  // They are in the run's folder, where the job may write: regular files only, never waited on.
  if (store_records_.size() > 1) {
    const int out = ::open(store_records_.front().c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat info{};
    if (out >= 0 && ::fstat(out, &info) == 0 && S_ISREG(info.st_mode)) {
      std::string chunk(1 << 20, '\0');
      for (size_t i = 1; i < store_records_.size(); ++i) {
        const int in = open_regular(store_records_[i]);
        if (in < 0) continue;
        for (ssize_t n; (n = ::read(in, chunk.data(), chunk.size())) > 0;) {
          for (ssize_t done = 0; done < n;) {
            const ssize_t w = ::write(out, chunk.data() + done, static_cast<size_t>(n - done));
            if (w <= 0) break;
            done += w;
          }
        }
        ::close(in);
      }
    }
    if (out >= 0) ::close(out);
  }
  nlohmann::json orphans = find_orphans();
  // What each agent incarnation left alive below it when it exited, killed then by its guard
  // (net/process: leftovers): the job's orphans, named by agent and incarnation.
  for (const auto& inc : incarnations_) {
    for (const net::Leftover& l : inc->process.leftovers()) {
      orphans.push_back({{"pid", l.pid}, {"cmdline", l.cmdline}, {"agent", inc->agent}, {"incarnation", inc->incarnation}});
    }
  }
  RunRecords r;
  r.scenario_file = options_.scenario_file.empty() ? scenario_.file : options_.scenario_file;
  r.seed = options_.seed;
  r.transport = "job";
  r.outcome = outcome_;
  r.end = runtime::TimePoint{std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(end_ms_))};
  if (outcome_ == "finished") r.workload_end = r.end;
  const uint32_t n = spec_.total_agents();
  for (uint32_t a = 0; a < n; ++a) {
    r.node_names.push_back(scenario_.cluster.name_prefix.empty() ? "agent" + std::to_string(a) : scenario_.cluster.node_name(a));
    runtime::NodeState state = runtime::NodeState::not_started;
    for (const auto& inc : incarnations_) {
      if (inc->agent != a) continue;
      state = inc->killed_by_fault ? runtime::NodeState::killed : runtime::NodeState::up;
    }
    r.final_states.push_back(state);
  }
  for (const auto& inc : incarnations_) r.nodes.push_back({inc->agent, inc->incarnation, node_data(*inc)});
  std::sort(r.nodes.begin(), r.nodes.end(), [](const NodeRecord& x, const NodeRecord& y) {
    return std::tie(x.node, x.incarnation) < std::tie(y.node, y.incarnation);
  });
  for (const FaultState& f : faults_) {
    const JobFault& s = *f.spec;
    std::string target = target_name(s.target);
    if (s.kind == JobFault::Kind::store_pause || s.kind == JobFault::Kind::store_restart) target = "store";
    if (s.kind == JobFault::Kind::partition) {
      target.clear();
      for (size_t g = 0; g < s.groups.size(); ++g) {
        if (g > 0) target += "|";
        for (size_t i = 0; i < s.groups[g].size(); ++i) target += (i > 0 ? "," : "") + std::string("agent") + std::to_string(s.groups[g][i]);
      }
    }
    nlohmann::json j = {{"kind", fault_kind(s.kind)}, {"target", target}, {"line", s.line}, {"fired", f.struck},
                        {"trigger", trigger_text(s.when)}, {"detail", f.detail}};
    if (f.at_ms) j["at_ms"] = *f.at_ms;
    if (f.until_ms) j["until_ms"] = *f.until_ms;
    r.fault_timeline.push_back(j);
  }
  r.stats.wall_ms = end_ms_;
  // The store's record judged in-process, as `dagsim judge` would.
  write_job_json();
  nlohmann::json store = {{"record", "store.jsonl"}, {"format", nullptr}, {"report", nullptr},
                          {"violations", nlohmann::json::array()}, {"error", ""}};
  nlohmann::json rounds = nlohmann::json::array();
  try {
    const StoreRecordsJudgement j = judge_store_records(dir_ + "/store");
    store["format"] = j.format;
    store["report"] = j.report;
    store["violations"] = j.report.value("violations", nlohmann::json::array());
    // The judge's times count from the store's start; the records' from the run's.
    double store_offset_ms = 0;
    {
      const std::string head = read_head(store_records_.front(), 64 << 10).value_or("");
      const std::string first = head.substr(0, head.find('\n'));
      if (!first.empty()) {
        const nlohmann::json start = nlohmann::json::parse(first, nullptr, false);
        if (start.is_object() && start.contains("t") && start["t"].is_number_integer()) {
          store_offset_ms = static_cast<double>(start["t"].get<int64_t>() - start_unix_ns_) / 1e6;
        }
      }
    }
    for (const nlohmann::json& round : j.report.value("rounds", nlohmann::json::array())) {
      nlohmann::json participants = nlohmann::json::array();
      for (const nlohmann::json& m : round.value("members", nlohmann::json::array())) {
        std::string name = m.value("node", std::string());
        const uint64_t pid = m.value("pid", uint64_t{0});
        for (const auto& inc : incarnations_) {
          if (static_cast<uint64_t>(inc->pid) == pid) name = "agent" + std::to_string(inc->agent);
        }
        participants.push_back(name);
      }
      nlohmann::json at = nullptr;
      if (round.contains("completed_ms") && round["completed_ms"].is_number()) at = round["completed_ms"].get<double>() + store_offset_ms;
      rounds.push_back({{"round", round.value("round", nlohmann::json())}, {"at_ms", at}, {"participants", participants}});
    }
  } catch (const Error& e) {
    store["error"] = e.what();
  }
  r.job = {{"dir", dir_},
           {"launcher", spec_.launcher == JobLauncher::torchrun ? "torchrun" : "dagsim"},
           {"rdzv_backend", spec_.rdzv_backend == JobRdzvBackend::c10d ? "c10d" : spec_.rdzv_backend == JobRdzvBackend::etcd ? "etcd" : "dagsim"},
           {"seed", options_.seed},
           {"rounds", rounds},
           {"store", store},
           {"orphans", orphans},
           {"commands", nlohmann::json::array()},
           {"reference", nullptr}};
  return r;
}

nlohmann::json run_command_checks(const Scenario& scenario, const std::string& dir, const nlohmann::json& reference) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < scenario.checks.size(); ++i) {
    const CheckSpec& c = scenario.checks[i];
    if (c.kind != "command") continue;
    // `run` is an argv (the loader's form: run = ["prog", "arg"]); a string is a shell command.
    const nlohmann::json run = c.params.contains("run") ? c.params.at("run") : nlohmann::json(std::string());
    std::vector<std::string> argv;
    if (run.is_array()) {
      for (const nlohmann::json& a : run) argv.push_back(a.is_string() ? a.get<std::string>() : a.dump());
    } else {
      argv = {"/bin/sh", "-c", run.is_string() ? run.get<std::string>() : run.dump()};
    }
    std::vector<std::string> env = net::current_environment();
    env.push_back("JOB_DIR=" + dir);
    if (c.params.value("reference_run", false) && !reference.is_null()) env.push_back("REFERENCE_DIR=" + reference.value("dir", std::string()));
    const std::string cwd = scenario.file.empty() ? dir : fs::absolute(fs::path(scenario.file)).parent_path().string();
    nlohmann::json entry = {{"check", i}, {"argv", argv}};
    try {
      const CommandResult r = run_command(argv, env, cwd, dir + "/check" + std::to_string(i) + ".out", std::chrono::minutes(10));
      entry["exit"] = r.exit_code;
      entry["output"] = text_of(r.output);
      if (r.signal != 0) entry["signal"] = signal_name(r.signal);
      if (r.timed_out) entry["output"] = entry["output"].get<std::string>() + "\n(stopped after 10 minutes)";
    } catch (const Error& e) {
      entry["exit"] = -1;
      entry["output"] = e.what();
    }
    out.push_back(entry);
  }
  return out;
}

}  // namespace dagsim::scenarios::job
