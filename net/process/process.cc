// Process (process.h): the caller's side. spawn() builds every array the guard and the program
// need (guard.h: nothing may be allocated after the fork), forks the guard with every signal
// blocked, and reads the guard's first report: started, or why not.
#include "net/process/process.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/process/guard.h"

extern char** environ;

namespace dagsim::net {

namespace {

using process_detail::Report;
using process_detail::Stage;

// How long signal(SIGSTOP) waits for the program to stop (process.h).
constexpr auto kStopAnswerLimit = std::chrono::seconds(10);
// How long a SIGKILL waits for the program to be dead (it always is within moments: a SIGKILL
// cannot be caught, only the guard's hop delays it).
constexpr auto kKillAnswerLimit = std::chrono::seconds(2);

// Whether `pid` still runs: not gone, not a zombie its guard has yet to reap. The guard has not
// reaped it while this is asked (it reaps only after the program ended), so the pid is its.
bool still_running(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[512];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (a command may hold parentheses).
  const char* close = std::strrchr(text, ')');
  if (close == nullptr || close[1] != ' ') return false;
  return close[2] != 'Z' && close[2] != 'X';
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// argv[0] as execvp resolves it with the program's own PATH (a name with a slash is used as is).
std::string resolve(const std::string& program, const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) return program;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : env) {
    if (e.starts_with("PATH=")) path = e.substr(5);
  }
  for (size_t begin = 0; begin <= path.size();) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end == begin ? "." : path.substr(begin, end - begin);
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return program;  // execve fails with ENOENT, which spawn() reports naming it
}

// A descriptor this side opened for the program, closed when spawn() returns either way.
struct OwnedFd {
  int fd = -1;
  OwnedFd() = default;
  explicit OwnedFd(int f) : fd(f) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
};

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string why(const Report& report, const std::string& directory) {
  const std::string error = std::strerror(report.error);
  switch (static_cast<Stage>(report.stage)) {
    case Stage::descriptors:
      return "its descriptor " + std::to_string(report.value) + ": " + error;
    case Stage::directory:
      return "cannot change to directory " + printable(directory, kPathMax) + ": " + error;
    case Stage::guard:
    case Stage::fork:
      return "fork: " + error;
    default:
      return error;
  }
}

}  // namespace

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

bool ProcessExit::exited() const { return WIFEXITED(status); }
int ProcessExit::exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
int ProcessExit::signal() const { return WIFSIGNALED(status) ? WTERMSIG(status) : 0; }

std::string ProcessExit::describe() const {
  if (const int sig = signal(); sig != 0) {
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name != nullptr ? std::string(" (") + name + ")" : "");
  }
  return "exited with code " + std::to_string(exit_code());
}

