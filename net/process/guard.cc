// The guard G and the worker W (guard.h). Both run in forks of a multithreaded process: system
// calls only, no allocation, no stdio, no locks; every buffer is on the stack or in the plan.
#include "net/process/guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <initializer_list>

namespace dagsim::net::process_detail {

namespace {

// Why G exits before W ever ran (the caller has been told the reason over the report pipe).
constexpr int kCouldNotStart = 127;

void write_report(int fd, const Report& report) {
  ssize_t n = 0;
  do {
    n = ::write(fd, &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  // A failed write means the caller is gone (EPIPE, with SIGPIPE blocked): nothing to tell.
}

// Closes every descriptor from `first` on except `keep`.
void close_from(int first, int keep, int max_open_fd) {
  const auto close_range_or_loop = [&](int low, int high) {
    if (low > high) return;
    if (::close_range(static_cast<unsigned>(low), static_cast<unsigned>(high), 0) == 0) return;
    const int last = high < max_open_fd ? high : max_open_fd;
    for (int fd = low; fd <= last; ++fd) ::close(fd);  // an older kernel: one at a time
  };
  if (keep >= first) {
    close_range_or_loop(first, keep - 1);
    close_range_or_loop(keep + 1, 0x7fffffff);
  } else {
    close_range_or_loop(first, 0x7fffffff);
  }
}

void default_dispositions() {
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  sigemptyset(&defaults.sa_mask);
  // Fails harmlessly for SIGKILL, SIGSTOP and the C library's own real-time signals.
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &defaults, nullptr);
}

// W, after G's fork: its group, its descriptors, its directory, an empty mask, exec. `error_fd`
// is the close-on-exec pipe to G: the exec error, if any, goes there.
[[noreturn]] void run_worker(const GuardPlan& plan, pid_t guard, int error_fd) {
  const auto fail = [&](Stage stage, int error, int value) {
    const Report report{Report::failed, static_cast<int32_t>(stage), error, value};
    write_report(error_fd, report);
    ::_exit(kCouldNotStart);
  };
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != guard) ::_exit(kCouldNotStart);  // G died before the line above
  ::setpgid(0, 0);
  // The pipe to G and a copy of every source move above every target first, so that no dup2 below
  // overwrites a source another pair still needs (a map may swap 3 and 4, say).
  const int parked_error = ::fcntl(error_fd, F_DUPFD_CLOEXEC, plan.highest_fd + 1);
  if (parked_error < 0) fail(Stage::descriptors, errno, error_fd);
  error_fd = parked_error;
  for (size_t i = 0; i < plan.fd_count; ++i) {
    plan.scratch[i] = ::fcntl(plan.fds[i].source, F_DUPFD_CLOEXEC, plan.highest_fd + 1);
    if (plan.scratch[i] < 0) fail(Stage::descriptors, errno, plan.fds[i].target);
  }
  int highest_target = 2;
  for (size_t i = 0; i < plan.fd_count; ++i) {
    // dup2 leaves the copy without close-on-exec: the program gets it.
    if (::dup2(plan.scratch[i], plan.fds[i].target) < 0) fail(Stage::descriptors, errno, plan.fds[i].target);
    if (plan.fds[i].target > highest_target) highest_target = plan.fds[i].target;
  }
  const auto mapped = [&](int fd) {
    for (size_t i = 0; i < plan.fd_count; ++i) {
      if (plan.fds[i].target == fd) return true;
    }
    return false;
  };
  for (int fd = 0; fd <= highest_target; ++fd) {
    if (mapped(fd)) continue;
    if (fd > 2) {
      ::close(fd);
      continue;
    }
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || ::dup2(null, fd) < 0) fail(Stage::descriptors, errno, fd);
    ::close(null);
  }
  // Everything above the targets goes, close-on-exec or not, but for the pipe to G (its own
  // close-on-exec flag closes it at the exec).
  close_from(highest_target + 1, error_fd, plan.max_open_fd);
  if (plan.directory != nullptr && ::chdir(plan.directory) != 0) fail(Stage::directory, errno, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(plan.path, plan.argv, plan.envp);
  fail(Stage::exec, errno, 0);
  ::_exit(kCouldNotStart);  // not reached: fail() exits
}

// Sends `sig` to W's group Q and to W itself when W has left Q. Safe from pid reuse only while W
// is not reaped: every caller holds that.
void signal_worker(pid_t worker, int sig) {
  ::kill(-worker, sig);
  if (::getpgid(worker) != worker) ::kill(worker, sig);
}

// Whether `text` (a /proc entry's name) is a pid, and which.
pid_t pid_of(const char* text) {
  pid_t pid = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || pid > 100'000'000) return 0;
    pid = pid * 10 + (*c - '0');
  }
  return pid;
}

