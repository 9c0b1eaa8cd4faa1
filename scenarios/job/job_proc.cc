// /proc scans and whole commands for a job run (job_proc.h).
#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_triggers.h"

#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/base/printable.h"

namespace dagsim::scenarios::job {

namespace {

// Up to `max` bytes of a /proc file (or a file the run wrote), read into a buffer that starts
// small and grows only as the file does.
std::string read_small(const std::string& path, size_t max = size_t{1} << 20) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return {};
  return read_fd(fd, max, 4096);
}

struct Stat {
  char state = '?';
  pid_t ppid = 0;
  uint64_t start_time = 0;
};

// pid's state letter, parent and start time from /proc/PID/stat (the name may hold spaces and
// parentheses). stat never waits on the process's memory map, as environ and cmdline may.
std::optional<Stat> read_stat(pid_t pid) {
  const std::string stat = read_small("/proc/" + std::to_string(pid) + "/stat", 4096);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 > stat.size()) return std::nullopt;
  std::istringstream rest(stat.substr(close + 2));
  Stat st;
  long parent = 0;
  rest >> st.state >> parent;
  // Fields 5 .. 21, then 22: starttime.
  std::string skip;
  for (int field = 5; field <= 21 && rest; ++field) rest >> skip;
  rest >> st.start_time;
  if (!rest) return std::nullopt;
  st.ppid = static_cast<pid_t>(parent);
  return st;
}

bool read_stat(pid_t pid, char& state, pid_t& ppid) {
  const std::optional<Stat> st = read_stat(pid);
  if (!st) return false;
  state = st->state;
  ppid = st->ppid;
  return true;
}

std::optional<uint32_t> number(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  return v;
}

// The process `pid` as a MarkedProcess when it is live and carries `marker`.
std::optional<MarkedProcess> marked(pid_t pid, const std::string& marker) {
  const std::string base = "/proc/" + std::to_string(pid);
  const std::string env = read_small(base + "/environ");
  if (env.find(marker) == std::string::npos) return std::nullopt;
  MarkedProcess p;
  p.pid = pid;
  char state = '?';
  if (!read_stat(p.pid, state, p.ppid) || state == 'Z' || state == 'X') return std::nullopt;
  bool found = false;
  for (size_t begin = 0; begin < env.size();) {
    size_t end = env.find('\0', begin);
    if (end == std::string::npos) end = env.size();
    const std::string_view var(env.data() + begin, end - begin);
    if (var == marker) found = true;
    if (var.starts_with("LOCAL_RANK=")) p.local_rank = number(std::string(var.substr(11)));
    if (var.starts_with("RANK=")) p.rank = number(std::string(var.substr(5)));
    begin = end + 1;
  }
  if (!found) return std::nullopt;
  std::string cmd = read_small(base + "/cmdline", 4096);
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  p.cmdline = printable(cmd, 1000);
  return p;
}

// /proc/PID/task/TID/children of every thread of pid; nullopt where the kernel has no such file
// (CONFIG_PROC_CHILDREN).
std::optional<std::vector<pid_t>> children_files(pid_t pid) {
  static const bool have = ::access("/proc/thread-self/children", F_OK) == 0;
  if (!have) return std::nullopt;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::vector<pid_t> out;
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    if (!number(e->d_name)) continue;
    std::istringstream in(read_small(tasks + "/" + e->d_name + "/children", size_t{1} << 20));
    for (long child = 0; in >> child;) out.push_back(static_cast<pid_t>(child));
  }
  ::closedir(dir);
  return out;
}

// Every live pid's parent, from /proc/PID/stat (the fallback where children files are missing).
std::map<pid_t, std::vector<pid_t>> children_by_parent() {
  std::map<pid_t, std::vector<pid_t>> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* e = ::readdir(proc)) {
    const std::optional<uint32_t> pid = number(e->d_name);
    if (!pid) continue;
    if (const std::optional<Stat> st = read_stat(static_cast<pid_t>(*pid))) out[st->ppid].push_back(static_cast<pid_t>(*pid));
  }
  ::closedir(proc);
  return out;
}

