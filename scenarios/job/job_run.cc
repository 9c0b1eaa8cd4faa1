// One run of a [job] scenario (job_run.h): the loop that starts the store and the agents, watches
// the triggers, strikes the faults, ends the run and gathers its records (job_runner.h).
#include "scenarios/job/job_run.h"

#include <csignal>
#include <cstdlib>
#include <unistd.h>

#include <filesystem>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_runner.h"

namespace dagsim::scenarios {

namespace fs = std::filesystem;

namespace job {

namespace {

TriggerState trigger_of(const JobTrigger& when) {
  TriggerState t;
  t.when = when;
  if (when.kind == JobTrigger::Kind::output) {
    try {
      t.regex.emplace(when.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw errors::invalid_argument("the output trigger's regex " + quote(when.pattern) + " does not compile: " + e.what());
    }
  }
  return t;
}

}  // namespace

JobRunner::JobRunner(const Scenario& scenario, const JobRunOptions& options, std::string dir, bool reference)
    : scenario_(scenario), spec_(scenario.workload.as<JobSpec>()), options_(options), dir_(std::move(dir)), reference_(reference) {
  token_ = random_token();
  if (!spec_.directory.empty()) {
    directory_ = spec_.directory;
  } else if (!options_.scenario_file.empty()) {
    directory_ = fs::absolute(fs::path(options_.scenario_file)).parent_path().string();
  } else if (!scenario.file.empty()) {
    directory_ = fs::absolute(fs::path(scenario.file)).parent_path().string();
  } else {
    directory_ = fs::current_path().string();
  }
  if (options_.dagsim_binary.empty()) throw errors::invalid_argument("the job runner needs the dagsim binary (JobRunOptions::dagsim_binary)");
  if (spec_.command.empty()) throw errors::invalid_argument("the job has no command");
  if (spec_.rdzv_backend == JobRdzvBackend::etcd) {
    if (spec_.launcher == JobLauncher::torchrun && std::system("/usr/bin/python3 -c 'import etcd' >/dev/null 2>&1") != 0) {
      throw errors::invalid_argument("rdzv_backend = \"etcd\" with launcher = \"torchrun\": torchrun's etcd-v2 backend needs python-etcd "
                                     "(Debian's python3-etcd: scripts/deps.sh test), which is not installed");
    }
    if (const auto why = etcd_unavailable()) throw errors::invalid_argument("rdzv_backend = \"etcd\": " + *why);
  }
  if (spec_.launcher == JobLauncher::torchrun && ::access("/usr/bin/python3", X_OK) != 0) {
    throw errors::invalid_argument("launcher = \"torchrun\" runs /usr/bin/python3 -m torch.distributed.run: /usr/bin/python3 is missing");
  }
  const uint32_t n = spec_.total_agents();
  next_incarnation_.assign(n, 0);
  agent_done_.assign(n, false);
  restart_due_.assign(n, std::nullopt);
  if (!reference_) {
    drawn_ = drawn_faults(scenario_, options_.seed);
    for (const std::vector<JobFault>* list : {&spec_.faults, static_cast<const std::vector<JobFault>*>(&drawn_)}) {
      for (const JobFault& f : *list) {
        FaultState s;
        s.spec = &f;
        s.trigger = trigger_of(f.when);
        faults_.push_back(std::move(s));
      }
    }
  }
  for (const JobSpec::LateJoin& l : spec_.late_joins) late_.push_back({l.agent, trigger_of(l.when), false});
}

JobRunner::~JobRunner() {
  // On an exception: nothing of the run may outlive it.
  for (auto& inc : incarnations_) {
    if (inc->process.running()) {
      inc->process.kill();
      inc->process.wait();
    }
  }
  if (store_.running()) {
    store_.kill();
    store_.wait();
  }
}

double JobRunner::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
}

void JobRunner::say(const std::string& line) const {
  if (options_.progress) options_.progress((reference_ ? "[reference] " : "") + line);
}

void JobRunner::on_agent_line(uint32_t agent, const std::string& raw) {
  const AgentLine line = split_agent_line(raw);
  const double now = now_ms();
  const auto check = [&](TriggerState& t) {
    if (t.matched_ms || t.when.kind != JobTrigger::Kind::output || !t.regex) return;
    if (t.when.from) {
      if (t.when.from->agent != agent) return;
      if (t.when.from->kind == JobTarget::Kind::worker && line.local_rank != t.when.from->local_rank) return;
    }
    if (std::regex_search(line.text, *t.regex)) t.matched_ms = now;
  };
  for (FaultState& f : faults_) check(f.trigger);
  for (LateJoinState& l : late_) check(l.trigger);
}

void JobRunner::poll_triggers() {
  const double now = now_ms();
  const auto check = [&](TriggerState& t) {
    if (t.matched_ms) return;
    switch (t.when.kind) {
      case JobTrigger::Kind::at:
        if (now >= std::chrono::duration<double, std::milli>(t.when.at).count()) t.matched_ms = now;
        break;
      case JobTrigger::Kind::round: {
        const std::optional<uint64_t> r = store_tail_->highest_complete_round();
        if (r && *r >= t.when.round) t.matched_ms = now;
        break;
      }
      case JobTrigger::Kind::store_key:
        for (const std::string& k : keys_written_) {
          if (glob_matches(t.when.pattern, k)) {
            t.matched_ms = now;
            break;
          }
        }
        break;
      case JobTrigger::Kind::output: break;  // on_agent_line
    }
  };
  for (FaultState& f : faults_) check(f.trigger);
  for (LateJoinState& l : late_) check(l.trigger);
}

void JobRunner::tick() {
  if (on_etcd()) poll_etcd(false);
  store_tail_->poll([&](const std::string& key) { keys_written_.insert(key); });
  for (size_t i = 0; i < incarnations_.size(); ++i) {
    Incarnation& inc = *incarnations_[i];
    inc.tail->poll([&](const std::string& line) { on_agent_line(inc.agent, line); });
  }
  if (now_ms() - last_scan_ms_ >= 100) scan_workers();
  reap_agents();
  poll_triggers();
  const double now = now_ms();
  for (LateJoinState& l : late_) {
    const std::optional<double> due = l.trigger.due_ms();
    if (!l.started && due && now >= *due) {
      l.started = true;
      start_agent(l.agent);
    }
  }
  // The store's undos first (its restart): an agent restarted in this tick must not race a store
  // that is about to start.
  for (FaultState& f : faults_) {
    const bool store_fault = f.spec->kind == JobFault::Kind::store_restart || f.spec->kind == JobFault::Kind::store_pause;
    if (store_fault && !f.done && f.struck && f.undo_due_ms && now >= *f.undo_due_ms) undo(f);
  }
  for (FaultState& f : faults_) {
    if (f.done) continue;
    const std::optional<double> due = f.trigger.due_ms();
    if (!f.struck && due && now >= *due) {
      strike(f);
    } else if (f.struck && f.undo_due_ms && now >= *f.undo_due_ms) {
      undo(f);
    }
  }
}

bool JobRunner::job_over() const {
  for (const auto& inc : incarnations_) {
    if (inc->running()) return false;
  }
  for (const auto& due : restart_due_) {
    if (due) return false;
  }
  return true;
}

void JobRunner::stop_everything() {
  std::vector<Incarnation*> running;
  for (auto& inc : incarnations_) {
    if (inc->running() && inc->process.running()) running.push_back(inc.get());
  }
  for (Incarnation* inc : running) {
    inc->stopped_by_run = true;
    inc->process.signal(SIGCONT);
    inc->process.signal(SIGTERM);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    bool all = true;
    for (Incarnation* inc : running) all = inc->process.poll().has_value() && all;
    if (all) break;
    sleep_ms(20);
  }
  for (Incarnation* inc : running) {
    if (!inc->process.poll()) {
      inc->process.kill();
      inc->process.wait();
    }
  }
  reap_agents();
}

RunRecords JobRunner::run() {
  std::error_code ec;
  fs::create_directories(dir_ + "/agents", ec);
  fs::create_directories(dir_ + "/store", ec);
  if (ec) throw errors::invalid_argument(dir_ + ": cannot create: " + ec.message());
  start_ = std::chrono::steady_clock::now();
  start_unix_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (spec_.namespaces) netns_ = Netns::create(spec_.total_agents());
  if (const int sig = options_.stop_requested ? options_.stop_requested() : 0) throw JobRunStopped(sig);
  start_store();
  say(std::string(on_etcd() ? "etcd" : "store") + " on port " + std::to_string(store_port_) + " (pid " + std::to_string(store_.pid()) + "), records in " + dir_);
  std::set<uint32_t> late;
  for (const LateJoinState& l : late_) late.insert(l.agent);
  for (uint32_t a = 0; a < spec_.total_agents(); ++a) {
    if (!late.contains(a)) start_agent(a);
  }
  const double limit = std::chrono::duration<double, std::milli>(spec_.timeout).count();
  outcome_ = "finished";
  for (;;) {
    if (const int sig = options_.stop_requested ? options_.stop_requested() : 0) {
      say(std::string(sig == SIGALRM ? "wall-time limit" : "signal " + std::to_string(sig)) + ": stopping the run");
      stop_everything();
      try {
        stop_store();
      } catch (const std::exception&) {  // the destructor kills it
      }
      throw JobRunStopped(sig);  // ~JobRunner kills what is left; ~Netns removes the namespaces
    }
    tick();
    if (job_over()) break;
    if (now_ms() >= limit) {
      outcome_ = "time_limit";
      say("timeout: stopping the agents still running");
      stop_everything();
      break;
    }
    sleep_ms(20);
  }
  end_ms_ = now_ms();
  // Undo what is still struck (a pause, a partition), so nothing stays stopped or cut.
  for (FaultState& f : faults_) {
    if (f.struck && !f.done && f.spec->kind != JobFault::Kind::crash && f.spec->kind != JobFault::Kind::store_restart) undo(f);
  }
  // The last lines of every agent (a worker's last words may be a trigger no more, but are logs).
  for (auto& inc : incarnations_) inc->tail->poll([](const std::string&) {});
  return gather();
}

}  // namespace job

RunRecords record_job(const Scenario& scenario, const JobRunOptions& options) {
  std::string dir = options.run_dir;
  if (dir.empty()) {
    std::string pattern =
        (fs::temp_directory_path() / ("dagsim-job-" + (scenario.name.empty() ? std::string("job") : scenario.name) + "-seed" +
                                      std::to_string(options.seed) + "-XXXXXX"))
            .string();
    for (char& c : pattern) {
      if (c == ' ') c = '_';
    }
    if (::mkdtemp(pattern.data()) == nullptr) throw errors::invalid_argument("cannot make a folder for the job run under " + fs::temp_directory_path().string());
    dir = pattern;
  }
  dir = fs::absolute(dir).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  nlohmann::json reference = nullptr;
  bool wants_reference = false;
  for (const CheckSpec& c : scenario.checks) {
    if (c.kind == "command" && c.params.value("reference_run", false)) wants_reference = true;
  }
  if (wants_reference) {
    JobRunOptions ref = options;
    ref.run_dir = dir + "/reference";
    job::JobRunner runner(scenario, ref, ref.run_dir, true);
    const RunRecords r = runner.run();
    nlohmann::json codes = nlohmann::json::object();
    for (const NodeRecord& n : r.nodes) codes[r.node_names.at(n.node) + "." + std::to_string(n.incarnation)] = n.data.value("exit", nlohmann::json());
    reference = {{"dir", ref.run_dir}, {"outcome", r.outcome}, {"exit_codes", codes}};
  }
  job::JobRunner runner(scenario, options, dir, false);
  RunRecords records = runner.run();
  if (const int sig = options.stop_requested ? options.stop_requested() : 0) throw JobRunStopped(sig);
  records.job["reference"] = reference;
  records.job["commands"] = job::run_command_checks(scenario, dir, reference);
  write_records_dir(dir + "/records", records, job::scenario_text(scenario));
  return records;
}

}  // namespace dagsim::scenarios