// Reads the pids of G's children from /proc/thread-self/children and SIGKILLs each. They are G's
// unreaped children, so no pid here can name another process. False when the file cannot be
// opened: a kernel built without CONFIG_PROC_CHILDREN has none.
bool kill_listed_children() {
  const int fd = ::open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[512];
  pid_t pid = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] >= '0' && buffer[i] <= '9') {
        pid = pid * 10 + (buffer[i] - '0');
      } else {
        if (pid > 0) ::kill(pid, SIGKILL);
        pid = 0;
      }
    }
  }
  if (pid > 0) ::kill(pid, SIGKILL);
  ::close(fd);
  return true;
}

// "/proc/PID/<tail>" into `path` (at least 40 bytes), written by hand: no snprintf in a fork.
void proc_path(char* path, pid_t pid, const char* tail) {
  const char* head = "/proc/";
  int at = 0;
  while (head[at] != '\0') {
    path[at] = head[at];
    ++at;
  }
  char digits[12];
  int n = 0;
  for (pid_t rest = pid; rest > 0 && n < 11; rest /= 10) digits[n++] = static_cast<char>('0' + rest % 10);
  while (n > 0) path[at++] = digits[--n];
  for (; *tail != '\0'; ++tail) path[at++] = *tail;
  path[at] = '\0';
}

// The parent of `pid` as /proc/PID/stat says, or 0 when it cannot be read (gone meanwhile);
// `state`, when given, gets its state letter ('R', 'S', 'Z', ...).
pid_t parent_of(pid_t pid, char* state = nullptr) {
  char path[40];
  proc_path(path, pid, "/stat");
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  // "pid (comm) S ppid ...": comm is at most 64 bytes here (TASK_COMM_LEN 16, or a kernel
  // thread's longer name), so the fields after it fit.
  char text[256];
  ssize_t got = 0;
  do {
    got = ::read(fd, text, sizeof text - 1);
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got <= 0) return 0;
  text[got] = '\0';
  // The state follows the last ')' (a command may hold parentheses), the parent after it.
  const char* close = nullptr;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c == ')') close = c;
  }
  if (close == nullptr || close[1] != ' ' || close[2] == '\0' || close[3] != ' ') return 0;
  pid_t parent = 0;
  for (const char* c = close + 4; *c >= '0' && *c <= '9'; ++c) parent = parent * 10 + (*c - '0');
  if (state != nullptr) *state = close[2];
  return parent;
}

// Calls `each(pid)` for every process /proc lists. False when /proc cannot be read.
template <typename Each>
bool for_each_process(Each each) {
  const int fd = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  alignas(8) char buffer[4096];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + at);
      at += entry->d_reclen;
      const pid_t pid = pid_of(entry->d_name);
      if (pid > 0) each(pid);
    }
  }
  ::close(fd);
  return true;
}