// roots and everything below them, each once, parents before children.
std::vector<pid_t> trees(const std::vector<pid_t>& roots) {
  std::vector<pid_t> out;
  std::set<pid_t> seen;
  std::optional<std::map<pid_t, std::vector<pid_t>>> by_parent;  // only if children files are missing
  for (pid_t r : roots) {
    if (r > 0 && seen.insert(r).second) out.push_back(r);
  }
  for (size_t i = 0; i < out.size() && out.size() < 100000; ++i) {
    std::optional<std::vector<pid_t>> children = children_files(out[i]);
    if (!children) {
      if (!by_parent) by_parent = children_by_parent();
      const auto it = by_parent->find(out[i]);
      children = it != by_parent->end() ? it->second : std::vector<pid_t>{};
    }
    for (pid_t c : *children) {
      if (c > 0 && seen.insert(c).second) out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::vector<MarkedProcess> marked_processes(const std::string& token) {
  std::vector<MarkedProcess> out;
  const std::string marker = std::string(kMarkerVariable) + "=" + token;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* e = ::readdir(proc)) {
    const std::optional<uint32_t> pid = number(e->d_name);
    if (!pid) continue;
    if (std::optional<MarkedProcess> p = marked(static_cast<pid_t>(*pid), marker)) out.push_back(std::move(*p));
  }
  ::closedir(proc);
  return out;
}

std::vector<MarkedProcess> marked_descendants(const std::vector<pid_t>& roots, const std::string& token) {
  std::vector<MarkedProcess> out;
  const std::string marker = std::string(kMarkerVariable) + "=" + token;
  for (pid_t pid : trees(roots)) {
    if (std::optional<MarkedProcess> p = marked(pid, marker)) out.push_back(std::move(*p));
  }
  return out;
}

std::vector<pid_t> descendants_of(pid_t pid) {
  std::vector<pid_t> all = trees({pid});
  if (!all.empty()) all.erase(all.begin());
  return all;
}

std::optional<uint64_t> start_time_of(pid_t pid) {
  const std::optional<Stat> st = read_stat(pid);
  if (!st || st->state == 'Z' || st->state == 'X') return std::nullopt;
  return st->start_time;
}

bool same_marked_process(pid_t pid, uint64_t start_time, const std::string& token) {
  if (pid <= 0 || start_time_of(pid) != start_time) return false;
  return marked(pid, std::string(kMarkerVariable) + "=" + token).has_value() && start_time_of(pid) == start_time;
}

bool port_free(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

uint16_t port_below_ephemeral_range() {
  long low = 32768;
  {
    std::istringstream in(read_small("/proc/sys/net/ipv4/ip_local_port_range", 256));
    long first = 0;
    if (in >> first && first > 0) low = first;
  }
  // Ports [floor, low): above the well-known and registered-service crowd where there is room.
  const long floor = low > 20000 ? 10000 : low > 2048 ? 1024 : 0;
  if (low - floor < 16) return 0;
  std::random_device device;
  std::mt19937 rng(device());
  std::uniform_int_distribution<long> pick(floor, low - 1);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<uint16_t>(pick(rng));
    if (port_free(port)) return port;
  }
  return 0;
}

pid_t parent_of(pid_t pid) {
  char state = '?';
  pid_t ppid = 0;
  return read_stat(pid, state, ppid) ? ppid : 0;
}

bool descends_from(pid_t pid, pid_t ancestor, const std::map<pid_t, pid_t>& parents) {
  for (int hops = 0; pid > 1 && hops < 64; ++hops) {
    if (pid == ancestor) return true;
    const auto it = parents.find(pid);
    pid = it != parents.end() ? it->second : parent_of(pid);
  }
  return false;
}

std::string random_token() {
  std::random_device device;
  std::ostringstream out;
  out << std::hex << device() << device() << device();
  return out.str();
}

void sleep_ms(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

void stop_process(net::Process& process, std::chrono::milliseconds grace) {
  if (!process.running() || process.poll()) return;
  process.signal(SIGCONT);  // a stopped program cannot act on SIGTERM
  process.signal(SIGTERM);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < until) {
    if (process.poll()) return;
    sleep_ms(20);
  }
  process.kill();
  process.wait();
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGSTOP: return "SIGSTOP";
    case SIGCONT: return "SIGCONT";
    default: return "signal " + std::to_string(sig);
  }
}

CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string& directory, const std::string& output_path,
                          std::chrono::milliseconds limit, size_t max_output) {
  std::error_code ec;
  std::filesystem::remove(output_path, ec);
  net::ProcessSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.directory = directory;
  spec.stdout_path = output_path;
  spec.stderr_path = output_path;
  spec.fds = {};
  net::Process process = net::spawn(spec);
  CommandResult result;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!process.poll()) {
    if (std::chrono::steady_clock::now() >= until) {
      result.timed_out = true;
      process.kill();
      process.wait();
      break;
    }
    sleep_ms(10);
  }
  const net::ProcessExit exit = *process.exit();
  result.exit_code = exit.exit_code();
  result.signal = exit.signal();
  result.output = read_small(output_path, max_output);
  return result;
}

}  // namespace dagsim::scenarios::job
