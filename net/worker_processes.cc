#include "net/worker_processes.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net {

namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// The PATH execvp would search: the worker's own environment's, as torchrun's Popen does.
std::string search_path(const std::vector<std::string>& env) {
  for (const std::string& e : env) {
    if (e.starts_with("PATH=")) return e.substr(5);
  }
  return "/usr/local/bin:/usr/bin:/bin";
}

// argv[0] as execvp resolves it with the worker's PATH (a name with a slash is used as is).
std::string resolve(const std::string& program, const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) return program;
  const std::string path = search_path(env);
  for (size_t begin = 0; begin <= path.size();) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end == begin ? "." : path.substr(begin, end - begin);
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return program;  // execve fails with ENOENT, which the constructor reports naming it
}

}  // namespace

std::string WorkerExit::describe() const { return elastic::describe_exit(exit_code, signal); }

WorkerProcesses::WorkerProcesses(const std::vector<WorkerProcessSpec>& specs) {
  for (size_t rank = 0; rank < specs.size(); ++rank) {
    const WorkerProcessSpec& spec = specs[rank];
    if (spec.argv.empty()) {
      kill_all(SIGKILL);
      reap(true);
      throw errors::invalid_argument("worker " + std::to_string(rank) + ": no command to run");
    }
    // Output files are opened here first, so that a path that cannot be written fails with its
    // name, not as a child that exits 127.
    const auto open_output = [&](const std::string& path) -> int {
      if (path.empty()) return -1;
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) {
        const int error = errno;
        kill_all(SIGKILL);
        reap(true);
        throw errors::invalid_argument("worker " + std::to_string(rank) + ": cannot open " + printable(path, kPathMax) +
                                       " for its output: " + std::strerror(error));
      }
      return fd;
    };
    const int out = open_output(spec.stdout_path);
    const int err = open_output(spec.stderr_path);
    const std::string program = resolve(spec.argv[0], spec.env);
    std::vector<char*> argv = c_strings(spec.argv);
    std::vector<char*> envp = c_strings(spec.env);
    const pid_t parent = ::getpid();
    int report[2];  // the child's exec error, if any; closed by a successful exec
    if (::pipe2(report, O_CLOEXEC) != 0) {
      const int error = errno;
      for (int fd : {out, err}) if (fd >= 0) ::close(fd);
      kill_all(SIGKILL);
      reap(true);
      throw errors::invalid_argument("worker " + std::to_string(rank) + ": cannot start: pipe: " + std::strerror(error));
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The child: only async-signal-safe calls until exec. Its own process group (so stop()
      // reaches what it starts); killed with the agent (PR_SET_PDEATHSIG), so a SIGKILLed agent
      // leaves no worker behind, unlike torchrun's; default signal handling and an empty mask
      // whatever the agent blocks or ignores.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the agent died before the line above
      struct sigaction defaults{};
      defaults.sa_handler = SIG_DFL;
      for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2}) ::sigaction(sig, &defaults, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (out >= 0) ::dup2(out, STDOUT_FILENO);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      ::execve(program.c_str(), argv.data(), envp.data());
      const int error = errno;
      [[maybe_unused]] const ssize_t ignored = ::write(report[1], &error, sizeof(error));
      ::_exit(127);
    }
    const int fork_error = errno;
    ::close(report[1]);
    for (int fd : {out, err}) if (fd >= 0) ::close(fd);
    int exec_error = 0;
    ssize_t got = 0;
    if (pid > 0) {
      do {
        got = ::read(report[0], &exec_error, sizeof(exec_error));
      } while (got < 0 && errno == EINTR);
    }
    ::close(report[0]);
    if (pid < 0 || got > 0) {
      if (pid > 0) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
      kill_all(SIGKILL);
      reap(true);
      throw errors::invalid_argument("worker " + std::to_string(rank) + ": cannot start " + printable(spec.argv[0]) + ": " +
                                     std::strerror(pid < 0 ? fork_error : exec_error));
    }
    pids_.push_back(pid);
  }
}

WorkerProcesses::~WorkerProcesses() {
  kill_all(SIGKILL);
  reap(true);
}

std::vector<pid_t> WorkerProcesses::pids() const { return pids_; }

void WorkerProcesses::kill_all(int sig) {
  for (pid_t pid : pids_) {
    if (pid > 0) ::kill(-pid, sig);  // the worker's process group: its pid
  }
}

void WorkerProcesses::reap(bool block) {
  for (uint32_t rank = 0; rank < pids_.size(); ++rank) {
    pid_t& pid = pids_[rank];
    if (pid <= 0) continue;
    int status = 0;
    pid_t got = 0;
    do {
      got = ::waitpid(pid, &status, block ? 0 : WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != pid) continue;  // still running (or, ECHILD, reaped by someone else: left as is)
    WorkerExit exit{rank};
    if (WIFSIGNALED(status)) {
      exit.signal = WTERMSIG(status);
    } else {
      exit.exit_code = WEXITSTATUS(status);
    }
    exited_.push_back(exit);
    pid = 0;
  }
}

WorkerGroupPoll WorkerProcesses::poll() {
  reap(false);
  WorkerGroupPoll result;
  result.exited = exited_;
  const auto failure = std::find_if(exited_.begin(), exited_.end(), [](const WorkerExit& e) { return e.failed(); });
  if (failure != exited_.end()) {
    result.state = elastic::WorkerState::failed;
    result.first_failure = *failure;
  } else if (exited_.size() == pids_.size()) {
    result.state = elastic::WorkerState::succeeded;
  }
  return result;
}

void WorkerProcesses::stop(runtime::Clock& clock, runtime::Duration grace) {
  kill_all(SIGTERM);
  const runtime::TimePoint until = clock.now() + grace;
  const auto live = [&] { return std::any_of(pids_.begin(), pids_.end(), [](pid_t p) { return p > 0; }); };
  for (reap(false); live() && clock.now() < until; reap(false)) {
    clock.sleep_until(std::min(until, clock.now() + std::chrono::milliseconds(10)));
  }
  kill_all(SIGKILL);
  reap(true);
}

}  // namespace dagsim::net