// guard.h, 6: W has ended (a zombie, not yet reaped, so its group still exists); what is alive
// below G now is what W left behind. Found by walking /proc: G's children but W, then theirs,
// until a walk finds no one new.
void report_leftovers(const GuardPlan& plan, pid_t worker) {
  if (plan.leftovers == nullptr) return;
  const pid_t self = ::getpid();
  size_t count = 0;
  const auto known = [&](pid_t pid) {
    for (size_t i = 0; i < count; ++i) {
      if (plan.leftovers[i] == pid) return true;
    }
    return false;
  };
  for (int walk = 0; walk < 32 && count < kLeftoversMax; ++walk) {
    const size_t before = count;
    for_each_process([&](pid_t pid) {
      if (pid == self || pid == worker || count >= kLeftoversMax || known(pid)) return;
      char state = 0;
      const pid_t parent = parent_of(pid, &state);
      if (parent == 0 || state == 'Z' || state == 'X') return;
      if (parent == self || known(parent)) plan.leftovers[count++] = pid;
    });
    if (count == before) break;
  }
  if (count == 0) return;
  // Never blocks: a full pipe (a caller that does not read) loses the rest, G goes on.
  ::fcntl(plan.report_fd, F_SETFL, ::fcntl(plan.report_fd, F_GETFL) | O_NONBLOCK);
  for (size_t i = 0; i < count; ++i) {
    char message[sizeof(Report) + kLeftoverTextMax];
    char path[40];
    proc_path(path, plan.leftovers[i], "/cmdline");
    size_t length = 0;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t got = 0;
      do {
        got = ::read(fd, message + sizeof(Report), kLeftoverTextMax);
      } while (got < 0 && errno == EINTR);
      ::close(fd);
      if (got > 0) length = static_cast<size_t>(got);
    }
    // argv's NULs as spaces; the last one (the end of the last argument) dropped.
    while (length > 0 && message[sizeof(Report) + length - 1] == '\0') --length;
    for (size_t c = 0; c < length; ++c) {
      if (message[sizeof(Report) + c] == '\0') message[sizeof(Report) + c] = ' ';
    }
    const Report header{Report::leftover, 0, static_cast<int32_t>(length), static_cast<int32_t>(plan.leftovers[i])};
    const char* from = reinterpret_cast<const char*>(&header);
    for (size_t b = 0; b < sizeof header; ++b) message[b] = from[b];
    ssize_t n = 0;
    do {
      n = ::write(plan.report_fd, message, sizeof header + length);  // < PIPE_BUF: one atomic message
    } while (n < 0 && errno == EINTR);
    if (n < 0) break;
  }
}

}  // namespace

// The same as kill_listed_children, found the slow way: every process /proc lists whose parent is
// this process. Still no pid of another process: only this process's unreaped children name it
// as their parent.
void kill_children_by_scan() {
  const pid_t self = ::getpid();
  for_each_process([&](pid_t pid) {
    if (pid != self && parent_of(pid) == self) ::kill(pid, SIGKILL);
  });
}

