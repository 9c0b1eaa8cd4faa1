// A job run's network namespaces (job_netns.h).
#include "scenarios/job/job_netns.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/base/error.h"
#include "net/process/process.h"
#include "scenarios/job/job_proc.h"

namespace dagsim::scenarios::job {

namespace {

std::string ip_program() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string scratch_file() {
  return (std::filesystem::temp_directory_path() / ("dagsim-netns-" + std::to_string(::getpid()) + ".out")).string();
}

// `ip ARGS`' output ("" when it fails).
std::string ip_output(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {ip_program()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, net::current_environment(), "", scratch_file(), std::chrono::seconds(10)).output;
}

bool pid_dead(const std::string& digits) {
  if (digits.empty() || digits.size() > 9) return false;
  const long pid = std::stol(digits);
  return pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// What runs whose pid is dead left behind (a SIGKILL gives no chance to unwind): their
// namespaces dj<pid>n<i>, links dj<pid>h<i> and dj<pid>br, and /etc/netns/dj<pid>n<i>.
void sweep_stale() {
  static const std::regex ns_name("^(dj([0-9]+)n[0-9]+)\\b");
  static const std::regex link_name("^[0-9]+: (dj([0-9]+)(h[0-9]+|br))[@:]");
  std::istringstream nss(ip_output({"netns", "list"}));
  for (std::string line; std::getline(nss, line);) {
    std::smatch m;
    if (std::regex_search(line, m, ns_name) && pid_dead(m[2].str())) ip_output({"netns", "del", m[1].str()});
  }
  std::istringstream links(ip_output({"-o", "link", "show"}));
  for (std::string line; std::getline(links, line);) {
    std::smatch m;
    if (std::regex_search(line, m, link_name) && pid_dead(m[2].str())) ip_output({"link", "del", m[1].str()});
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/etc/netns", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    std::smatch m;
    const std::string name = it->path().filename().string();
    static const std::regex dir_name("^dj([0-9]+)n[0-9]+$");
    if (std::regex_match(name, m, dir_name) && pid_dead(m[1].str())) {
      std::error_code ignored;
      std::filesystem::remove_all(it->path(), ignored);
    }
  }
}

// The host-wide lock around choosing a /24 and making it (flock: released when the process dies).
class HostLock {
 public:
  HostLock() {
    for (const char* path : {"/run/dagsim-netns.lock", "/tmp/dagsim-netns.lock"}) {
      fd_ = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (fd_ >= 0) break;
    }
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~HostLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::unique_ptr<Netns> Netns::create(uint32_t agents) {
  if (::geteuid() != 0) {
    throw errors::invalid_argument("namespaces = true needs root (network namespaces and veth links): run as root, or drop the "
                                   "partition faults and namespaces");
  }
  if (ip_program().empty()) {
    throw errors::invalid_argument("namespaces = true needs iproute2's `ip` (not found in /usr/sbin, /sbin, /usr/bin, /bin)");
  }
  std::unique_ptr<Netns> n(new Netns());
  n->agents_ = agents;
  n->tag_ = "dj" + std::to_string(::getpid());  // at most 7 digits: "dj4194304h99" fits IFNAMSIZ
  const HostLock lock;
  sweep_stale();
  // A /24 no interface or route of this machine uses.
  const CommandResult used = run_command({ip_program(), "-o", "addr", "show"}, net::current_environment(), "", scratch_file(),
                                         std::chrono::seconds(10));
  const CommandResult routes = run_command({ip_program(), "route", "show", "table", "all"}, net::current_environment(), "",
                                           scratch_file(), std::chrono::seconds(10));
  for (int third = 10; third < 250; ++third) {
    const std::string prefix = "10.249." + std::to_string(third) + ".";
    if (used.output.find(prefix) == std::string::npos && routes.output.find(prefix) == std::string::npos) {
      n->prefix_ = prefix;
      break;
    }
  }
  n->bridge_addr_ = n->prefix_ + "254";
  try {
    if (n->prefix_.empty()) throw errors::invalid_argument("namespaces: no free 10.249.N.0/24 on this machine");
    const std::string br = n->tag_ + "br";
    n->ip({"link", "add", br, "type", "bridge"});
    n->bridge_made_ = true;
    n->ip({"addr", "add", n->bridge_addr_ + "/24", "dev", br});
    n->ip({"link", "set", br, "up"});
    for (uint32_t i = 0; i < agents; ++i) {
      const std::string ns = n->ns(i);
      const std::string host = n->tag_ + "h" + std::to_string(i);
      const std::string peer = n->tag_ + "p" + std::to_string(i);
      n->ip({"netns", "add", ns});
      n->made_ = i + 1;
      n->ip({"link", "add", host, "type", "veth", "peer", "name", peer});
      n->ip({"link", "set", peer, "netns", ns});
      n->ip({"link", "set", host, "master", br, "up"});
      n->ip({"-n", ns, "addr", "add", n->agent_address(i) + "/24", "dev", peer});
      n->ip({"-n", ns, "link", "set", peer, "up"});
      n->ip({"-n", ns, "link", "set", "lo", "up"});
    }
    n->write_hosts();
  } catch (...) {
    n->teardown();
    throw;
  }
  return n;
}

Netns::~Netns() { teardown(); }

void Netns::teardown() {
  for (uint32_t i = 0; i < made_; ++i) {
    ip({"netns", "del", ns(i)}, false);  // takes its veth pair with it
    ip({"link", "del", tag_ + "h" + std::to_string(i)}, false);
  }
  for (uint32_t i = 0; i < hosts_written_; ++i) {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path("/etc/netns") / ns(i), ignored);
  }
  hosts_written_ = 0;
  made_ = 0;
  if (bridge_made_) ip({"link", "del", tag_ + "br"}, false);
  bridge_made_ = false;
  if (etc_netns_made_) {
    std::error_code ignored;
    std::filesystem::remove(std::filesystem::path("/etc/netns"), ignored);  // only when empty
  }
  etc_netns_made_ = false;
  std::error_code ec;
  std::filesystem::remove(scratch_file(), ec);
}

std::string Netns::agent_address(uint32_t agent) const { return prefix_ + std::to_string(agent + 1); }
std::string Netns::ns(uint32_t agent) const { return tag_ + "n" + std::to_string(agent); }

// Each namespace is a host of its own to its processes: a hostname (a UTS namespace) and an
// /etc/hosts that names every agent's host and the store's. torchrun hands its workers the master
// agent's socket.getfqdn() as MASTER_ADDR; with one hostname for every namespace ("localhost")
// the workers of another namespace could never reach it, and no group formed across namespaces.
// `ip netns exec` bind-mounts /etc/netns/NS/hosts over /etc/hosts for what it runs.
void Netns::write_hosts() {
  if (!std::filesystem::exists("/etc/netns")) etc_netns_made_ = true;
  std::string hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost\n" + bridge_addr_ + "\t" + tag_ + "-store\n";
  for (uint32_t i = 0; i < agents_; ++i) hosts += agent_address(i) + "\t" + host_name(i) + "\n";
  for (uint32_t i = 0; i < agents_; ++i) {
    const std::filesystem::path dir = std::filesystem::path("/etc/netns") / ns(i);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    hosts_written_ = i + 1;
    std::ofstream out(dir / "hosts", std::ios::trunc);
    out << hosts;
    if (ec || !out.flush()) throw errors::invalid_argument("namespaces: cannot write " + (dir / "hosts").string());
  }
}

std::string Netns::host_name(uint32_t agent) const { return ns(agent); }

std::vector<std::string> Netns::wrap(uint32_t agent, const std::vector<std::string>& argv) const {
  // unshare and sh exec in place, as `ip netns exec` does: the agent keeps the pid it started with.
  std::vector<std::string> out = {ip_program(), "netns", "exec", ns(agent), "unshare", "--uts", "/bin/sh", "-c",
                                  "hostname \"$0\" && exec \"$@\"", host_name(agent)};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::string Netns::block(uint32_t from, uint32_t to) {
  if (!blocked_.add(from, to)) return "";
  const auto [code, output] = ip({"-n", ns(from), "route", "add", "blackhole", agent_address(to) + "/32"}, false);
  return code == 0 ? "" : output.substr(0, 400);
}

std::string Netns::unblock(uint32_t from, uint32_t to) {
  if (!blocked_.remove(from, to)) return "";
  const auto [code, output] = ip({"-n", ns(from), "route", "del", "blackhole", agent_address(to) + "/32"}, false);
  return code == 0 ? "" : output.substr(0, 400);
}

std::pair<int, std::string> Netns::ip(const std::vector<std::string>& args, bool check) const {
  std::vector<std::string> argv = {ip_program()};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult r = run_command(argv, net::current_environment(), "", scratch_file(), std::chrono::seconds(20));
  if (check && (r.exit_code != 0)) {
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw errors::invalid_argument("namespaces: `" + cmd + "` failed: " + r.output.substr(0, 400));
  }
  return {r.exit_code, r.output};
}

}  // namespace dagsim::scenarios::job