Process spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw errors::invalid_argument((spec.name.empty() ? "a process" : spec.name) + ": no command to run");
  const std::string name = spec.name.empty() ? printable(spec.argv[0]) : spec.name;
  // The fd map, with the output files in it: opened here first, so that a path that cannot be
  // written fails with its name, not as a program that exits 127.
  std::vector<process_detail::FdPair> fds;
  const auto map_fd = [&](int target, int source) {
    DAGSIM_ASSERT(target >= 0 && source >= 0);
    const auto same = [&](const process_detail::FdPair& p) { return p.target == target; };
    fds.erase(std::remove_if(fds.begin(), fds.end(), same), fds.end());
    fds.push_back({target, source});
  };
  for (const auto& [target, source] : spec.fds) map_fd(target, source);
  const auto open_output = [&](const std::string& path, int target, OwnedFd& owned) {
    if (path.empty()) return;
    owned.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (owned.fd < 0) {
      throw errors::invalid_argument(name + ": cannot open " + printable(path, kPathMax) + " for its output: " +
                                     std::strerror(errno));
    }
    map_fd(target, owned.fd);
  };
  OwnedFd out, err;
  open_output(spec.stdout_path, STDOUT_FILENO, out);
  open_output(spec.stderr_path, STDERR_FILENO, err);

  // Everything the forks read, built before the fork (guard.h).
  const std::string path = resolve(spec.argv[0], spec.env);
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  std::vector<int> scratch(fds.size());
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw errors::internal_error(name + ": cannot start: pipe: " + std::strerror(errno));
  OwnedFd report_read(report[0]);
  OwnedFd report_write(report[1]);
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  process_detail::GuardPlan plan;
  plan.path = path.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.directory = spec.directory.empty() ? nullptr : spec.directory.c_str();
  plan.fds = fds.data();
  plan.fd_count = fds.size();
  plan.scratch = scratch.data();
  plan.highest_fd = report[1];
  for (const auto& p : fds) plan.highest_fd = std::max({plan.highest_fd, p.target, p.source});
  plan.max_open_fd = files.rlim_cur == RLIM_INFINITY ? 1 << 20 : static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20));
  plan.caller = ::getpid();
  plan.report_fd = report[1];
  plan.request_signal = process_detail::request_signal();
  std::vector<pid_t> leftovers(process_detail::kLeftoversMax);  // the guard's copy is the one written
  plan.leftovers = leftovers.data();

  // Every signal blocked across the fork: no handler of this process may run in the guard before
  // it resets them.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t guard = ::fork();
  if (guard == 0) process_detail::run_guard(plan);
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (guard < 0) throw errors::internal_error(name + ": cannot start: fork: " + std::strerror(fork_error));
  ::close(report_write.fd);
  report_write.fd = -1;

  Report first{};
  ssize_t got = 0;
  do {
    got = ::read(report_read.fd, &first, sizeof first);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof first) || first.kind != Report::started) {
    const int status = wait_for(guard);
    if (got == static_cast<ssize_t>(sizeof first) && first.kind == Report::failed) {
      const bool system = first.stage == static_cast<int32_t>(Stage::guard) || first.stage == static_cast<int32_t>(Stage::fork);
      const std::string detail = name + ": cannot start " + printable(spec.argv[0], kPathMax) + ": " + why(first, spec.directory);
      if (system) throw errors::internal_error(detail);
      throw errors::invalid_argument(detail);
    }
    throw errors::internal_error(name + ": cannot start " + printable(spec.argv[0], kPathMax) +
                                 ": its guard process ended first and " + ProcessExit{status}.describe());
  }
  Process process;
  process.guard_ = guard;
  process.pid_ = first.value;
  process.report_fd_ = report_read.fd;
  report_read.fd = -1;
  return process;
}

Process::~Process() {
  if (running()) {
    kill();
    wait();
  }
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  if (this == &other) return *this;
  if (running()) {
    kill();
    wait();
  }
  release();
  guard_ = std::exchange(other.guard_, 0);
  pid_ = std::exchange(other.pid_, 0);
  report_fd_ = std::exchange(other.report_fd_, -1);
  reports_ = std::exchange(other.reports_, std::string());
  stops_answered_ = std::exchange(other.stops_answered_, 0);
  leftovers_ = std::exchange(other.leftovers_, {});
  exit_ = std::exchange(other.exit_, std::nullopt);
  return *this;
}

void Process::release() {
  if (report_fd_ >= 0) ::close(report_fd_);
  report_fd_ = -1;
  guard_ = 0;
}

void Process::reaped(int status) {
  exit_ = ProcessExit{status};
  read_reports();  // the guard has exited: everything it wrote is in the pipe
  reports_.clear();
  release();
}