namespace {

void kill_children() {
  if (!kill_listed_children()) kill_children_by_scan();
}

// After W: every process below G is killed and reaped. Orphans keep coming to G (it is their
// subreaper) while their parents die, so the list is read again until no child is left. The
// children file may miss a child that is being created: the wait is bounded and the list read
// again.
void kill_everything_below() {
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  const timespec tick{0, 50'000'000};
  for (;;) {
    pid_t got = 0;
    while ((got = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (got < 0 && errno == ECHILD) return;
    kill_children();
    siginfo_t info;
    ::sigtimedwait(&child, &info, &tick);
  }
}

// Exits as W did (`status` from waitpid), so the caller's waitpid on G reads W's end.
[[noreturn]] void exit_like(int status) {
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // W's core (if any) is W's; G's would only mislead
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  ::sigaction(sig, &defaults, nullptr);
  ::kill(::getpid(), sig);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);  // delivered here
  ::_exit(128 + sig);                          // a signal whose default is not to die
}

}  // namespace

int request_signal() { return SIGRTMIN; }

void run_guard(const GuardPlan& plan) {
  const auto fail = [&](Stage stage, int error) {
    write_report(plan.report_fd, Report{Report::failed, static_cast<int32_t>(stage), error, 0});
    ::_exit(kCouldNotStart);
  };
  default_dispositions();  // an inherited SIG_IGN for SIGCHLD would reap W behind G's back
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != plan.caller) ::_exit(kCouldNotStart);  // the caller died before the line above
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) fail(Stage::guard, errno);
  const pid_t guard = ::getpid();
  // _Fork: no atfork handlers (the caller's libraries' handlers are not safe to run here).
  const pid_t worker = ::_Fork();
  if (worker < 0) fail(Stage::fork, errno);
  if (worker == 0) {
    ::close(exec_pipe[0]);
    run_worker(plan, guard, exec_pipe[1]);
  }
  ::setpgid(worker, worker);  // also done by W: whichever runs first, Q exists before either goes on
  ::close(exec_pipe[1]);
  Report started{};
  ssize_t got = 0;
  do {
    got = ::read(exec_pipe[0], &started, sizeof started);
  } while (got < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  // G holds none of the caller's descriptors from here on: a listening socket or a pipe's write
  // end kept open by G would outlive the caller's own close of it.
  close_from(0, plan.report_fd, plan.max_open_fd);
  if (got == static_cast<ssize_t>(sizeof started)) {
    int status = 0;
    while (::waitpid(worker, &status, 0) < 0 && errno == EINTR) {
    }
    write_report(plan.report_fd, started);  // W's failure, as W wrote it
    ::_exit(kCouldNotStart);
  }
  write_report(plan.report_fd, Report{Report::started, 0, 0, static_cast<int32_t>(worker)});

  sigset_t waited;
  sigemptyset(&waited);
  for (int sig : {SIGCHLD, SIGHUP, SIGTERM, plan.request_signal}) sigaddset(&waited, sig);
  int worker_status = 0;
  // A SIGSTOP asked for and not yet answered. Answered from this loop, never by blocking on the
  // stop: a program waiting on a vfork child that stopped before its exec never stops, and G must
  // still see its caller die.
  bool stop_asked = false;
  const auto answer_stop = [&] {
    siginfo_t state{};
    if (!stop_asked) return;
    if (::waitid(P_PID, static_cast<id_t>(worker), &state, WSTOPPED | WEXITED | WNOHANG | WNOWAIT) != 0) return;
    if (state.si_pid != worker) return;  // neither stopped nor ended yet
    write_report(plan.report_fd, Report{Report::stopped, 0, 0, 0});
    stop_asked = false;
  };
  for (bool worker_done = false; !worker_done;) {
    siginfo_t info{};
    const int sig = ::sigwaitinfo(&waited, &info);
    if (sig == SIGHUP) {
      if (::getppid() != plan.caller) signal_worker(worker, SIGKILL);  // the caller is gone
    } else if (sig == SIGTERM) {
      signal_worker(worker, SIGTERM);
    } else if (sig == plan.request_signal) {
      if (info.si_code != SI_QUEUE || info.si_pid != plan.caller) continue;  // not the caller's
      const int forwarded = info.si_value.sival_int;
      signal_worker(worker, forwarded);
      stop_asked = stop_asked || forwarded == SIGSTOP;
      answer_stop();  // it may have stopped already; else its SIGCHLD comes
    } else if (sig == SIGCHLD) {
      answer_stop();
      // Reap whatever ended; W last of all, after its group is killed (see guard.h, 5).
      for (;;) {
        siginfo_t ended{};
        if (::waitid(P_ALL, 0, &ended, WEXITED | WNOHANG | WNOWAIT) != 0 || ended.si_pid == 0) break;
        if (ended.si_pid == worker) {
          report_leftovers(plan, worker);
          ::kill(-worker, SIGKILL);
          while (::waitpid(worker, &worker_status, 0) < 0 && errno == EINTR) {
          }
          worker_done = true;
        } else {
          ::waitpid(ended.si_pid, nullptr, 0);
        }
      }
    }
  }
  kill_everything_below();
  exit_like(worker_status);
}

}  // namespace dagsim::net::process_detail
