// SIGKILL of a dagsim process that started children leaves nothing running, grandchildren
// included (issue 48): `dagsim launch` with workers that ignore SIGTERM and fork a child of their
// own (a DataLoader's worker processes, say), or whose children leave its session (setsid, a double
// fork), `dagsim run --transport tcp`, `dagsim check --jobs 2` and a TCP run whose store node hosts
// etcd (the node killed first, or the launcher alone).
//
// Method: the test makes itself a child subreaper, starts the dagsim process in a fresh session
// (setsid in the test's child), and while it runs records every process group and session its
// descendants are in (read from /proc by parentage, never by name). Once its children exist, it
// SIGKILLs it, then polls /proc until no live process remains in its session, in any recorded
// group or session, or below the test (a surviving orphan would be reparented to the test, the
// subreaper). Every wait is on a condition with a generous deadline, so the verdict does not
// depend on the machine's load.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace dagsim {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// How long the processes may take to go after the SIGKILL: the guards act at once; this bounds a
// loaded machine.
constexpr auto kCleanupLimit = 20s;
constexpr auto kStartLimit = 120s;

struct Proc {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t group = 0;
  pid_t session = 0;
  char state = '?';
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every process /proc shows now.
std::vector<Proc> processes() {
  std::vector<Proc> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string text = read_file(entry.path() / "stat");
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;  // gone meanwhile
    std::istringstream rest(text.substr(close + 2));
    Proc p;
    p.pid = std::stoi(name);
    rest >> p.state >> p.ppid >> p.group >> p.session;
    if (rest) out.push_back(p);
  }
  return out;
}

// The descendants of `root` now, with their depth below it (1: its children).
std::map<pid_t, int> descendants(const std::vector<Proc>& all, pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const Proc& p : all) children[p.ppid].push_back(p.pid);
  std::map<pid_t, int> depth;
  std::vector<std::pair<pid_t, int>> todo{{root, 0}};
  while (!todo.empty()) {
    const auto [pid, d] = todo.back();
    todo.pop_back();
    for (pid_t child : children[pid]) {
      if (depth.emplace(child, d + 1).second) todo.push_back({child, d + 1});
    }
  }
  return depth;
}