bool Process::read_reports() {
  if (report_fd_ < 0) return true;
  bool ended = false;
  char chunk[4096];
  for (;;) {
    pollfd ready{report_fd_, POLLIN, 0};
    const int n = ::poll(&ready, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const ssize_t got = ::read(report_fd_, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      ended = true;
      break;
    }
    reports_.append(chunk, static_cast<size_t>(got));
  }
  size_t at = 0;
  while (reports_.size() - at >= sizeof(Report)) {
    Report report{};
    std::memcpy(&report, reports_.data() + at, sizeof report);
    if (report.kind == Report::leftover) {
      const size_t length = std::min<size_t>(static_cast<size_t>(std::max(report.error, 0)), process_detail::kLeftoverTextMax);
      if (reports_.size() - at - sizeof report < length) break;  // its text is still coming
      leftovers_.push_back({static_cast<pid_t>(report.value), reports_.substr(at + sizeof report, length)});
      at += sizeof report + length;
      continue;
    }
    if (report.kind == Report::stopped) ++stops_answered_;
    at += sizeof report;
  }
  reports_.erase(0, at);
  return ended;
}

std::optional<ProcessExit> Process::poll() {
  if (!running()) return exit_;
  int status = 0;
  pid_t got = 0;
  do {
    got = ::waitpid(guard_, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  // Reaped by someone else (ECHILD: a waitpid(-1) of the caller's): its end is unknown.
  DAGSIM_ASSERT(got >= 0 || errno == ECHILD);
  if (got == guard_) reaped(status);
  if (got < 0) reaped(W_EXITCODE(255, 0));
  return exit_;
}

ProcessExit Process::wait() {
  if (running()) {
    int status = 0;
    pid_t got = 0;
    do {
      got = ::waitpid(guard_, &status, 0);
    } while (got < 0 && errno == EINTR);
    reaped(got == guard_ ? status : W_EXITCODE(255, 0));
  }
  DAGSIM_ASSERT(exit_.has_value());
  return *exit_;
}

void Process::signal(int sig) {
  if (!running()) return;
  if (sig == SIGSTOP) {
    // An answer that came after an earlier SIGSTOP gave up waiting is not this one's.
    read_reports();
    stops_answered_ = 0;
  }
  // The guard is this process's unreaped child, so its pid names it still; the guard forwards to
  // the program's group, which it has not reaped either (guard.h, 4).
  sigval value{};
  value.sival_int = sig;
  if (::sigqueue(guard_, process_detail::request_signal(), value) != 0) return;
  if (sig == SIGKILL) {
    // A kill has struck when this returns, as a direct SIGKILL has: a fault timeline (a kill on a
    // workload event, answered once it struck) counts on that, and the guard's hop would
    // otherwise let the program run on for a moment on a busy machine.
    const auto until = std::chrono::steady_clock::now() + kKillAnswerLimit;
    while (still_running(pid_) && std::chrono::steady_clock::now() < until) {
      const timespec pause{0, 200'000};
      ::nanosleep(&pause, nullptr);
    }
    return;
  }
  if (sig != SIGSTOP) return;
  // Bounded: a program waiting on a vfork child that stopped before its exec never stops.
  pollfd answer{report_fd_, POLLIN, 0};
  const auto until = std::chrono::steady_clock::now() + kStopAnswerLimit;
  for (;;) {
    // The pipe's end: the guard exited first (the program ended): nothing is left to stop.
    if (read_reports() || stops_answered_ > 0) return;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    const int ready = ::poll(&answer, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return;
  }
}

void Process::kill() { signal(SIGKILL); }

ProcessExit Process::stop(runtime::Clock& clock, runtime::Duration grace) {
  std::vector<Process*> one{this};
  stop_all(one, clock, grace);
  return wait();
}

void stop_all(const std::vector<Process*>& processes, runtime::Clock& clock, runtime::Duration grace) {
  for (Process* p : processes) p->signal(SIGTERM);
  const runtime::TimePoint until = clock.now() + grace;
  const auto live = [&] {
    return std::any_of(processes.begin(), processes.end(), [](Process* p) { return !p->poll(); });
  };
  // Polled, not waited on: the caller is a fiber, which sleeps on its clock between looks.
  while (live() && clock.now() < until) {
    clock.sleep_until(std::min(until, clock.now() + std::chrono::milliseconds(10)));
  }
  for (Process* p : processes) p->kill();
  for (Process* p : processes) p->wait();
}

}  // namespace dagsim::net
