// WorkerProcesses (worker_processes.h) with real processes: /bin/sh scripts as workers. Nothing here
// depends on how fast the machine is: each wait polls toward a generous deadline, and a worker
// that must ignore SIGTERM says so in a file before it is stopped.
#include "net/worker_processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/base/throws_error_test_util.h"
#include "net/tcpstore/store_host.h"

namespace dagsim::net {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

WorkerProcessSpec shell(const std::string& script, std::vector<std::string> env = {"PATH=/usr/bin:/bin"}) {
  return WorkerProcessSpec{{"sh", "-c", script}, std::move(env), "", ""};
}

// Polls until the group leaves HEALTHY or a minute passes.
WorkerGroupPoll settle(WorkerProcesses& workers) {
  const auto until = std::chrono::steady_clock::now() + 60s;
  WorkerGroupPoll p = workers.poll();
  while (p.state == elastic::WorkerState::healthy && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
    p = workers.poll();
  }
  return p;
}

// Runs workers.stop() on a node fiber of a fresh thread (as the agent calls it), sleeping on that
// node's RealClock.
void stop_on_io_thread(WorkerProcesses& workers, runtime::Duration grace) {
  std::thread thread([&] {
    tcpstore::StoreHost host("workers");
    host.run([&] { workers.stop(host.clock(), grace); });
  });
  thread.join();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dagsim-workers-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(WorkerProcesses, AGroupWhoseWorkersAllExitZeroSucceeds) {
  WorkerProcesses workers({shell("exit 0"), shell("exit 0"), shell("exit 0")});
  const WorkerGroupPoll p = settle(workers);
  EXPECT_EQ(p.state, elastic::WorkerState::succeeded);
  EXPECT_EQ(p.exited.size(), 3u);
  EXPECT_FALSE(p.first_failure);
}

TEST(WorkerProcesses, OneFailingWorkerFailsTheGroupAndStopEndsTheOthers) {
  WorkerProcesses workers({shell("exec sleep 60"), shell("exit 3")});
  const WorkerGroupPoll p = settle(workers);
  ASSERT_EQ(p.state, elastic::WorkerState::failed);
  ASSERT_TRUE(p.first_failure);
  EXPECT_EQ(p.first_failure->local_rank, 1u);
  EXPECT_EQ(p.first_failure->describe(), "exited with code 3");
  EXPECT_NE(workers.pids()[0], 0);  // still running
  stop_on_io_thread(workers, 30s);  // SIGTERM ends `sleep` at once; the grace is a bound, not a wait
  const WorkerGroupPoll after = workers.poll();
  ASSERT_EQ(after.exited.size(), 2u);
  EXPECT_EQ(after.exited[1].local_rank, 0u);
  EXPECT_EQ(after.exited[1].signal, SIGTERM);
  EXPECT_EQ(workers.pids(), (std::vector<pid_t>{0, 0}));
}

TEST(WorkerProcesses, AWorkerThatIgnoresSigtermIsKilledAfterTheGrace) {
  TempDir dir;
  const fs::path ready = dir.path / "ready";
  WorkerProcesses workers({shell("trap '' TERM; touch " + ready.string() + "; while :; do sleep 1; done")});
  for (int i = 0; i < 6000 && !fs::exists(ready); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(ready));
  stop_on_io_thread(workers, 200ms);
  const WorkerGroupPoll p = workers.poll();
  ASSERT_EQ(p.exited.size(), 1u);
  EXPECT_EQ(p.exited[0].signal, SIGKILL);
  EXPECT_EQ(p.exited[0].describe().rfind("was killed by signal 9", 0), 0u) << p.exited[0].describe();
}

TEST(WorkerProcesses, EachWorkerHasItsEnvironmentAndItsOutputFiles) {
  TempDir dir;
  std::vector<WorkerProcessSpec> specs;
  for (int rank = 0; rank < 2; ++rank) {
    WorkerProcessSpec s = shell("echo rank=$RANK home=${HOME:-none}; echo oops >&2", {"PATH=/usr/bin:/bin", "RANK=" + std::to_string(rank)});
    s.stdout_path = (dir.path / ("out" + std::to_string(rank))).string();
    s.stderr_path = (dir.path / ("err" + std::to_string(rank))).string();
    specs.push_back(s);
  }
  WorkerProcesses workers(specs);
  EXPECT_EQ(settle(workers).state, elastic::WorkerState::succeeded);
  // The whole environment is the one given: HOME is not inherited from the test.
  EXPECT_EQ(read_file(dir.path / "out0"), "rank=0 home=none\n");
  EXPECT_EQ(read_file(dir.path / "out1"), "rank=1 home=none\n");
  EXPECT_EQ(read_file(dir.path / "err1"), "oops\n");
}

TEST(WorkerProcesses, AWorkerThatCannotStartIsNamedAndNothingIsLeftRunning) {
  TempDir dir;
  try {
    WorkerProcesses workers({shell("exec sleep 60"), WorkerProcessSpec{{"/nonexistent/trainer.py"}, {}, "", ""}});
    ADD_FAILURE() << "started a program that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(e.detail().find("worker 1: cannot start /nonexistent/trainer.py: No such file or directory"), std::string::npos)
        << e.detail();
  }
  // The first worker was started, then killed and reaped: this process has no child left.
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  WorkerProcessSpec unwritable = shell("exit 0");
  unwritable.stdout_path = (dir.path / "missing" / "out").string();
  EXPECT_TRUE(throws_error([&] { WorkerProcesses w({unwritable}); }, ErrorCode::invalid_argument,
                           {"worker 0: cannot open", "missing/out", "No such file or directory"}));
}

}  // namespace
}  // namespace dagsim::net

namespace dagsim::net {
namespace {

// A zombie or a pid that is gone: the worker is dead either way.
bool dead(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close == std::string::npos || (close + 2 < text.size() && text[close + 2] == 'Z');
}

TEST(WorkerProcesses, AWorkerDiesWithItsAgentEvenWhenTheAgentIsKilled) {
  // torchrun's workers outlive a SIGKILLed agent (and hold their peers in a collective); ours get
  // SIGKILL from the kernel when their agent dies (PR_SET_PDEATHSIG).
  TempDir dir;
  const fs::path pid_file = dir.path / "worker.pid";
  const pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    WorkerProcesses workers({shell("echo $$ > " + pid_file.string() + ".tmp && mv " + pid_file.string() + ".tmp " +
                                   pid_file.string() + " && exec sleep 600")});
    for (;;) ::pause();
  }
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(pid_file) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(fs::exists(pid_file)) << "the worker never started";
  const pid_t worker = static_cast<pid_t>(std::stol(read_file(pid_file)));
  EXPECT_FALSE(dead(worker));
  ::kill(agent, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(agent, &status, 0), agent);
  while (!dead(worker) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(dead(worker)) << "worker " << worker << " outlived its SIGKILLed agent";
  if (!dead(worker)) ::kill(worker, SIGKILL);
}

}  // namespace
}  // namespace dagsim::net
