// A [job] run that dies without finishing leaves nothing behind: `dagsim run` on a namespaces job
// (shell workers, no torch) SIGTERMed mid-run removes its namespaces, links, /etc/netns folders
// and processes, then dies of SIGTERM. And overlapping partitions (BlockCounts): a blocked pair
// stays blocked until its last partition heals. Root only where namespaces are made.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/job/job_netns.h"

namespace dagsim::scenarios::job {
namespace {

namespace fs = std::filesystem;

bool have_netns() { return ::geteuid() == 0 && ::access("/usr/sbin/ip", X_OK) == 0; }

std::string sh(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

TEST(NetnsBlockCounts, OverlappingPartitionsShareAPair) {
  BlockCounts c;
  EXPECT_TRUE(c.add(0, 1));    // the first partition adds the route
  EXPECT_FALSE(c.add(0, 1));   // the second one, overlapping, does not (no EEXIST)
  EXPECT_TRUE(c.add(1, 0));
  EXPECT_EQ(c.count(0, 1), 2u);
  EXPECT_FALSE(c.remove(0, 1));  // the first heals: the second still needs the route
  EXPECT_EQ(c.count(0, 1), 1u);
  EXPECT_TRUE(c.remove(0, 1));   // the last heals: deleted
  EXPECT_FALSE(c.remove(0, 1));  // not held: nothing to delete
  EXPECT_EQ(c.count(0, 1), 0u);
  EXPECT_EQ(c.count(1, 0), 1u);
}

TEST(NetnsBlockCounts, RoutesInRealNamespaces) {
  if (!have_netns()) GTEST_SKIP() << "needs root and ip";
  std::unique_ptr<Netns> n = Netns::create(2);
  const std::string routes = "ip -n " + n->ns(0) + " route show type blackhole 2>&1";
  const std::string to = n->agent_address(1);
  EXPECT_EQ(n->block(0, 1), "");
  EXPECT_EQ(n->block(0, 1), "");  // overlapping: no throw, no error
  EXPECT_NE(sh(routes).find(to), std::string::npos);
  EXPECT_EQ(n->unblock(0, 1), "");
  EXPECT_NE(sh(routes).find(to), std::string::npos) << "healed while another partition holds it";
  EXPECT_EQ(n->unblock(0, 1), "");
  EXPECT_EQ(sh(routes).find(to), std::string::npos);
  EXPECT_EQ(n->unblock(0, 1), "");
}

// Every descendant of `root` now (by /proc's ppid links).
std::set<pid_t> descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    parent[std::stoi(name)] = ppid;
  }
  std::set<pid_t> out;
  for (const auto& [pid, ppid] : parent) {
    for (pid_t p = ppid; p > 1; p = parent.count(p) ? parent[p] : 0) {
      if (p == root) {
        out.insert(pid);
        break;
      }
    }
  }
  return out;
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] != 'Z';
}

TEST(JobSignal, SigtermMidRunLeavesNothingBehind) {
  if (!have_netns()) GTEST_SKIP() << "needs root and ip";
  const char* env_binary = std::getenv("DAGSIM_BINARY");  // another build's, to compare
  const std::string binary = env_binary != nullptr ? env_binary : DAGSIM_BINARY;
  char tmpl[] = "/tmp/job-signal-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    std::ofstream(dir + "/worker.sh") << "#!/bin/sh\ni=0\nwhile [ $i -lt 600 ]; do i=$((i+1)); echo \"step $i rank $RANK\"; sleep 0.1; done\n";
    ::chmod((dir + "/worker.sh").c_str(), 0755);
    std::ofstream(dir + "/job.toml") << "name = \"signal_test\"\n\n[job]\ncommand = [\"" << dir << "/worker.sh\"]\nno_python = true\n"
                                     << "agents = 2\nnnodes = \"2\"\nnproc_per_node = 1\n"
                                     << "rdzv_conf = { last_call_timeout = \"1\", join_timeout = \"60\" }\n"
                                     << "timeout_ms = 120000\nnamespaces = true\n\n[[checks]]\nkind = \"job_succeeded\"\n";
  }
  const pid_t run = ::fork();
  ASSERT_GE(run, 0);
  if (run == 0) {
    const int out = ::open((dir + "/run.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execl(binary.c_str(), binary.c_str(), "run", (dir + "/job.toml").c_str(), "--seed", "1", "--records", (dir + "/run").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string tag = "dj" + std::to_string(run);
  // Mid-run: the workers are printing steps.
  bool started = false;
  for (int i = 0; i < 400 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    started = sh("grep -rls 'step 5 ' " + dir + "/run/agents 2>/dev/null").size() > 0;
  }
  const std::set<pid_t> below = descendants(run);
  const bool had_netns = sh("ip netns list").find(tag + "n0") != std::string::npos;
  ::kill(run, SIGTERM);
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 600 && !ended; ++i) {
    ended = ::waitpid(run, &status, WNOHANG) == run;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!ended) {
    ::kill(run, SIGKILL);
    ::waitpid(run, &status, 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the guards' last SIGKILLs
  const std::string log = sh("tail -c 3000 " + dir + "/run.out");
  EXPECT_TRUE(started) << log;
  EXPECT_TRUE(had_netns) << log;
  EXPECT_GE(below.size(), 4u) << "the store, two agents and their workers";
  EXPECT_TRUE(ended) << "still running 30 s after SIGTERM";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status << "\n" << log;
  EXPECT_EQ(sh("ip netns list | grep " + tag), "");
  EXPECT_EQ(sh("ip -o link show | grep " + tag), "");
  EXPECT_EQ(sh("ls /etc/netns 2>/dev/null | grep " + tag), "");
  EXPECT_FALSE(fs::exists("/tmp/dagsim-netns-" + std::to_string(run) + ".out"));
  for (pid_t p : below) EXPECT_FALSE(alive(p)) << "pid " << p << " of the run is still running";
  // Whatever this test's failure left: removed, so no later run finds it.
  for (pid_t p : below) ::kill(p, SIGKILL);
  sh("for n in $(ip netns list | grep -o '" + tag + "n[0-9]*'); do ip netns del $n; done; "
     "for l in $(ip -o link show | grep -o '" + tag + "\\(h[0-9]*\\|br\\)'); do ip link del $l; done 2>/dev/null; "
     "rm -rf /etc/netns/" + tag + "n* /tmp/dagsim-netns-" + std::to_string(run) + ".out");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dagsim::scenarios::job
