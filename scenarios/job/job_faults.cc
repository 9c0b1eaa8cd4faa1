// Striking a job's faults on real processes, the store and the network, and undoing them
// (job_runner.h). Each fault's record: at_ms/until_ms, fired, detail (what was done, with pids).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <sys/types.h>
#include <unistd.h>

#include "core/base/error.h"
#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_runner.h"

namespace dagsim::scenarios::job {

namespace {

std::string kind_name(JobFault::Kind k) { return std::string(job_fault_kind_name(k)); }

double ms_of(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

bool is_layer_fault(JobFault::Kind k) {
  return k == JobFault::Kind::store_delay || k == JobFault::Kind::store_drop || k == JobFault::Kind::store_reset;
}

std::string JobRunner::write_store_faults() {
  nlohmann::json rules = nlohmann::json::array();
  for (const FaultState& s : faults_) {
    const JobFault& spec = *s.spec;
    if (!is_layer_fault(spec.kind) || !s.struck || s.done) continue;
    nlohmann::json r = {{"kind", kind_name(spec.kind).substr(6)}, {"ops", spec.store_ops}, {"probability", spec.probability},
                        {"name", "line " + std::to_string(spec.line)}};
    if (spec.kind == JobFault::Kind::store_delay) {
      r["delay_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(spec.delay.value_or(Duration{0})).count();
    }
    rules.push_back(std::move(r));
  }
  // Whole or not at all: the store may read it at any moment (its start, a SIGUSR1).
  const std::string path = store_faults_path();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"faults", rules}}.dump() << "\n";
    if (!out.flush()) return "could not write " + tmp;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return "could not rename " + tmp + " to " + path;
  const std::string written = std::to_string(rules.size()) + " rule(s) in store/faults.json";
  if (!store_.running()) return written + " (the store is down: its next start reads them)";
  store_.signal(SIGUSR1);
  return written + ", SIGUSR1 to the store, pid " + std::to_string(store_.pid());
}

std::string JobRunner::target_name(const JobTarget& t) const {
  switch (t.kind) {
    case JobTarget::Kind::agent: return "agent" + std::to_string(t.agent);
    case JobTarget::Kind::worker: return "agent" + std::to_string(t.agent) + ":" + std::to_string(t.local_rank);
    case JobTarget::Kind::store: return "store";
  }
  return "?";
}

void JobRunner::note_fault(const std::string& kind, std::optional<pid_t> pid) {
  const int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json f = {{"t", t}, {"kind", kind}};
  if (pid) f["pid"] = *pid;
  store_faults_.push_back(std::move(f));
}

void JobRunner::strike(FaultState& f) {
  const JobFault& spec = *f.spec;
  f.struck = true;
  f.at_ms = now_ms();
  const std::string who = spec.kind == JobFault::Kind::partition ? "the partition" : target_name(spec.target);
  const auto finish = [&](const std::string& detail) {
    f.detail = detail;
    say(who + ": " + kind_name(spec.kind) + " (" + detail + ") at " + std::to_string(*f.at_ms / 1000.0).substr(0, 6) + " s");
  };
  if (spec.kind == JobFault::Kind::partition) {
    if (!netns_) {
      f.done = true;
      return finish("not struck: a partition needs namespaces = true");
    }
    std::string blocked;
    for (size_t a = 0; a < spec.groups.size(); ++a) {
      for (size_t b = 0; b < spec.groups.size(); ++b) {
        if (a == b) continue;
        for (uint32_t x : spec.groups[a]) {
          for (uint32_t y : spec.groups[b]) netns_->block(x, y);
        }
      }
    }
    f.undo_due_ms = *f.at_ms + ms_of(spec.duration.value_or(Duration{0}));
    return finish("blackhole routes between the groups' namespaces");
  }
  if (is_layer_fault(spec.kind)) {
    if (on_etcd()) {
      f.done = true;
      return finish("not struck: the store's fault layer is dagsim store's, and this store is an etcd");
    }
    f.undo_due_ms = *f.at_ms + ms_of(spec.duration.value_or(Duration{0}));
    const std::string sent = write_store_faults();
    std::string what = kind_name(spec.kind).substr(6);  // "store_drop" -> "drop"
    if (spec.kind == JobFault::Kind::store_delay) {
      what += " by " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(spec.delay.value_or(Duration{0})).count()) + " ms";
    }
    std::string ops;
    for (const std::string& op : spec.store_ops) ops += (ops.empty() ? "" : ", ") + op;
    return finish("the store's fault layer: " + what + " of " + (ops.empty() ? std::string("every query") : ops) +
                  (spec.probability < 1 ? " with probability " + std::to_string(spec.probability).substr(0, 6) : "") + "; " + sent);
  }
  if (spec.kind == JobFault::Kind::store_pause || spec.kind == JobFault::Kind::store_restart) {
    if (!store_.running()) {
      f.done = true;
      return finish("not struck: the store is not running");
    }
    const pid_t pid = store_.pid();
    if (spec.kind == JobFault::Kind::store_pause) {
      store_.signal(SIGSTOP);
      note_fault("store_pause", std::nullopt);
      f.undo_due_ms = *f.at_ms + ms_of(spec.duration.value_or(Duration{0}));
      return finish("SIGSTOP to the store, pid " + std::to_string(pid));
    }
    if (on_etcd()) {  // etcd keeps its data dir across the restart, unless keep_data = false wipes it
      kill_etcd(spec.keep_data);
      f.undo_due_ms = *f.at_ms + ms_of(spec.restart_after.value_or(Duration{0}));
      return finish("SIGKILL to etcd, pid " + std::to_string(pid) +
                    (spec.keep_data ? "; its data dir kept" : "; its data dir wiped (keep_data = false)"));
    }
    store_.kill();
    store_.wait();
    f.undo_due_ms = *f.at_ms + ms_of(spec.restart_after.value_or(Duration{0}));
    // keep_data: the next store replays the records since the last restart that lost the data
    // (dagsim store --restore); otherwise it starts empty, and later restarts restore from it on.
    restore_next_ = spec.keep_data;
    if (!spec.keep_data) restore_from_ = store_records_.size();
    return finish("SIGKILL to the store, pid " + std::to_string(pid) +
                  (spec.keep_data ? "; it starts again from its records (keep_data)" : "; it starts again empty (keep_data = false)"));
  }
  // An agent or one worker.
  Incarnation* inc = current(spec.target.agent);
  if (inc == nullptr || !inc->running()) {
    f.done = true;
    return finish("not struck: " + target_name(spec.target) + " is not running");
  }
  if (spec.target.kind == JobTarget::Kind::worker) {
    const std::optional<pid_t> pid = worker_pid(spec.target.agent, spec.target.local_rank);
    if (!pid) {
      f.done = true;
      return finish("not struck: no worker of local rank " + std::to_string(spec.target.local_rank) + " is running");
    }
    f.pid = *pid;
    const auto mark = [&](const nlohmann::json& exit) {
      for (WorkerSeen& w : inc->workers) {
        if (w.pid == *pid) w.exit = exit;
      }
    };
    // A worker's kill or leave reaches its children too (DataLoader workers): its process group
    // when it leads one, else the pid and every marked process below it.
    const auto signal_worker = [&](int sig) -> std::string {
      if (::getpgid(*pid) == *pid) {
        ::kill(-*pid, sig);
        return signal_name(sig) + " to worker pid " + std::to_string(*pid) + "'s process group";
      }
      std::vector<pid_t> below;
      for (const MarkedProcess& m : marked_descendants({*pid}, token_)) {
        if (m.pid != *pid) below.push_back(m.pid);
      }
      ::kill(*pid, sig);
      for (pid_t p : below) ::kill(p, sig);
      return signal_name(sig) + " to worker pid " + std::to_string(*pid) + " and " + std::to_string(below.size()) + " process(es) below it";
    };
    switch (spec.kind) {
      case JobFault::Kind::kill:
      case JobFault::Kind::crash: {
        const std::string done = signal_worker(SIGKILL);
        mark({{"signal", "SIGKILL"}});
        f.done = true;
        return finish(done);
      }
      case JobFault::Kind::leave: {
        const std::string done = signal_worker(SIGTERM);
        f.done = true;
        return finish(done);
      }
      case JobFault::Kind::pause:
        f.paused.clear();
        f.paused_start.clear();
        if (const std::optional<uint64_t> start = start_time_of(*pid)) {
          ::kill(*pid, SIGSTOP);
          f.paused = {*pid};
          f.paused_start = {*start};
        }
        f.undo_due_ms = *f.at_ms + ms_of(spec.duration.value_or(Duration{0}));
        return finish("SIGSTOP to worker pid " + std::to_string(*pid));
      default: break;
    }
    f.done = true;
    return finish("not struck: not a worker's fault");
  }
  f.pid = inc->pid;
  switch (spec.kind) {
    case JobFault::Kind::kill:
    case JobFault::Kind::crash: {
      inc->killed_by_fault = true;
      note_fault("kill", inc->pid);
      if (spec.kind == JobFault::Kind::crash) {
        restart_due_[spec.target.agent] = *f.at_ms + ms_of(spec.restart_after.value_or(Duration{0}));
        f.undo_due_ms = restart_due_[spec.target.agent];
      } else {
        f.done = true;
      }
      inc->process.kill();  // the agent's group; its guard takes every process below it
      inc->process.wait();
      return finish("SIGKILL to agent pid " + std::to_string(inc->pid) + "'s process group and everything below it");
    }
    case JobFault::Kind::pause: {
      // A paused node stops whole: the agent first (so it cannot see its workers stop), then every
      // process below it, each in whatever group it moved to (dagsim launch's workers have groups
      // of their own, below guards).
      inc->process.signal(SIGSTOP);
      note_fault("pause", inc->pid);
      f.paused = {};
      f.paused_start = {};
      std::map<pid_t, pid_t> parents;
      const std::vector<MarkedProcess> marked = marked_descendants({inc->pid}, token_);
      for (const MarkedProcess& m : marked) parents[m.pid] = m.ppid;
      for (const MarkedProcess& m : marked) {
        if (m.pid == inc->pid || !descends_from(m.pid, inc->pid, parents)) continue;
        // Its start time, so the undo continues this process and never a pid reused since.
        const std::optional<uint64_t> start = start_time_of(m.pid);
        if (start && ::kill(m.pid, SIGSTOP) == 0) {
          f.paused.push_back(m.pid);
          f.paused_start.push_back(*start);
        }
      }
      f.undo_due_ms = *f.at_ms + ms_of(spec.duration.value_or(Duration{0}));
      return finish("SIGSTOP to agent pid " + std::to_string(inc->pid) + "'s process group and " +
                    std::to_string(f.paused.size()) + " process(es) below it");
    }
    case JobFault::Kind::leave:
      inc->process.signal(SIGTERM);
      f.done = true;
      return finish("SIGTERM to agent pid " + std::to_string(inc->pid) + "'s process group");
    default: break;
  }
  f.done = true;
  finish("not struck: not an agent's fault");
}

void JobRunner::undo(FaultState& f) {
  const JobFault& spec = *f.spec;
  f.done = true;
  f.until_ms = now_ms();
  switch (spec.kind) {
    case JobFault::Kind::partition:
      for (size_t a = 0; a < spec.groups.size(); ++a) {
        for (size_t b = 0; b < spec.groups.size(); ++b) {
          if (a == b) continue;
          for (uint32_t x : spec.groups[a]) {
            for (uint32_t y : spec.groups[b]) netns_->unblock(x, y);
          }
        }
      }
      f.detail += "; healed";
      say("the partition healed");
      return;
    case JobFault::Kind::store_pause:
      if (store_.running()) store_.signal(SIGCONT);
      note_fault("store_resume", std::nullopt);
      f.detail += "; SIGCONT";
      say("store resumed");
      return;
    case JobFault::Kind::store_delay:
    case JobFault::Kind::store_drop:
    case JobFault::Kind::store_reset:
      f.detail += "; healed: " + write_store_faults();
      say("the store's fault layer: " + std::string(kind_name(spec.kind)) + " healed");
      return;
    case JobFault::Kind::store_restart: {
      // A restart that fails (its port taken while it was down, the store not starting) is the
      // fault's outcome, recorded; the run goes on without a store.
      const uint16_t port = store_port_;
      if (!on_etcd() && port != 0 && !port_free(port)) {
        f.detail += "; could not start again: port taken (" + std::to_string(port) + ")";
        say("store could not start again: port " + std::to_string(port) + " taken");
        return;
      }
      try {
        start_store();
      } catch (const std::exception& e) {
        f.detail += "; could not start again: " + std::string(e.what());
        say("store could not start again: " + std::string(e.what()));
        return;
      }
      f.detail += "; started again on port " + std::to_string(store_port_) + " (pid " + std::to_string(store_.pid()) + ")";
      say("store started again (pid " + std::to_string(store_.pid()) + ")");
      return;
    }
    case JobFault::Kind::pause: {
      // Only a pid that is still the process paused (the run's marker, the same start time): one
      // that ended (a kill, stop_everything) may have been reused by now.
      const auto resume = [&] {
        for (size_t i = 0; i < f.paused.size(); ++i) {
          if (i < f.paused_start.size() && same_marked_process(f.paused[i], f.paused_start[i], token_)) ::kill(f.paused[i], SIGCONT);
        }
      };
      if (spec.target.kind == JobTarget::Kind::worker) {
        resume();
      } else {
        // Those below first, so the agent wakes to workers that run.
        resume();
        Incarnation* inc = current(spec.target.agent);
        if (inc != nullptr && inc->running() && inc->pid == f.pid) inc->process.signal(SIGCONT);
        note_fault("resume", f.pid);
      }
      f.detail += "; SIGCONT";
      say(target_name(spec.target) + " resumed");
      return;
    }
    case JobFault::Kind::crash:
      restart_due_[spec.target.agent].reset();
      start_agent(spec.target.agent);
      f.detail += "; started again (pid " + std::to_string(current(spec.target.agent)->pid) + ")";
      return;
    default: return;
  }
}

}  // namespace dagsim::scenarios::job