std::string command_line(pid_t pid) {
  std::string text = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : text) c = c == '\0' ? ' ' : c;
  return text;
}

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("dagsim-sigkill-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(path); }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// What the running tree looked like: its processes by depth, and its groups and sessions so far.
struct Seen {
  std::map<pid_t, int> depth;  // the latest look
  std::map<pid_t, char> state;  // the latest look's: 'T' is stopped
  std::set<pid_t> groups, sessions;
  int deepest() const {
    int d = 0;
    for (const auto& [pid, level] : depth) d = std::max(d, level);
    return d;
  }
  size_t at_depth(int level, char only = 0) const {
    size_t n = 0;
    for (const auto& [pid, l] : depth) n += l == level && (only == 0 || state.at(pid) == only) ? 1 : 0;
    return n;
  }
};

void expect_nothing_left(const Seen& seen, pid_t spared);

// Runs `dagsim ARGS` in a fresh session, waits until `ready` holds of its tree, SIGKILLs it (or
// the process `victim` picks in it) and checks that nothing it started (or the victim started) is
// left; then kills and checks the whole tree.
void kill_and_check(const std::vector<std::string>& args, const fs::path& log, const std::function<bool(const Seen&)>& ready,
                    const std::function<pid_t(const Seen&)>& victim = nullptr) {
  // Orphans of the tree come to the test: a survivor cannot hide by being reparented to init.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  std::vector<std::string> argv_s = {DAGSIM_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(out, 0);
  const pid_t root = ::fork();
  ASSERT_GE(root, 0);
  if (root == 0) {
    ::setsid();
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out);
  Seen seen;
  seen.sessions.insert(root);  // setsid: its session's id is its pid
  seen.groups.insert(root);
  const auto look = [&] {
    const std::vector<Proc> all = processes();
    seen.depth = descendants(all, root);
    seen.state.clear();
    for (const Proc& p : all) seen.state[p.pid] = p.state;
    for (const Proc& p : all) {
      if (!seen.depth.contains(p.pid)) continue;
      seen.groups.insert(p.group);
      seen.sessions.insert(p.session);
    }
  };
  const auto until = SteadyClock::now() + kStartLimit;
  bool started = false;
  for (look(); !(started = ready(seen)) && SteadyClock::now() < until; look()) {
    int status = 0;
    if (::waitpid(root, &status, WNOHANG) == root) {
      ADD_FAILURE() << "dagsim ended before its children were there; its output:\n" << read_file(log);
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  look();  // the groups of the last children started before the kill
  int status = 0;
  if (victim && started) {
    // Only the victim's own subtree is judged first: its groups and sessions, not the root's.
    const pid_t target = victim(seen);
    ASSERT_GT(target, 0);
    Seen below;
    below.depth = descendants(processes(), target);
    below.depth[target] = 0;
    for (const Proc& p : processes()) {
      if (!below.depth.contains(p.pid)) continue;
      below.groups.insert(p.group);
      below.sessions.insert(p.session);
    }
    ASSERT_GE(below.depth.size(), 2u) << "the victim has started nothing";
    ::kill(target, SIGKILL);
    expect_nothing_left(below, root);
  }
  ::kill(root, SIGKILL);
  ASSERT_EQ(::waitpid(root, &status, 0), root);
  look();
  ASSERT_TRUE(started) << "its children never appeared; its output:\n" << read_file(log);
  expect_nothing_left(seen, 0);
}

// Polls until no live process is in `seen`'s groups or sessions, or below the test other than
// `spared` (a subreaper: orphans come to it); fails naming those left after kCleanupLimit.
void expect_nothing_left(const Seen& seen, pid_t spared) {
  int status = 0;

  // Reaps what comes to the test and lists what is still alive in its groups, its sessions or
  // below the test.
  const pid_t self = ::getpid();
  const auto survivors = [&] {
    // Zombies are judged dead; the test's own are reaped unless the spared process is one of them.
    while (spared == 0 && ::waitpid(-1, &status, WNOHANG) > 0) {
    }
    std::vector<Proc> left;
    for (const Proc& p : processes()) {
      if (p.state == 'Z' || p.pid == self || p.pid == spared) continue;
      if (p.ppid == self || seen.groups.contains(p.group) || seen.sessions.contains(p.session)) left.push_back(p);
    }
    return left;
  };
  const auto cleanup_until = SteadyClock::now() + kCleanupLimit;
  std::vector<Proc> left = survivors();
  while (!left.empty() && SteadyClock::now() < cleanup_until) {
    std::this_thread::sleep_for(10ms);
    left = survivors();
  }
  std::string report;
  for (const Proc& p : left) {
    report += "  pid " + std::to_string(p.pid) + " group " + std::to_string(p.group) + " session " +
              std::to_string(p.session) + " parent " + std::to_string(p.ppid) + ": " + command_line(p.pid) + "\n";
  }
  EXPECT_TRUE(left.empty()) << left.size() << " processes outlived the SIGKILLed dagsim by "
                            << std::chrono::duration_cast<std::chrono::seconds>(kCleanupLimit).count() << " s:\n"
                            << report;
  for (const Proc& p : left) {
    if (spared == 0) ::kill(p.pid, SIGKILL);
  }
  while (spared == 0 && ::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

TEST(SigkillCleanup, LaunchAgentWithWorkersThatIgnoreSigtermAndForkAChild) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "python3 is not installed";
  Scratch scratch;
  // Ignores SIGTERM and forks a child that sleeps (as a DataLoader's worker would), then says so.
  const fs::path worker = scratch.path / "worker.py";
  std::ofstream(worker) << "#!/usr/bin/python3\n"
                           "import os, signal, sys, time\n"
                           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "child = os.fork()\n"
                           "if child == 0:\n"
                           "    while True: time.sleep(60)\n"
                           "path = os.path.join(sys.argv[1], 'ready_' + os.environ['LOCAL_RANK'])\n"
                           "with open(path + '.tmp', 'w') as f: f.write(str(child))\n"
                           "os.rename(path + '.tmp', path)\n"
                           "while True: time.sleep(60)\n";
  fs::permissions(worker, fs::perms::owner_all);
  kill_and_check({"launch", "--standalone", "--nproc_per_node", "2", "--monitor_interval", "0.2", "--no_python",
                  worker.string(), scratch.path.string()},
                 scratch.path / "launch.log", [&](const Seen& seen) {
                   // The agent, a guard and a worker per rank, and each worker's child.
                   return fs::exists(scratch.path / "ready_0") && fs::exists(scratch.path / "ready_1") && seen.deepest() >= 3;
                 });
}

// A worker's children that leave its process group and session (issue 49): a child that calls
// setsid and starts one of its own (a daemonising helper, a DataLoader worker started by a
// program that detaches it), and a grandchild orphaned at once by a double fork, in a session of
// its own, whose parent is gone before the SIGKILL. Killing the worker's group reaches none of
// them and the parent-death signal covers only the worker: only the guard, their subreaper, that
// kills everything below it, does. The workers ignore SIGTERM, as in the test above.
TEST(SigkillCleanup, LaunchAgentWithWorkersWhoseChildrenCallSetsid) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "python3 is not installed";
  Scratch scratch;
  const fs::path worker = scratch.path / "worker.py";
  std::ofstream(worker) << "#!/usr/bin/python3\n"
                           "import os, signal, sys, time\n"
                           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "def sleep_forever():\n"
                           "    while True: time.sleep(60)\n"
                           // A child in a session of its own, with a child of its own in that session.
                           "if os.fork() == 0:\n"
                           "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                           "    os.setsid()\n"
                           "    if os.fork() == 0: sleep_forever()\n"
                           "    sleep_forever()\n"
                           // A double fork: the middle process leaves, the last is an orphan in a new session.
                           "middle = os.fork()\n"
                           "if middle == 0:\n"
                           "    os.setsid()\n"
                           "    if os.fork() == 0: sleep_forever()\n"
                           "    os._exit(0)\n"
                           "os.waitpid(middle, 0)\n"
                           "path = os.path.join(sys.argv[1], 'ready_' + os.environ['LOCAL_RANK'])\n"
                           "with open(path + '.tmp', 'w') as f: f.write('ready')\n"
                           "os.rename(path + '.tmp', path)\n"
                           "sleep_forever()\n";
  fs::permissions(worker, fs::perms::owner_all);
  kill_and_check({"launch", "--standalone", "--nproc_per_node", "2", "--monitor_interval", "0.2", "--no_python",
                  worker.string(), scratch.path.string()},
                 scratch.path / "launch.log", [&](const Seen& seen) {
                   // The agent, a guard per rank, its worker, the worker's setsid child and that
                   // child's own (depth 4), and the orphan, now the guard's (depth 2).
                   return fs::exists(scratch.path / "ready_0") && fs::exists(scratch.path / "ready_1") &&
                          seen.at_depth(4) >= 2 && seen.at_depth(2) >= 4;
                 });
}

// An example with a line of its own first (`before`) and blocks of its own last (`after`).
fs::path scenario(const fs::path& dir, const std::string& example, const std::string& before, const std::string& after,
                  const std::string& replace = "", const std::string& with = "") {
  std::string text = read_file(fs::path(DAGSIM_EXAMPLES) / example);
  if (!replace.empty()) text.replace(text.find(replace), replace.size(), with);
  const fs::path path = dir / fs::path(example).filename();
  std::ofstream(path) << before << "\n" << text << "\n" << after;
  return path;
}

// A node paused from the start: a stopped process reads nothing, so it cannot notice that its
// launcher is gone (its control link closed) and leave by itself; only a SIGKILL ends it.
constexpr const char* kPausedWorker1 = "[[faults]]\nat_ms = 0\nkind = \"pause\"\nnode = \"worker1\"\nresume_at_ms = 30000\n";

TEST(SigkillCleanup, RunOverTcpWithAPausedNode) {
  Scratch scratch;
  // Four node processes for a minute of heartbeats, one of them stopped: killed long before they end.
  const fs::path file = scenario(scratch.path, "heartbeat_basic.toml", "", kPausedWorker1);
  kill_and_check({"run", file.string(), "--transport", "tcp", "--records", (scratch.path / "records").string()},
                 scratch.path / "run.log", [](const Seen& seen) { return seen.at_depth(2) >= 4 && seen.at_depth(2, 'T') >= 1; });
}

TEST(SigkillCleanup, CheckWithTwoJobs) {
  Scratch scratch;
  // Seeds of a very long simulated run (minutes each, far past the cleanup limit), which do not
  // watch their parent: only the guards end them.
  const fs::path file = scenario(scratch.path, "heartbeat_basic.toml", "max_virtual_time_ms = 1000000000",
                                 "", "duration_ms = 60000", "duration_ms = 900000000");
  kill_and_check({"check", file.string(), "--seeds", "1..1000", "--jobs", "2"}, scratch.path / "check.log",
                 [](const Seen& seen) { return seen.at_depth(2) >= 2; });
}

TEST(SigkillCleanup, RunOverTcpWhoseStoreNodeHostsEtcd) {
  if (::access("/usr/bin/etcd", X_OK) != 0) GTEST_SKIP() << "/usr/bin/etcd is not installed (Debian's etcd-server: scripts/deps.sh test)";
  Scratch scratch;
  // The launcher, a guard per node, the nodes, the store node's guard for etcd, etcd. The node that
  // hosts etcd is SIGKILLed first (etcd does not watch its parent), then the launcher.
  kill_and_check({"run", std::string(DAGSIM_EXAMPLES) + "/tcp/rendezvous_etcd_formation.toml", "--transport", "tcp",
                  "--records", (scratch.path / "records").string()},
                 scratch.path / "etcd.log", [](const Seen& seen) { return seen.deepest() >= 4; },
                 [](const Seen& seen) {
                   // The node (depth 2) above the deepest process (etcd, depth 4).
                   const std::vector<Proc> all = processes();
                   for (const auto& [pid, level] : seen.depth) {
                     if (level != 2) continue;
                     for (const auto& [below, d] : descendants(all, pid)) {
                       if (d == 2) return pid;
                     }
                   }
                   return pid_t{0};
                 });
}

// The launcher alone SIGKILLed while a node runs etcd (issue 49): etcd and its guard are in a
// session of their own below the node, which neither the node's group nor its parent-death signal
// reaches; the node's guard (their subreaper once the node is gone) and etcd's own guard must.
TEST(SigkillCleanup, RunOverTcpWhoseLauncherIsKilledWhileANodeHostsEtcd) {
  if (::access("/usr/bin/etcd", X_OK) != 0) GTEST_SKIP() << "/usr/bin/etcd is not installed (Debian's etcd-server: scripts/deps.sh test)";
  Scratch scratch;
  kill_and_check({"run", std::string(DAGSIM_EXAMPLES) + "/tcp/rendezvous_etcd_formation.toml", "--transport", "tcp",
                  "--records", (scratch.path / "records").string()},
                 scratch.path / "etcd.log", [](const Seen& seen) { return seen.deepest() >= 4; });
}

}  // namespace
}  // namespace dagsim
