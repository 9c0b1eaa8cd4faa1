// spawn() and Process (process.h) with real programs: /bin/sh, cat, sleep. No verdict depends on
// how fast the machine is: every wait polls toward a generous deadline, and a program that must
// be running before a step says so in a file first.
#include "net/process/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "core/base/throws_error_test_util.h"
#include "net/process/guard.h"
#include "net/tcpstore/store_host.h"

namespace dagsim::net {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dagsim-process-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ProcessSpec command(std::vector<std::string> argv, std::vector<std::string> env = {"PATH=/usr/bin:/bin"}) {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = std::move(env);
  return spec;
}

ProcessSpec shell(const std::string& script) { return command({"sh", "-c", script}); }

bool eventually(const std::function<bool()>& condition, std::chrono::seconds limit = 60s) {
  const auto until = SteadyClock::now() + limit;
  while (!condition()) {
    if (SteadyClock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Waits for a file a program writes (whole: written to .tmp, then renamed) and reads its number.
pid_t read_pid(const fs::path& path) {
  if (!eventually([&] { return fs::exists(path); })) return 0;
  return static_cast<pid_t>(std::stol(read_file(path)));
}

// Fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ...
std::vector<std::string> stat_fields(pid_t pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// Gone, or a zombie: it runs no more.
bool dead(pid_t pid) {
  const std::vector<std::string> fields = stat_fields(pid);
  return fields.empty() || fields[0] == "Z" || fields[0] == "X";
}

// Runs stop() on a node fiber of a fresh thread (as an agent calls it), sleeping on its clock.
ProcessExit stop_on_io_thread(Process& process, runtime::Duration grace) {
  ProcessExit exit;
  std::thread thread([&] {
    tcpstore::StoreHost host("process");
    host.run([&] { exit = process.stop(host.clock(), grace); });
  });
  thread.join();
  return exit;
}

bool no_child_left() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

TEST(Process, AProgramThatCannotStartIsNamedWithWhy) {
  TempDir dir;
  EXPECT_TRUE(throws_error([] { spawn(command({"/nonexistent/trainer.py"}, {})); }, ErrorCode::invalid_argument,
                           {"cannot start /nonexistent/trainer.py: No such file or directory"}));
  const fs::path plain = dir.path / "not-executable";
  std::ofstream(plain) << "#!/bin/sh\n";
  ProcessSpec named = command({plain.string()}, {});
  named.name = "worker 3";
  EXPECT_TRUE(throws_error([&] { spawn(named); }, ErrorCode::invalid_argument,
                           {"worker 3: cannot start ", "not-executable: Permission denied"}));
  EXPECT_TRUE(throws_error([] { spawn(command({"no-such-program-on-path"})); },
                           ErrorCode::invalid_argument, {"cannot start no-such-program-on-path: No such file"}));
  ProcessSpec elsewhere = shell("exit 0");
  elsewhere.directory = (dir.path / "missing").string();
  EXPECT_TRUE(throws_error([&] { spawn(elsewhere); }, ErrorCode::invalid_argument,
                           {"cannot change to directory", "missing", "No such file or directory"}));
  ProcessSpec unwritable = shell("exit 0");
  unwritable.stdout_path = (dir.path / "missing" / "out").string();
  EXPECT_TRUE(throws_error([&] { spawn(unwritable); }, ErrorCode::invalid_argument,
                           {"cannot open", "missing/out", "No such file or directory"}));
  ProcessSpec closed = shell("exit 0");
  closed.fds.push_back({7, 1000});  // not open here
  EXPECT_TRUE(throws_error([&] { spawn(closed); }, ErrorCode::invalid_argument, {"its descriptor 7: Bad file descriptor"}));
  EXPECT_TRUE(no_child_left()) << "a failed start left a process to reap";
}

TEST(Process, TheFdMapIsTheChildsWholeTable) {
  TempDir dir;
  // Two pipes on fixed numbers, handed over crossed (40 as 41 and 41 as 40: each source is
  // another pair's target), and one descriptor without close-on-exec that is not in the map.
  int a[2], b[2];
  ASSERT_EQ(::pipe(a), 0);
  ASSERT_EQ(::pipe(b), 0);
  ASSERT_EQ(::dup2(a[1], 40), 40);
  ASSERT_EQ(::dup2(b[1], 41), 41);
  const int stray = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(stray, 0);
  // bash: dash takes single-digit descriptors only.
  ProcessSpec spec = command({"bash", "-c", "echo to-a >&41; echo to-b >&40; ls /proc/$$/fd; exit 0"});
  spec.fds = {{1, 1}, {40, 41}, {41, 40}};  // no 0 or 2: they are /dev/null in the child
  spec.stdout_path = (dir.path / "out").string();
  Process process = spawn(spec);
  EXPECT_EQ(process.wait().exit_code(), 0);
  for (int fd : {40, 41, a[1], b[1], stray}) ::close(fd);
  char buffer[16] = {};
  ASSERT_GT(::read(a[0], buffer, sizeof buffer - 1), 0);
  EXPECT_STREQ(buffer, "to-a\n");
  std::fill(std::begin(buffer), std::end(buffer), 0);
  ASSERT_GT(::read(b[0], buffer, sizeof buffer - 1), 0);
  EXPECT_STREQ(buffer, "to-b\n");
  ::close(a[0]);
  ::close(b[0]);
  // The shell's own table while ls ran: the map (and the standard three), nothing inherited.
  EXPECT_EQ(read_file(dir.path / "out"), "0\n1\n2\n40\n41\n");
}

TEST(Process, SignalsAreResetAndTheProgramHasAGroupOfItsOwn) {
  TempDir dir;
  // This process blocks SIGTERM and ignores SIGINT while spawning: the program gets neither.
  sigset_t term, before;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &before), 0);
  const auto old_int = std::signal(SIGINT, SIG_IGN);
  ProcessSpec status = command({"cat", "/proc/self/status"});
  status.stdout_path = (dir.path / "status").string();
  Process process = spawn(status);
  ProcessSpec stat = command({"cat", "/proc/self/stat"});
  stat.stdout_path = (dir.path / "stat").string();
  Process second = spawn(stat);
  std::signal(SIGINT, old_int);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  EXPECT_EQ(process.wait().exit_code(), 0);
  const std::string text = read_file(dir.path / "status");
  EXPECT_NE(text.find("SigBlk:\t0000000000000000"), std::string::npos) << text;
  EXPECT_NE(text.find("SigIgn:\t0000000000000000"), std::string::npos) << text;
  EXPECT_EQ(second.wait().exit_code(), 0);
  const std::string line = read_file(dir.path / "stat");
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string state, ppid, pgrp, session;
  fields >> state >> ppid >> pgrp >> session;
  EXPECT_EQ(std::stoi(pgrp), second.pid()) << line;     // its own process group, named by its pid
  EXPECT_NE(std::stoi(session), ::getsid(0)) << line;  // the guard's session, not this one's
}

TEST(Process, ExitCodesAndSignalsAreTheProgramsOwn) {
  Process seven = spawn(shell("exit 7"));
  const ProcessExit e = seven.wait();
  EXPECT_TRUE(e.exited());
  EXPECT_EQ(e.exit_code(), 7);
  EXPECT_EQ(e.describe(), "exited with code 7");
  Process segv = spawn(shell("kill -SEGV $$"));
  const ProcessExit s = segv.wait();
  EXPECT_EQ(s.signal(), SIGSEGV);
  EXPECT_FALSE(WCOREDUMP(s.status)) << "the guard left a core file of its own";
  EXPECT_EQ(s.describe().rfind("was killed by signal 11", 0), 0u) << s.describe();
  Process running = spawn(shell("exec sleep 600"));
  EXPECT_FALSE(running.poll());
  running.kill();
  EXPECT_EQ(running.wait().signal(), SIGKILL);
  EXPECT_EQ(running.poll()->signal(), SIGKILL);  // every later look says the same
}

TEST(Process, StopEndsAProgramThatIgnoresSigtermAtTheGrace) {
  TempDir dir;
  const fs::path ready = dir.path / "ready";
  Process stubborn = spawn(shell("trap '' TERM; touch " + ready.string() + "; while :; do sleep 1; done"));
  ASSERT_TRUE(eventually([&] { return fs::exists(ready); }));
  const auto begin = SteadyClock::now();
  const ProcessExit e = stop_on_io_thread(stubborn, 300ms);
  EXPECT_GE(SteadyClock::now() - begin, 300ms);
  EXPECT_EQ(e.signal(), SIGKILL);
  Process obedient = spawn(shell("exec sleep 600"));
  EXPECT_EQ(stop_on_io_thread(obedient, 60s).signal(), SIGTERM);  // the grace is a bound, not a wait
}

TEST(Process, SigstopReturnsOnceTheProgramHasStopped) {
  TempDir dir;
  const fs::path pid_file = dir.path / "pid";
  // exec: a shell forks by vfork, and a program waiting on a vfork child that was stopped before
  // its exec never stops (signal(SIGSTOP) gives up after its bound then).
  Process process = spawn(shell("echo $$ > " + pid_file.string() + ".tmp; mv " + pid_file.string() + ".tmp " +
                                pid_file.string() + "; exec sleep 600"));
  const pid_t pid = read_pid(pid_file);
  ASSERT_EQ(pid, process.pid());
  process.signal(SIGSTOP);
  EXPECT_EQ(stat_fields(pid).at(0), "T");  // no wait: stopped by the time signal() returned
  process.signal(SIGCONT);
  EXPECT_TRUE(eventually([&] { return stat_fields(pid).at(0) != "T"; }));
}

TEST(Process, WhatTheProgramStartedEndsWithIt) {
  TempDir dir;
  // A background job in the program's group, and one that left it for a session of its own.
  const fs::path job = dir.path / "job", escaped = dir.path / "escaped";
  Process process = spawn(shell("sleep 600 & echo $! > " + job.string() + ".tmp; mv " + job.string() + ".tmp " + job.string() +
                                "; setsid sh -c 'echo $$ > " + escaped.string() + ".tmp; mv " + escaped.string() + ".tmp " +
                                escaped.string() + "; exec sleep 600' & while [ ! -e " + escaped.string() +
                                " ]; do sleep 0.01; done; exit 3"));
  const pid_t background = read_pid(job), other_session = read_pid(escaped);
  ASSERT_GT(background, 0);
  ASSERT_GT(other_session, 0);
  EXPECT_EQ(process.wait().exit_code(), 3);
  // wait() returns once the guard is gone, and the guard goes once everything below it has.
  EXPECT_TRUE(dead(background));
  EXPECT_TRUE(dead(other_session));
}

// What a program left behind when it exited is named once it is reaped: here a sleeper it
// double-forked (reparented to the guard, in a session of its own) and exited without.
TEST(Process, LeftoversNameWhatTheProgramLeftBehind) {
  TempDir dir;
  const fs::path sleeper = dir.path / "sleeper";
  Process process = spawn(shell("(setsid sleep 613 & echo $! > " + sleeper.string() + ".tmp; mv " + sleeper.string() + ".tmp " +
                                sleeper.string() + ") ; while [ ! -e " + sleeper.string() + " ] || [ \"$(cat /proc/$(cat " + sleeper.string() +
                                ")/comm)\" != sleep ]; do sleep 0.01; done; exit 0"));
  EXPECT_TRUE(process.leftovers().empty());  // not reaped yet
  EXPECT_TRUE(process.wait().success());
  const pid_t left = read_pid(sleeper);
  ASSERT_GT(left, 0);
  EXPECT_TRUE(dead(left));
  ASSERT_EQ(process.leftovers().size(), 1u);
  EXPECT_EQ(process.leftovers()[0].pid, left);
  EXPECT_EQ(process.leftovers()[0].cmdline, "sleep 613");
}

// A program that waits for what it started leaves nothing behind.
TEST(Process, AProgramThatWaitsForItsChildrenLeavesNothing) {
  Process process = spawn(shell("sleep 0.2 & sleep 0.1 & wait; exit 0"));
  EXPECT_TRUE(process.wait().success());
  EXPECT_TRUE(process.leftovers().empty());
}

TEST(Process, EverythingDiesWithACallerThatIsSigkilled) {
  TempDir dir;
  const fs::path worker = dir.path / "worker", grandchild = dir.path / "grandchild";
  const pid_t caller = ::fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    Process p = spawn(shell("trap '' TERM; sleep 600 & echo $! > " + grandchild.string() + ".tmp; mv " + grandchild.string() +
                            ".tmp " + grandchild.string() + "; echo $$ > " + worker.string() + ".tmp; mv " +
                            worker.string() + ".tmp " + worker.string() + "; while :; do sleep 1; done"));
    for (;;) ::pause();
  }
  const pid_t w = read_pid(worker), g = read_pid(grandchild);
  ASSERT_GT(w, 0);
  ASSERT_GT(g, 0);
  ::kill(caller, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(caller, &status, 0), caller);
  EXPECT_TRUE(eventually([&] { return dead(w) && dead(g); }))
      << "worker " << w << " or its child " << g << " outlived their SIGKILLed caller";
  if (!dead(w)) ::kill(w, SIGKILL);
  if (!dead(g)) ::kill(g, SIGKILL);
}

TEST(Process, WhatLeftTheProgramsSessionDiesWithACallerThatIsSigkilled) {
  // Issue 49: a child that calls setsid, and an orphan of a double fork in a session of its own,
  // are in no group or session of the program's: only the guard, their subreaper, reaches them.
  TempDir dir;
  const fs::path worker = dir.path / "worker", detached = dir.path / "detached", orphan = dir.path / "orphan";
  const auto write_pid = [](const fs::path& path) { return "echo $$ > " + path.string() + ".tmp; mv " + path.string() + ".tmp " + path.string(); };
  const pid_t caller = ::fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    Process p = spawn(shell("trap '' TERM; setsid sh -c '" + write_pid(detached) + "; exec sleep 600' & " +
                            "setsid sh -c 'sh -c \"echo \\$$ > " + orphan.string() + ".tmp; mv " + orphan.string() + ".tmp " +
                            orphan.string() + "; exec sleep 600\" & exit 0'; " +
                            write_pid(worker) + "; while :; do sleep 1; done"));
    for (;;) ::pause();
  }
  const pid_t w = read_pid(worker), d = read_pid(detached), o = read_pid(orphan);
  ASSERT_GT(w, 0);
  ASSERT_GT(d, 0);
  ASSERT_GT(o, 0);
  // The orphan's parent left at once: it is the guard's now (the worker's parent), the subreaper's.
  ASSERT_TRUE(eventually([&] { return stat_fields(o).size() > 1 && stat_fields(o)[1] == stat_fields(w).at(1); }));
  EXPECT_NE(stat_fields(d).at(3), stat_fields(w).at(3)) << "the detached child is in the worker's session";
  EXPECT_NE(stat_fields(o).at(3), stat_fields(w).at(3)) << "the orphan is in the worker's session";
  ::kill(caller, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(caller, &status, 0), caller);
  EXPECT_TRUE(eventually([&] { return dead(w) && dead(d) && dead(o); }))
      << "worker " << w << ", its setsid child " << d << " or the orphan " << o << " outlived their SIGKILLed caller";
  for (pid_t pid : {w, d, o}) {
    if (!dead(pid)) ::kill(pid, SIGKILL);
  }
}

TEST(Process, TheScanKillsTheCallersChildrenAndNothingElse) {
  // The guard's fallback for a kernel without /proc/thread-self/children (guard.h), run in a
  // child of the test so that only that child's children are at stake; the test's own sleeper,
  // a sibling of that child's, must live on.
  Process bystander = spawn(command({"sleep", "600"}));
  const pid_t scanner = ::fork();
  ASSERT_GE(scanner, 0);
  if (scanner == 0) {
    pid_t children[3] = {};
    for (int i = 0; i < 3; ++i) {
      children[i] = ::fork();
      if (children[i] == 0) {
        if (i == 1) ::setsid();  // a session of its own changes nothing: its parent is the scanner
        for (;;) ::pause();
      }
    }
    process_detail::kill_children_by_scan();
    // Each must be dead within moments; one the scan missed is killed here and fails the test.
    int failed = 0;
    for (pid_t child : children) {
      int status = 0;
      const auto until = SteadyClock::now() + 10s;
      pid_t got = 0;
      while ((got = ::waitpid(child, &status, WNOHANG)) == 0 && SteadyClock::now() < until) ::usleep(1000);
      if (got == 0) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        failed = 1;
      } else if (got != child || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        failed = 1;
      }
    }
    ::_exit(failed);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(scanner, &status, 0), scanner);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child of the scanner was not SIGKILLed by the scan";
  EXPECT_FALSE(bystander.poll().has_value()) << "the scan killed a process that was not the scanner's child";
}

TEST(Process, TheThreadThatSpawnedItMayEnd) {
  // PR_SET_PDEATHSIG fires when the parent *thread* ends: the guard tells that from its caller's
  // death by getppid(), so the program runs on.
  TempDir dir;
  const fs::path go = dir.path / "go";
  Process process;
  std::thread([&] { process = spawn(shell("while [ ! -e " + go.string() + " ]; do sleep 0.01; done; exit 5")); }).join();
  std::ofstream(go) << "";
  EXPECT_EQ(process.wait().exit_code(), 5);
}

TEST(Process, TheDestructorLeavesNothingRunning) {
  pid_t pid = 0;
  {
    Process process = spawn(shell("trap '' TERM; exec sleep 600"));
    pid = process.pid();
    Process moved = std::move(process);
    EXPECT_FALSE(process.running());
    EXPECT_EQ(moved.pid(), pid);
  }
  EXPECT_TRUE(dead(pid));
  EXPECT_TRUE(no_child_left());
}

}  // namespace
}  // namespace dagsim::net
