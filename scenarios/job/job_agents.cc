// The store and the agents of a job run: argv, environment, start, workers, exits (job_runner.h).
#include <csignal>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_runner.h"

namespace dagsim::scenarios::job {

namespace fs = std::filesystem;

namespace {

std::string seconds_text(Duration d) {
  const double s = std::chrono::duration<double>(d).count();
  std::string t = std::to_string(s);
  while (t.size() > 1 && t.back() == '0') t.pop_back();
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}

nlohmann::json exit_json(const net::ProcessExit& e) {
  if (e.exited()) return {{"code", e.exit_code()}};
  return {{"signal", signal_name(e.signal())}};
}

}  // namespace

std::vector<std::string> JobRunner::base_env() const {
  std::map<std::string, std::string> env;
  for (const std::string& v : net::current_environment()) {
    const size_t eq = v.find('=');
    if (eq != std::string::npos) env[v.substr(0, eq)] = v.substr(eq + 1);
  }
  for (const auto& [k, v] : spec_.env) env[k] = v;
  env["DAGSIM_JOB_DIR"] = dir_;
  env["DAGSIM_SEED"] = std::to_string(options_.seed);
  env[kMarkerVariable] = token_;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

void JobRunner::start_store() {
  if (on_etcd()) return start_etcd();
  // The first start chooses the port the store keeps across restarts: below the kernel's
  // ephemeral range, so no outgoing connection is given it while the store is down (a restart
  // on a port the kernel chose could find it taken). 0 (none found): the store picks one.
  if (store_incarnation_ == 0 && store_port_ == 0) store_port_ = port_below_ephemeral_range();
  const std::string name = store_incarnation_ == 0 ? "store.jsonl" : "store." + std::to_string(store_incarnation_) + ".jsonl";
  const std::string record = dir_ + "/store/" + name;
  const std::string port_file = dir_ + "/store/port." + std::to_string(store_incarnation_);
  net::ProcessSpec spec;
  spec.argv = {options_.dagsim_binary, "store", "--port", std::to_string(store_port_), "--record", record};
  // The bridge's address only: the agents' namespaces reach it, the rest of the host's networks not.
  if (netns_) spec.argv.insert(spec.argv.end(), {"--host", netns_->store_address()});
  // The fault layer's rules (job_faults.cc writes them), its draws from the run's seed.
  spec.argv.insert(spec.argv.end(), {"--faults", store_faults_path(), "--seed", std::to_string(options_.seed)});
  // A restart that keeps the data replays the records, so none may summarise a value.
  bool keeps = false;
  for (const FaultState& f : faults_) keeps = keeps || (f.spec->kind == JobFault::Kind::store_restart && f.spec->keep_data);
  if (keeps) spec.argv.insert(spec.argv.end(), {"--record-value-bytes", std::to_string(size_t{16} << 20)});
  if (restore_next_ && restore_from_ < store_records_.size()) {
    spec.argv.push_back("--restore");
    spec.argv.insert(spec.argv.end(), store_records_.begin() + static_cast<std::ptrdiff_t>(restore_from_), store_records_.end());
  }
  restore_next_ = false;
  spec.env = base_env();
  spec.fds = {};
  spec.stdout_path = port_file;
  spec.stderr_path = dir_ + "/store/store.log";
  spec.name = "the store (dagsim store)";
  store_ = net::spawn(spec);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    // The port file is in the run's folder, where the job may write: read as a regular file only,
    // never waiting on what is there, and only its first line.
    const std::optional<std::string> head = read_head(port_file, 64);
    const size_t nl = head ? head->find('\n') : std::string::npos;
    if (nl != std::string::npos && nl > 0 && nl <= 5 && head->find_first_not_of("0123456789") == nl) {
      store_port_ = static_cast<uint16_t>(std::stoul(head->substr(0, nl)));
      break;
    }
    if (store_.poll() || std::chrono::steady_clock::now() > until) {
      store_.kill();
      store_.wait();
      // The first start's port taken between the check and the store's bind: another one.
      if (store_incarnation_ == 0 && port_attempts_ < 5 && store_port_ != 0 && !port_free(store_port_)) {
        ++port_attempts_;
        store_port_ = 0;
        return start_store();
      }
      throw errors::invalid_argument("the store (" + options_.dagsim_binary + " store) did not start: see " + dir_ + "/store/store.log");
    }
    sleep_ms(10);
  }
  store_records_.push_back(record);
  if (!store_tail_) {
    store_tail_ = std::make_unique<StoreTail>(record, "job");
  } else {
    store_tail_->follow(record);
  }
  ++store_incarnation_;
}

void JobRunner::stop_store() {
  if (on_etcd()) return stop_etcd();
  if (store_.running()) stop_process(store_, std::chrono::seconds(10));
}

std::vector<std::string> JobRunner::agent_argv(uint32_t agent, uint32_t incarnation) const {
  const std::string host = netns_ ? netns_->store_address() : "127.0.0.1";
  const std::string nnodes =
      spec_.min_nodes == spec_.max_nodes ? std::to_string(spec_.min_nodes) : std::to_string(spec_.min_nodes) + ":" + std::to_string(spec_.max_nodes);
  std::vector<std::string> argv;
  if (spec_.launcher == JobLauncher::torchrun) {
    argv = {"/usr/bin/python3", "-m", "torch.distributed.run"};
  } else {
    argv = {options_.dagsim_binary, "launch"};
  }
  const std::string backend = spec_.rdzv_backend == JobRdzvBackend::etcd ? (spec_.launcher == JobLauncher::torchrun ? "etcd-v2" : "etcd") : spec_.rdzv_backend == JobRdzvBackend::dagsim ? "dagsim" : "c10d";
  // Both streams teed ("3"), except under torchrun 1.13 on Python >= 3.11, whose Std("3") is not
  // `in Std` (an IntFlag combination) and crashes the agent: stdout only there ("1"); the workers'
  // stderr is then in the agent's log_dir, not its output.
  const std::string streams = spec_.launcher == JobLauncher::torchrun ? "1" : "3";
  std::string conf;
  for (const auto& [k, v] : spec_.rdzv_conf) conf += (conf.empty() ? "" : ",") + k + "=" + v;
  const std::string name = "agent" + std::to_string(agent) + "." + std::to_string(incarnation);
  argv.insert(argv.end(), {"--nnodes", nnodes, "--nproc_per_node", std::to_string(spec_.nproc_per_node), "--rdzv_backend", backend,
                           "--rdzv_endpoint", host + ":" + std::to_string(store_port_), "--rdzv_id", "job", "--max_restarts",
                           std::to_string(spec_.max_restarts), "--monitor_interval", seconds_text(spec_.monitor_interval),
                           "--redirects", streams, "--tee", streams, "--log_dir", dir_ + "/agents/" + name});
  if (!conf.empty()) argv.insert(argv.end(), {"--rdzv_conf", conf});
  if (spec_.launcher == JobLauncher::dagsim) {
    argv.insert(argv.end(), {"--events", dir_ + "/agents/" + name + ".events.jsonl"});
    if (!spec_.python.empty()) argv.insert(argv.end(), {"--python", spec_.python});
  }
  if (spec_.no_python) argv.push_back("--no_python");
  if (spec_.module) argv.push_back("-m");
  argv.insert(argv.end(), spec_.command.begin(), spec_.command.end());
  return netns_ ? netns_->wrap(agent, argv) : argv;
}

void JobRunner::start_agent(uint32_t agent) {
  auto inc = std::make_unique<Incarnation>();
  inc->agent = agent;
  inc->incarnation = next_incarnation_[agent]++;
  const std::string name = "agent" + std::to_string(agent) + "." + std::to_string(inc->incarnation);
  inc->argv = agent_argv(agent, inc->incarnation);
  inc->log = "agents/" + name + ".log";
  inc->events_path = dir_ + "/agents/" + name + ".events.jsonl";
  net::ProcessSpec spec;
  spec.argv = inc->argv;
  spec.env = base_env();
  if (spec_.launcher == JobLauncher::torchrun && !spec_.python.empty()) spec.env.push_back("PYTHON_EXEC=" + spec_.python);
  spec.fds = {};
  spec.directory = directory_;
  spec.stdout_path = dir_ + "/" + inc->log;
  spec.stderr_path = spec.stdout_path;
  spec.name = "agent" + std::to_string(agent);
  inc->process = net::spawn(spec);
  inc->pid = inc->process.pid();
  inc->started_ms = now_ms();
  // Its lines feed output triggers only: a regex sees at most a line's first 4 KiB.
  inc->tail = std::make_unique<LineTail>(spec.stdout_path, kMaxTriggerLineBytes);
  say("agent" + std::to_string(agent) + " started (incarnation " + std::to_string(inc->incarnation) + ", pid " +
      std::to_string(inc->pid) + ")");
  incarnations_.push_back(std::move(inc));
}

Incarnation* JobRunner::current(uint32_t agent) {
  for (auto it = incarnations_.rbegin(); it != incarnations_.rend(); ++it) {
    if ((*it)->agent == agent) return it->get();
  }
  return nullptr;
}

void JobRunner::reap_agents() {
  for (auto& inc : incarnations_) {
    if (!inc->running()) continue;
    if (const std::optional<net::ProcessExit> e = inc->process.poll()) {
      inc->ended_ms = now_ms();
      inc->exit = exit_json(*e);
      for (WorkerSeen& w : inc->workers) {
        if (!w.ended_ms) w.ended_ms = inc->ended_ms;
      }
      say("agent" + std::to_string(inc->agent) + " (pid " + std::to_string(inc->pid) + ") " + e->describe());
      if (!restart_due_[inc->agent]) agent_done_[inc->agent] = true;
    }
  }
}

void JobRunner::scan_workers() {
  last_scan_ms_ = now_ms();
  // Only the running agents' trees: reading every process's environment on the host every 100 ms
  // costs a core's tenth and may wait on a process stuck in D state.
  std::vector<pid_t> roots;
  for (const auto& inc : incarnations_) {
    if (inc->running()) roots.push_back(inc->pid);
  }
  const std::vector<MarkedProcess> marked = marked_descendants(roots, token_);
  std::map<pid_t, pid_t> parents;
  std::map<pid_t, const MarkedProcess*> by_pid;
  for (const MarkedProcess& p : marked) {
    parents[p.pid] = p.ppid;
    by_pid[p.pid] = &p;
  }
  for (auto& inc : incarnations_) {
    if (!inc->running()) continue;
    std::set<pid_t> alive;
    for (const MarkedProcess& p : marked) {
      if (!p.local_rank || p.pid == inc->pid || !descends_from(p.pid, inc->pid, parents)) continue;
      // The topmost process with LOCAL_RANK is the worker (its children inherit the variable).
      const auto parent = by_pid.find(p.ppid);
      if (parent != by_pid.end() && parent->second->local_rank && parent->second->pid != inc->pid) continue;
      alive.insert(p.pid);
      bool known = false;
      for (const WorkerSeen& w : inc->workers) known = known || w.pid == p.pid;
      if (!known) inc->workers.push_back({*p.local_rank, p.rank, p.pid, now_ms(), std::nullopt, nullptr});
    }
    for (WorkerSeen& w : inc->workers) {
      if (!w.ended_ms && !alive.contains(w.pid)) w.ended_ms = now_ms();
    }
  }
}

std::optional<pid_t> JobRunner::worker_pid(uint32_t agent, uint32_t local_rank) {
  scan_workers();
  Incarnation* inc = current(agent);
  if (inc == nullptr || !inc->running()) return std::nullopt;
  for (auto it = inc->workers.rbegin(); it != inc->workers.rend(); ++it) {
    if (it->local_rank == local_rank && !it->ended_ms) return it->pid;
  }
  return std::nullopt;
}

uint32_t JobRunner::restarts_of(const Incarnation& inc) const {
  uint32_t restarts = 0;
  if (spec_.launcher == JobLauncher::dagsim) {
    // The events file and the log are in the run's folder: read as regular files only, a line
    // at most 1 MiB (job_triggers.h).
    for_each_line(inc.events_path, [&](const std::string& line) {
      try {
        const nlohmann::json e = nlohmann::json::parse(line);
        restarts = std::max(restarts, e.value("agent_restarts", 0u));
      } catch (const std::exception&) {
      }
    });
    return restarts;
  }
  // torchrun's INFO lines ("N/M attempts left; will restart worker group") are not shown by
  // default; its log_dir's attempt_K folders are: K = max_restarts - remaining restarts.
  for_each_line(dir_ + "/" + inc.log, [&](const std::string& line) {
    if (line.find("attempts left; will restart worker group") != std::string::npos) ++restarts;
  });
  std::error_code ec;
  const std::string log_dir = dir_ + "/agents/agent" + std::to_string(inc.agent) + "." + std::to_string(inc.incarnation);
  for (fs::recursive_directory_iterator it(log_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it.depth() >= 2) it.disable_recursion_pending();
    if (it.depth() > 2 || !name.starts_with("attempt_") || !it->is_directory(ec)) continue;
    try {
      restarts = std::max(restarts, static_cast<uint32_t>(std::stoul(name.substr(8))));
    } catch (const std::exception&) {
    }
  }
  return restarts;
}

}  // namespace dagsim::scenarios::job
