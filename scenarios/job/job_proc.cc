// /proc scans and whole commands for a job run (job_proc.h).
#include "scenarios/job/job_proc.h"

#include <csignal>
#include <cstring>
#include <dirent.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "core/base/printable.h"

namespace dagsim::scenarios::job {

namespace {

std::string read_small(const std::string& path, size_t max = size_t{1} << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// pid's state letter and parent from /proc/PID/stat (the name may hold spaces and parentheses).
bool read_stat(pid_t pid, char& state, pid_t& ppid) {
  const std::string stat = read_small("/proc/" + std::to_string(pid) + "/stat", 4096);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 > stat.size()) return false;
  std::istringstream rest(stat.substr(close + 2));
  long parent = 0;
  rest >> state >> parent;
  ppid = static_cast<pid_t>(parent);
  return static_cast<bool>(rest);
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

}  // namespace

std::vector<MarkedProcess> marked_processes(const std::string& token) {
  std::vector<MarkedProcess> out;
  const std::string marker = std::string(kMarkerVariable) + "=" + token;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* e = ::readdir(proc)) {
    const std::optional<uint32_t> pid = number(e->d_name);
    if (!pid) continue;
    const std::string base = "/proc/" + std::string(e->d_name);
    const std::string env = read_small(base + "/environ");
    if (env.find(marker) == std::string::npos) continue;
    MarkedProcess p;
    p.pid = static_cast<pid_t>(*pid);
    char state = '?';
    if (!read_stat(p.pid, state, p.ppid) || state == 'Z' || state == 'X') continue;
    bool marked = false;
    for (size_t begin = 0; begin < env.size();) {
      size_t end = env.find('\0', begin);
      if (end == std::string::npos) end = env.size();
      const std::string_view var(env.data() + begin, end - begin);
      if (var == marker) marked = true;
      if (var.starts_with("LOCAL_RANK=")) p.local_rank = number(std::string(var.substr(11)));
      if (var.starts_with("RANK=")) p.rank = number(std::string(var.substr(5)));
      begin = end + 1;
    }
    if (!marked) continue;
    std::string cmd = read_small(base + "/cmdline", 4096);
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    p.cmdline = printable(cmd, 1000);
    out.push_back(std::move(p));
  }
  ::closedir(proc);
  return out;
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
