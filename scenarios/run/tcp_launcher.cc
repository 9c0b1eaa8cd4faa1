// The TCP launcher (tcp_launcher.h): node processes, their control links, the fault timeline as
// signals and control messages, and the records they leave.
#include "scenarios/run/tcp_launcher.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/base/probe.h"
#include "net/credentials.h"
#include "net/crypto.h"
#include "net/run_identity.h"
#include "net/process/process.h"
#include "scenarios/run/control_link.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/run/fault_triggers.h"
#include "scenarios/run/node_life.h"
#include "scenarios/run/run_driver.h"
#include "scenarios/run/tcp_peers.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using nlohmann::json;
using runtime::FaultEvent;
using runtime::NodeState;
using runtime::TimePoint;
using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(30);
// Nodes on other hosts are started by hand: their operators get longer.
constexpr auto kRemoteStartTimeout = std::chrono::seconds(300);
constexpr auto kFinishGrace = std::chrono::seconds(10);
constexpr auto kExitGrace = std::chrono::seconds(5);
// How long the launcher still waits for the nodes after one failed to join.
constexpr auto kJoinGrace = std::chrono::seconds(10);
// Control connections still opening at once: more are closed as they come (an honest run needs
// one per node, and each opens within milliseconds).
constexpr size_t kMaxOpeningControl = 64;

// A listening process may hold as many descriptors as its hard limit allows (Debian's soft limit
// is 1,024): a control port under a flood then reaches EMFILE later, and recovers when it passes.
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// The records folder's parts the launcher itself makes (the nodes make the rest).
struct RunDir {
  std::string path;
  bool temporary = false;
  ~RunDir() {
    std::error_code ignored;
    if (temporary && !path.empty()) fs::remove_all(path, ignored);
  }
};

class TcpCluster final : public runtime::Cluster, public DrivenCluster {
 public:
  TcpCluster(const Scenario& scenario, const TcpRunOptions& options, const std::string& dir, const std::string& peers_file,
             std::map<std::string, std::string> child_env)
      : scenario_(scenario), options_(options), dir_(dir), peers_file_(peers_file), child_env_(std::move(child_env)),
        remote_(!options.peers_file.empty()), digest_(net::sha256_hex(net::bytes_of(options.scenario_text))),
        signals_(io_, SIGCHLD, SIGTERM, SIGINT), tick_(io_), join_timer_(io_) {
    // The scenario's nodes, each run by a `dagsim node` process that builds the workload's node
    // side itself (tcp_node.cc), on this host or another.
    nodes_.resize(scenario.cluster.nodes);
    for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) nodes_[i].name = scenario.cluster.node_name(i);
  }

  // Remote nodes: listens on the control port for them, each opening its link as itself (its
  // certificate, or the shared secret).
  uint16_t listen_for_nodes(uint64_t cluster_id, net::RunIdentity identity) {
    cluster_id_ = cluster_id;
    identity_ = std::move(identity);
    raise_open_file_limit();
    accept_retry_ = std::make_unique<asio::steady_timer>(io_);
    control_acceptor_ = std::make_unique<asio::ip::tcp::acceptor>(
        io_, asio::ip::tcp::endpoint(asio::ip::tcp::v4(), options_.control_port));
    ::fcntl(control_acceptor_->native_handle(), F_SETFD, FD_CLOEXEC);
    accept_node();
    return control_acceptor_->local_endpoint().port();
  }

  ~TcpCluster() override { kill_group(); }

  // A local run's credentials: one directory per node, by name, each handed only to its node.
  void set_credentials_dir(std::string dir) { credentials_dir_ = std::move(dir); }

  // Binds every node's listening socket (127.0.0.1, a port the OS picks), without listening yet: a
  // node's address refuses connections until its process starts (launch), and again from its death
  // until its restart (refuse), as a dead host's does. The port is bound by number, not by the
  // kernel's automatic choice, because Linux keeps an automatically chosen port only while the
  // socket listens: the port is found by a first socket and bound by number by the second (both
  // with SO_REUSEADDR, so the second may share it while the first still holds it).
  std::vector<uint16_t> bind_ports() {
    std::vector<uint16_t> ports;
    for (Node& n : nodes_) {
      const asio::ip::tcp::endpoint any(asio::ip::make_address("127.0.0.1"), 0);
      asio::ip::tcp::acceptor finder(io_, any.protocol());
      finder.set_option(asio::socket_base::reuse_address(true));
      finder.bind(any);
      n.port = finder.local_endpoint().port();
      bind_port(n);
      ports.push_back(n.port);
    }
    return ports;
  }

  // DrivenCluster (run_driver.h) -----------------------------------------------------------------
  void start_all(const std::vector<FaultSpec>& faults, FaultTriggers& triggers) override;
  WorkEnd run_work(std::optional<TimePoint> end_time, TimePoint max_time) override;
  void settle(runtime::Duration drain, TimePoint max_time) override;
  void stop_all() override;
  void gather(RunRecords& records) override;

  // runtime::Cluster ---------------------------------------------------------------------------
  size_t num_nodes() const override { return nodes_.size(); }
  const std::string& node_name(WorkerId node) const override { return nodes_.at(node).name; }
  NodeState state(WorkerId node) const override { return nodes_.at(node).state; }
  uint32_t incarnation(WorkerId node) const override { return nodes_.at(node).incarnation; }

  void start(WorkerId node) override {
    Node& n = nodes_.at(node);
    if (n.state != NodeState::not_started) return;
    record({FaultEvent::Kind::start, now(), node, 0, 0, {}});
    launch(node);
    DAGSIM_ASSERT(n.state == NodeState::up);
    DAGSIM_ASSERT(n.life == NodeLife::launched || n.life == NodeLife::hello);
  }
  void kill(WorkerId node) override { end(node, NodeState::killed, FaultEvent::Kind::kill); }
  void crash(WorkerId node) override { end(node, NodeState::crashed, FaultEvent::Kind::crash); }
  void restart(WorkerId node) override {
    Node& n = nodes_.at(node);
    if (n.pid > 0 && (n.state == NodeState::up || n.state == NodeState::paused)) kill(node);
    if (n.pid > 0) signal_process(n, SIGKILL);  // a crashed incarnation's process goes too
    DAGSIM_PROBE("launch.tcp_node_restarted");
    // The new incarnation is back when its process runs (says hello), not when it is forked: a
    // process takes a while to start, longer on a busy machine, and a judge that counted from
    // the fork would hold that against the node's peers (the simulator's restart is instant).
    launch(node, /*restart=*/true);
    // The restart is recorded when the new process says hello (or at its end).
    DAGSIM_ASSERT(restart_pending(n.life));
    DAGSIM_ASSERT(n.state == NodeState::up);
  }
  void pause(WorkerId node) override {
    Node& n = nodes_.at(node);
    if (n.state != NodeState::up) return;
    DAGSIM_ASSERT(n.life != NodeLife::unborn);  // up: launched at least once
    record({FaultEvent::Kind::pause, now(), node, 0, 0, {}});
    n.state = NodeState::paused;
    signal_process(n, SIGSTOP);
  }
  void resume(WorkerId node) override {
    Node& n = nodes_.at(node);
    if (n.state != NodeState::paused) return;
    DAGSIM_ASSERT(n.life != NodeLife::unborn);
    record({FaultEvent::Kind::resume, now(), node, 0, 0, {}});
    n.state = NodeState::up;
    signal_process(n, SIGCONT);
  }
  uint64_t partition(std::vector<std::pair<WorkerId, WorkerId>> blocked) override {
    const uint64_t id = ++last_partition_;
    record({FaultEvent::Kind::partition, now(), 0, 0, id, blocked});
    for (const auto& [from, to] : blocked) {
      if (blocked_[{from, to}]++ == 0) send_block(from, to, true);
    }
    partitions_[id] = std::move(blocked);
    return id;
  }
  void heal(uint64_t id) override {
    const auto it = partitions_.find(id);
    if (it == partitions_.end()) return;
    record({FaultEvent::Kind::heal, now(), 0, 0, id, {}});
    unblock(it->second);
    partitions_.erase(it);
  }
  void heal_all() override {
    record({FaultEvent::Kind::heal, now(), 0, 0, 0, {}});
    for (const auto& [id, pairs] : partitions_) unblock(pairs);
    partitions_.clear();
  }
  TimePoint now() const override {
    if (!started_) return TimePoint{};
    return TimePoint{std::chrono::duration_cast<runtime::Duration>(SteadyClock::now() - start_steady_)};
  }
  void at(TimePoint t, std::string what, std::function<void()> fn) override {
    pending_.push_back({t, std::move(what), std::move(fn)});
    if (started_) arm(pending_.back());
  }
  const std::vector<FaultEvent>& fault_history() const override { return history_; }

 private:
  struct Node {
    std::string name;
    NodeState state = NodeState::not_started;
    uint32_t incarnation = 0;
    int pid = -1;
    std::unique_ptr<asio::ip::tcp::acceptor> acceptor;  // none while the node is dead
    uint16_t port = 0;
    std::shared_ptr<ControlLink> link;
    // What the launcher heard from its process (node_life.h); changed only by set_life().
    NodeLife life = NodeLife::unborn;
    std::vector<uint32_t> incarnations;  // every incarnation that said hello
  };
  struct Pending {
    TimePoint t;
    std::string what;
    std::function<void()> fn;
  };

  void launch(WorkerId node, bool restart = false);
  // The one place a node's life changes: asserts the move (node_life.h).
  void set_life(Node& n, NodeLife to) { transition(n.life, to, NodeLifeFacts{n.state, n.link != nullptr, started_}); }
  void end(WorkerId node, NodeState state, FaultEvent::Kind kind);
  void on_message(WorkerId node, const ControlLink* link, const json& m);
  void on_child_exit(int pid, int status);
  void send_block(WorkerId from, WorkerId to, bool blocked) {
    Node& n = nodes_.at(from);
    if (n.link && n.state != NodeState::killed) n.link->send(control::Block{to, blocked});
  }
  void unblock(const std::vector<std::pair<WorkerId, WorkerId>>& pairs) {
    for (const auto& pair : pairs) {
      if (--blocked_[pair] == 0) send_block(pair.first, pair.second, false);
    }
  }
  void arm(Pending& p) {
    auto timer = std::make_shared<asio::steady_timer>(io_, start_steady_ + p.t.since_epoch);
    timer->async_wait([this, timer, fn = p.fn](const boost::system::error_code& ec) {
      if (!ec && !ending_) fn();
    });
  }
  void record(FaultEvent e) { history_.push_back(std::move(e)); }
  void record_restart(Node& n, WorkerId node) {
    if (!restart_pending(n.life)) return;
    set_life(n, NodeLife::launched);
    DAGSIM_ASSERT(!restart_pending(n.life));  // recorded once
    record({FaultEvent::Kind::restart, now(), node, 0, 0, {}});
  }
  // The node's address refuses connections from now on, as a dead host's does: the launcher
  // closes its copy of the listening socket, so the socket is gone once the dead process's copy
  // is (the kernel resets the connections queued on it and refuses new ones). A restart binds the
  // same port again (bind_port). Stopping the kept socket from listening instead (shutdown) is not
  // enough: the next process's accepted connections then die at once. Nodes on other hosts hold
  // their own sockets.
  void refuse(Node& n) { n.acceptor.reset(); }
  // A fresh listening socket's port for `n`, bound by number, not yet listening. When its last
  // socket may still be held by a process that is dying (a restart right after a kill), waits for
  // that process first.
  void bind_port(Node& n) {
    if (n.pid > 0) {
      processes_[n.pid].wait();
      processes_.erase(n.pid);
      pids_.erase(n.pid);
      n.pid = -1;
    }
    DAGSIM_ASSERT(n.port != 0);  // the port it had: a restart listens where its peers dial
    const asio::ip::tcp::endpoint at(asio::ip::make_address("127.0.0.1"), n.port);
    n.acceptor = std::make_unique<asio::ip::tcp::acceptor>(io_, at.protocol());
    n.acceptor->set_option(asio::socket_base::reuse_address(true));
    boost::system::error_code ec;
    n.acceptor->bind(at, ec);
    if (ec) throw errors::invalid_argument("cannot listen again on " + n.name + "'s port " + std::to_string(n.port) + ": " + ec.message());
    // Only this node's processes get it (as fd 3), not every child the launcher starts.
    ::fcntl(n.acceptor->native_handle(), F_SETFD, FD_CLOEXEC);
  }
  // To the node's process group, through its guard (net/process): SIGSTOP returns once stopped.
  void signal_process(const Node& n, int sig) {
    const auto it = processes_.find(n.pid);
    if (n.pid > 0 && it != processes_.end()) it->second.signal(sig);
  }
  // Every node process and all it started: SIGKILLed first, then reaped.
  void kill_group() {
    for (auto& [pid, process] : processes_) process.kill();
    for (auto& [pid, process] : processes_) process.wait();
    processes_.clear();
    for (Node& n : nodes_) n.pid = -1;
    DAGSIM_ASSERT(processes_.empty());
  }
  // A process of this node is running somewhere: a local child, or a remote node still connected.
  bool has_process(const Node& n) const { return remote_ ? n.link != nullptr && said_hello(n.life) : n.pid > 0; }
  bool work_done(std::optional<TimePoint> end_time) const {
    // A workload with an end time ends then, as in the simulator, whatever its fibers are doing.
    if (end_time) return now() >= *end_time;
    for (const Node& n : nodes_) {
      if (n.state != NodeState::up && n.state != NodeState::paused) continue;
      if (n.life != NodeLife::idle) return false;
    }
    return true;
  }
  // Runs the I/O loop until `done` holds or `deadline` passes; false on the deadline.
  bool run_until(const std::function<bool()>& done, SteadyClock::time_point deadline) {
    while (!done()) {
      if (SteadyClock::now() >= deadline) return false;
      io_.run_one_until(deadline);
      if (interrupted_ != 0) {
        kill_group();
        std::signal(interrupted_, SIG_DFL);
        ::raise(interrupted_);
      }
    }
    return true;
  }
  void watch_signals() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      if (sig == SIGCHLD) {
        for (auto& [pid, process] : processes_) {
          if (const std::optional<net::ProcessExit> exit = process.poll()) exited_.push_back({pid, exit->status});
        }
        for (const auto& [pid, status] : exited_) on_child_exit(pid, status);
        exited_.clear();
      } else {
        interrupted_ = sig;
      }
      watch_signals();
    });
  }

  void accept_node();
  // The run's setup, a node's first message: what to run, its digest and the seed.
  void send_setup(ControlLink& link) {
    link.send(control::Setup{options_.scenario_text, digest_, options_.seed, scenario_.file, run_id_});
  }
  // A node that tried to join and could not: said at once, and the run ends kJoinGrace later unless
  // every node has joined by then (its operator may start it again, right). A node that refused
  // the run (another scenario, another seed) ends it at once.
  void join_refused(const std::string& why, bool fatal = false) {
    std::fprintf(stderr, "dagsim run: %s\n", why.c_str());
    if (started_) return;
    join_errors_.push_back(why);
    join_fatal_ = join_fatal_ || fatal;
    if (!join_deadline_) join_deadline_ = SteadyClock::now() + kJoinGrace;
    // Only wakes the run loop, which then looks at the deadline.
    join_timer_.expires_at(join_fatal_ ? SteadyClock::now() : *join_deadline_);
    join_timer_.async_wait([](const boost::system::error_code&) {});
  }
  // A node on another host whose control link closed: its process is gone (it died, was killed, or
  // exited), judged as a local child's death is (on_child_exit); nodes it was talking to learn
  // through their connections as usual.
  void on_link_closed(WorkerId node, const ControlLink* link, const std::string& why) {
    Node& n = nodes_.at(node);
    if (link != n.link.get() || ending_) return;
    n.link = nullptr;
    if (!said_hello(n.life)) return join_refused(n.name + " closed its control link before it was ready (" + why +
                                           "; its log is on its host)");
    // Killed on purpose, or crashed (silent, its process the launcher's to end): nothing new.
    if (n.state != NodeState::up && n.state != NodeState::paused) return;
    DAGSIM_PROBE("launch.tcp_remote_node_link_closed");
    failures_.push_back({now(), n.name + "." + std::to_string(n.incarnation), "process",
                         "the node process on another host died or exited: its control link closed (" + why +
                             "; its log is on its host: logs/" + n.name + "." + std::to_string(n.incarnation) + ".log)"});
    n.state = NodeState::killed;
  }

  const Scenario& scenario_;
  const TcpRunOptions& options_;
  std::string dir_, peers_file_;
  std::map<std::string, std::string> child_env_;
  bool remote_ = false;
  std::string digest_;  // the scenario's SHA-256
  uint64_t cluster_id_ = 0;
  net::RunIdentity identity_;  // the launcher's, for its control port
  std::string credentials_dir_;
  size_t opening_control_ = 0;  // control connections not yet opened
  std::unique_ptr<asio::steady_timer> accept_retry_;  // made with the control port
  // Refusals of connections nobody vouched for: at most one line a second, with how many more.
  void log_unauthenticated(const std::string& line) {
    const auto now = SteadyClock::now();
    if (now < quiet_until_) {
      ++unlogged_;
      return;
    }
    std::string more = unlogged_ > 0 ? " (and " + std::to_string(unlogged_) + " more refusals since the last line)" : "";
    std::fprintf(stderr, "dagsim run: %s%s\n", printable(line, 400).c_str(), more.c_str());
    unlogged_ = 0;
    quiet_until_ = now + std::chrono::seconds(1);
  }
  SteadyClock::time_point quiet_until_{};
  uint64_t unlogged_ = 0;
  asio::io_context io_;
  // After io_: an acceptor's destructor uses its io_context's services (the sanitizer tier caught
  // the reverse order as a use after free).
  std::unique_ptr<asio::ip::tcp::acceptor> control_acceptor_;
  asio::signal_set signals_;
  asio::steady_timer tick_;
  asio::steady_timer join_timer_;
  std::vector<std::string> join_errors_;
  std::optional<SteadyClock::time_point> join_deadline_;
  bool join_fatal_ = false;
  std::vector<Node> nodes_;
  std::map<int, WorkerId> pids_;
  std::map<int, net::Process> processes_;  // each local node process by pid, until reaped
  std::vector<std::pair<int, int>> exited_;
  int interrupted_ = 0;
  bool started_ = false;
  bool ending_ = false;
  SteadyClock::time_point start_steady_;
  int64_t start_wall_ns_ = 0;
  std::vector<Pending> pending_;
  std::vector<FaultEvent> history_;
  FaultTriggers* triggers_ = nullptr;  // the run's faults that strike on workload events (the driver's)
  std::function<void()> progress_;     // the progress tick, re-armed every 100 ms
  // This run's name for its nodes: incarnations count within it (next_incarnation), so a node
  // started by hand with a records folder of an earlier run begins at 0 again.
  const std::string run_id_ = net::hex_of(net::random_bytes(8));
  std::vector<FiberFailureRecord> failures_;
  std::map<std::pair<WorkerId, WorkerId>, int> blocked_;
  std::map<uint64_t, std::vector<std::pair<WorkerId, WorkerId>>> partitions_;
  uint64_t last_partition_ = 0;
  // Each incarnation's latest transport figures (a killed one's as of its last report).
  std::map<std::pair<WorkerId, uint32_t>, control::NodeStats> stats_of_;
  // Each incarnation's probes as its last record carried them (kNodeProbesKey).
  std::map<std::pair<WorkerId, uint32_t>, nlohmann::json> probes_of_;
};

void TcpCluster::launch(WorkerId node, bool restart) {
  Node& n = nodes_.at(node);
  // A new incarnation: up, and nothing heard from it yet. A restart is recorded when the process
  // says hello (or when it ends before that).
  n.state = NodeState::up;
  set_life(n, restart ? NodeLife::relaunched : NodeLife::launched);
  if (remote_) return;  // started by its host's operator; it connects to the control port itself
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    throw errors::invalid_argument("cannot make a control socket for " + n.name + ": " + std::strerror(errno));
  }
  if (!n.acceptor) bind_port(n);  // after a death: the same port, a fresh socket
  DAGSIM_ASSERT(n.acceptor != nullptr);
  DAGSIM_ASSERT(n.pid <= 0 || !pids_.contains(n.pid) || pids_.at(n.pid) == node);
  const int listen_fd = n.acceptor->native_handle();
  // Reachable from now on.
  if (::listen(listen_fd, SOMAXCONN) != 0) {
    throw errors::invalid_argument("cannot listen on " + n.name + "'s port: " + std::strerror(errno));
  }
  // No scenario file and no seed: both come over the control link (send_setup).
  std::vector<std::string> args = {options_.dagsim_binary, "node", "--name", n.name, "--peers", peers_file_,
                                   "--records", dir_, "--listen-fd", "3", "--control-fd", "4"};
  if (options_.trusted_network) args.push_back("--trusted-network");
  if (options_.gpus != "sim") {
    args.push_back("--gpus");
    args.push_back(options_.gpus);
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    if (!child_env_.contains(key)) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : child_env_) env_strings.push_back(k + "=" + v);
  // Each node holds only its own credential; the operator's, if any, is not passed on.
  std::erase_if(env_strings, [](const std::string& e) { return e.starts_with(std::string(net::kCredentialsVariable) + "="); });
  if (!credentials_dir_.empty()) {
    env_strings.push_back(std::string(net::kCredentialsVariable) + "=" + (fs::path(credentials_dir_) / n.name).string());
  }
  // Its own process group, dead with the launcher however it dies, and so is all it starts
  // (net/process); fd 3 is its listening socket, fd 4 its end of the control link.
  net::ProcessSpec spec;
  spec.argv = std::move(args);
  spec.env = std::move(env_strings);
  spec.fds = {{0, 0}, {1, 1}, {2, 2}, {3, listen_fd}, {4, pair[1]}};
  spec.name = "the process for " + n.name;
  net::Process process;
  try {
    process = net::spawn(spec);
  } catch (const Error&) {
    ::close(pair[0]);
    ::close(pair[1]);
    throw;
  }
  const int pid = process.pid();
  DAGSIM_ASSERT(pid > 0);
  DAGSIM_ASSERT(!processes_.contains(pid));  // a pid the launcher still holds is never reused
  processes_[pid] = std::move(process);
  ::close(pair[1]);
  n.pid = pid;
  pids_[pid] = node;
  n.link = std::make_shared<ControlLink>(io_, pair[0], AF_UNIX, std::nullopt);
  // The callbacks live in the link: a shared_ptr to it there would keep it alive for ever.
  const ControlLink* link = n.link.get();
  n.link->start([this, node, link](const json& m) { on_message(node, link, m); }, [](const std::string&) {});
  send_setup(*n.link);
  if (options_.on_process) options_.on_process(n.name, pid);
}

void TcpCluster::end(WorkerId node, NodeState state, FaultEvent::Kind kind) {
  Node& n = nodes_.at(node);
  if (n.state != NodeState::up && n.state != NodeState::paused) return;
  DAGSIM_ASSERT(n.life != NodeLife::unborn);  // up or paused: launched
  if (restart_pending(n.life)) DAGSIM_PROBE("launch.tcp_node_died_before_hello");
  record_restart(n, node);  // an incarnation that ends before it said hello still began
  DAGSIM_ASSERT(!restart_pending(n.life));
  record({kind, now(), node, 0, 0, {}});
  n.state = state;
  if (kind == FaultEvent::Kind::kill) {
    if (remote_ && n.link) n.link->send(control::Kill{});
    signal_process(n, SIGKILL);
    refuse(n);
  } else {
    // A crashed host is silent, not gone: its address keeps accepting (and its process holds
    // every byte), so peers learn through their timeouts, as in the simulator.
    if (n.link) n.link->send(control::Crash{});
    signal_process(n, SIGCONT);  // a paused host that crashes is silent, not stopped
  }
}

void TcpCluster::on_message(WorkerId node, const ControlLink* link, const json& m) {
  Node& n = nodes_.at(node);
  if (link != n.link.get()) return;  // an earlier incarnation's last words
  control::Event event;
  try {
    event = control::decode_event(m);
  } catch (const Error& e) {
    // A node that speaks out of protocol is a broken node: its run fails, naming it.
    failures_.push_back({now(), n.name + "." + std::to_string(n.incarnation), "control", e.what()});
    n.link->close();
    return;
  }
  std::visit(
      control::Overloaded{
          [&](const control::Hello& hello) {
            if (said_hello(n.life)) DAGSIM_PROBE("launch.tcp_node_said_hello_again");
            record_restart(n, node);
            set_life(n, NodeLife::hello);
            n.incarnation = hello.incarnation;
            n.incarnations.push_back(n.incarnation);
            if (started_) {
              n.link->send(control::Start{start_wall_ns_});
              set_life(n, NodeLife::started);
              for (const auto& [pair, count] : blocked_) {
                if (count > 0 && pair.first == node) send_block(pair.first, pair.second, true);
              }
            }
          },
          [&](const control::Refused& refused) { join_refused(n.name + " refused to run: " + refused.why, true); },
          [&](const control::Stats& stats) { stats_of_[{node, n.incarnation}] = stats.stats; },
          [&](const control::Record& r) {
            nlohmann::json data = r.data;
            if (data.is_object() && data.contains(kNodeProbesKey)) {
              probes_of_[{node, n.incarnation}] = data.at(kNodeProbesKey);
              data.erase(kNodeProbesKey);
            }
            write_node_record(dir_, n.name, NodeRecord{node, n.incarnation, std::move(data)});
          },
          // A report out of order (before the node was told to start, or after its final figures)
          // comes off the wire: ignored, never asserted on.
          [&](const control::Busy&) {
            if (report_allowed(n.life)) return set_life(n, NodeLife::busy);
            DAGSIM_PROBE("launch.tcp_node_busy_out_of_order_ignored");
          },
          [&](const control::Idle&) {
            if (report_allowed(n.life)) return set_life(n, NodeLife::idle);
            DAGSIM_PROBE("launch.tcp_node_idle_out_of_order_ignored");
          },
          [&](const control::Failure& f) {
            failures_.push_back({TimePoint{runtime::Duration{f.time_ns}}, n.name + "." + std::to_string(n.incarnation), f.fiber, f.what});
          },
          [&](const control::ConnectionFailed& c) {
            const int64_t t = std::max<int64_t>(0, c.time_ns - start_wall_ns_);
            if (c.peer < nodes_.size()) {
              record({FaultEvent::Kind::connection_failed, TimePoint{runtime::Duration{t}}, node, static_cast<WorkerId>(c.peer), 0, {}});
            }
          },
          [&](const control::WorkloadReport& w) {
            // A workload event a fault may wait for (fault_triggers.h). Only a running
            // incarnation's count. The node waits for the answer, sent once every fault due at
            // once has struck.
            const std::optional<WorkloadEvent> what = parse_workload_event(w.what);
            if (triggers_ && started_ && what && (n.state == NodeState::up || n.state == NodeState::paused)) {
              for (FaultTriggers::Strike& strike : triggers_->observe(*this, node, *what, w.value)) strike.fn();
            }
            if (n.link.get() == link && w.id) n.link->send(control::Struck{*w.id, what && triggers_ && triggers_->wants(*what)});
          },
          [&](const control::Finished& f) {
            if (finish_allowed(n.life)) set_life(n, NodeLife::finished);
            stats_of_[{node, n.incarnation}] = f.stats;
          }},
      event);
}

void TcpCluster::on_child_exit(int pid, int status) {
  const auto it = pids_.find(pid);
  if (it == pids_.end()) return;
  const WorkerId node = it->second;
  pids_.erase(it);
  processes_.erase(pid);  // reaped
  DAGSIM_ASSERT(!pids_.contains(pid));
  Node& n = nodes_.at(node);
  if (n.pid != pid) return;  // an earlier incarnation, killed on purpose
  n.pid = -1;
  if (!ending_) refuse(n);  // whatever ended it, nothing listens at its address now
  if (ending_ && WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (n.state == NodeState::killed) return;
  // A process that died on its own: a failure of the run (an assert, a crash), never silent.
  DAGSIM_PROBE("launch.tcp_node_process_died_on_its_own");
  const std::string how = WIFEXITED(status) ? "exited with code " + std::to_string(WEXITSTATUS(status))
                                            : "was killed by signal " + std::to_string(WTERMSIG(status));
  failures_.push_back({now(), n.name + "." + std::to_string(n.incarnation), "process",
                       "the node process " + how + " (its log: " + dir_ + "/logs/" + n.name + "." +
                           std::to_string(n.incarnation) + ".log)"});
  if (n.state == NodeState::up || n.state == NodeState::paused) n.state = NodeState::killed;
}

// A remote node's control connection: the opening (TLS, or the shared secret's handshake; the
// launcher is worker `nodes`), then the link. The port is open to anyone, so nothing an
// unauthenticated connection does can end the run or stop the port: a connection that has not
// opened within 5 s is closed; at most kMaxOpeningControl open at once (more are closed at
// once); one that fails before its peer proved itself (a prober, garbage, a node with another CA
// or secret, whose own message is on its host) is logged, rate-limited; only a peer that proved it
// belongs to the run and was then refused (another cluster id, say) counts as a node that could
// not join. An accept error (EMFILE, ENFILE, ENOBUFS) is logged and accepting resumes 100 ms later.
void TcpCluster::accept_node() {
  control_acceptor_->async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !control_acceptor_->is_open()) return;
    if (ec) {
      log_unauthenticated("the control port could not accept a connection: " + ec.message() + " (accepting again in 100 ms)");
      accept_retry_->expires_after(std::chrono::milliseconds(100));
      accept_retry_->async_wait([this](const boost::system::error_code& e) {
        if (!e) accept_node();
      });
      return;
    }
    accept_node();
    boost::system::error_code ignored;
    const std::string from = socket.remote_endpoint(ignored).address().to_string();
    if (opening_control_ >= kMaxOpeningControl) {
      log_unauthenticated("closed a control connection from " + from + ": already " + std::to_string(opening_control_) +
                          " connections opening (the limit)");
      socket.close(ignored);
      return;
    }
    struct Pending {
      Pending(asio::ip::tcp::socket s, size_t& count) : socket(std::move(s)), timer(socket.get_executor()), count(count) {
        ++count;
      }
      ~Pending() { --count; }
      asio::ip::tcp::socket socket;
      asio::steady_timer timer;
      std::optional<net::Opening> opening;
      std::array<uint8_t, 16384> buffer{};
      size_t& count;
    };
    auto p = std::make_shared<Pending>(std::move(socket), opening_control_);
    std::vector<std::string> names;
    for (const Node& n : nodes_) names.push_back(n.name);
    p->opening.emplace(control_accept(cluster_id_, names, identity_.tls, identity_.secret));
    p->timer.expires_after(std::chrono::seconds(5));
    p->timer.async_wait([this, p, from](const boost::system::error_code& e) {
      if (e) return;
      log_unauthenticated("closed a control connection from " + from + ": it did not open within 5 s");
      p->socket.close();
    });
    // Each read re-arms the next through `step`; only a pending read holds it (the function holds
    // itself weakly: a strong self-reference was a cycle, leaked with every hand-started node).
    auto step = std::make_shared<std::function<void()>>();
    *step = [this, p, from, weak = std::weak_ptr<std::function<void()>>(step)] {
      const std::shared_ptr<std::function<void()>> step = weak.lock();
      if (!step) return;
      p->socket.async_read_some(asio::buffer(p->buffer), [this, p, from, step](const boost::system::error_code& e, size_t n) {
        if (e) {
          if (e != asio::error::operation_aborted) {
            p->timer.cancel();
            log_unauthenticated("a control connection from " + from + " closed before it opened (" + e.message() +
                                "): a node with another CA or secret? (its own message is on its host)");
          }
          return;
        }
        size_t used = 0;
        try {
          used = p->opening->feed({p->buffer.data(), n});
        } catch (const Error& error) {
          p->timer.cancel();
          log_unauthenticated("refused a control connection from " + from + ": " + error.detail());
          p->socket.close();
          return;
        }
        const std::vector<uint8_t> out = p->opening->take_output();
        boost::system::error_code ignored;
        if (!out.empty()) asio::write(p->socket, asio::buffer(out), ignored);
        if (p->opening->status() == net::Handshake::Status::refused) {
          p->timer.cancel();
          // Past TLS's certificate check the peer is a node of this run, misconfigured: its
          // refusal is the run's news. Before it, anyone's.
          const bool proven = p->opening->tls() != nullptr && p->opening->tls()->peer_authenticated();
          if (proven) {
            join_refused("refused a control connection from " + from + ": " + p->opening->error());
          } else {
            log_unauthenticated("refused a control connection from " + from + ": " + p->opening->error());
          }
          p->socket.close();
          return;
        }
        if (p->opening->status() == net::Handshake::Status::in_progress) return (*step)();
        p->timer.cancel();
        const WorkerId node = p->opening->peer().worker;
        const int family = p->socket.local_endpoint().protocol().family();
        auto link = std::make_shared<ControlLink>(io_, p->socket.release(), family, std::move(*p->opening));
        nodes_.at(node).link = link;
        // The node's first messages may have come in the same read as its response.
        const ControlLink* raw = link.get();  // not the shared_ptr: the callbacks live in the link
        const bool tls = identity_.tls != nullptr;  // TLS: they are inside the link's channel
        link->start([this, node, raw](const json& m) { on_message(node, raw, m); },
                    [this, node, raw](const std::string& why) { on_link_closed(node, raw, why); },
                    tls ? std::span<const uint8_t>() : std::span<const uint8_t>(p->buffer.data() + used, n - used));
        send_setup(*link);
      });
    };
    (*step)();
  });
}

void TcpCluster::start_all(const std::vector<FaultSpec>& faults, FaultTriggers& triggers) {
  DAGSIM_ASSERT(!started_);  // once per run
  DAGSIM_ASSERT(triggers_ == nullptr);
  watch_signals();
  for (WorkerId i = 0; i < nodes_.size(); ++i) start(i);
  const bool ready = run_until([this] {
    if (join_fatal_ || (join_deadline_ && SteadyClock::now() >= *join_deadline_)) return true;
    for (const Node& n : nodes_) {
      if (!said_hello(n.life)) return false;
    }
    return true;
  }, SteadyClock::now() + (remote_ ? kRemoteStartTimeout : kStartTimeout));
  std::string missing;
  for (const Node& n : nodes_) missing += said_hello(n.life) ? "" : " " + n.name;
  if (!missing.empty()) {
    std::string why;
    for (const std::string& e : join_errors_) why += "; " + e;
    throw errors::invalid_argument(std::string(!ready ? (remote_ ? "nodes did not connect to the control port within 300 s:"
                                                                 : "node processes did not start within 30 s:")
                                                      : "nodes could not join:") +
                                   missing + (why.empty() ? " (see their logs)" : why));
  }
  // The run begins: scenario time 0 for everyone, every fault armed from it.
  started_ = true;
  start_steady_ = SteadyClock::now();
  start_wall_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (FaultEvent& e : history_) e.time = TimePoint{};
  install_faults(*this, faults);  // at() arms each event from now on
  triggers_ = &triggers;
  for (Node& n : nodes_) {
    n.link->send(control::Start{start_wall_ns_});
    set_life(n, NodeLife::started);
  }
  progress_ = [this] {
    tick_.expires_after(std::chrono::milliseconds(100));
    tick_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      if (options_.progress) options_.progress(now());
      progress_();
    });
  };
  progress_();
}

DrivenCluster::WorkEnd TcpCluster::run_work(std::optional<TimePoint> end_time, TimePoint) {
  // max_virtual_time bounds the run's wall time: scenario time is wall time here.
  const bool done = run_until([&] { return work_done(end_time); }, start_steady_ + scenario_.max_virtual_time);
  WorkEnd end{done ? "finished" : "time_limit", {}};
  if (!done) {
    for (const Node& n : nodes_) {
      if ((n.state == NodeState::up || n.state == NodeState::paused) && n.life != NodeLife::idle) {
        end.stuck_report += "  node " + n.name + ": its foreground work had not ended at max_virtual_time\n";
      }
    }
  }
  return end;
}

void TcpCluster::settle(runtime::Duration drain, TimePoint) {
  // Every process still running settles (the node checks Workload::settled and its queues between
  // its fibers), takes its final snapshot and writes its record.
  ending_ = true;
  tick_.cancel();
  const auto drain_ms = std::chrono::duration_cast<std::chrono::milliseconds>(drain);
  for (Node& n : nodes_) {
    if (!has_process(n) || n.state == NodeState::killed) continue;
    signal_process(n, SIGCONT);  // a paused node still takes its final snapshot, as in the simulator
    n.link->send(control::Finish{drain_ms.count()});
  }
  run_until([this] {
    for (const Node& n : nodes_) {
      if (has_process(n) && n.state != NodeState::killed && n.life != NodeLife::finished) return false;
    }
    return true;
  }, SteadyClock::now() + drain_ms + kFinishGrace);
}

void TcpCluster::stop_all() {
  for (Node& n : nodes_) {
    if (has_process(n) && n.link) n.link->send(control::Exit{});
  }
  // Local processes are reaped; remote ones are gone once their links have written everything.
  run_until([this] {
    for (const Node& n : nodes_) {
      if (remote_ && n.link && !n.link->drained()) return false;
    }
    return pids_.empty();
  }, SteadyClock::now() + kExitGrace);
  kill_group();
}

void TcpCluster::gather(RunRecords& records) {
  for (const Node& n : nodes_) {
    records.node_names.push_back(n.name);
    records.final_states.push_back(n.state);
  }
  records.fault_history = history_;
  records.failures = failures_;
  records.nodes = read_node_records(dir_, records.node_names);
  // An incarnation killed before its first record was written observed nothing: an empty record,
  // as the simulator keeps one for every incarnation.
  for (WorkerId i = 0; i < nodes_.size(); ++i) {
    for (uint32_t inc : nodes_[i].incarnations) {
      const bool have = std::any_of(records.nodes.begin(), records.nodes.end(),
                                    [&](const NodeRecord& r) { return r.node == i && r.incarnation == inc; });
      if (!have) records.nodes.push_back(NodeRecord{i, inc, json::object()});
    }
  }
  // The run's probes: the launcher's own and every incarnation's, summed (a count that is not one
  // is left out).
  records.probes = probe::snapshot();
  for (const auto& [who, probes] : probes_of_) {
    if (!probes.is_object()) continue;
    for (const auto& [name, count] : probes.items()) {
      if (!count.is_number_unsigned() || name.empty() || name.size() > kMaxProbeNameBytes) continue;
      if (records.probes.size() >= kMaxRecordProbes && records.probes.count(name) == 0) continue;
      records.probes[name] += count.get<uint64_t>();
    }
  }
  for (const auto& [who, st] : stats_of_) {
    records.stats.messages += st.sent;
    records.stats.messages_delivered += st.delivered;
    records.stats.messages_dropped += st.dropped;
    records.stats.connection_failures += st.connection_failures;
  }
}

}  // namespace

RunRecords record_scenario_tcp(const Scenario& scenario, const TcpRunOptions& options) {
  probe::reset();  // the launcher's own probes count too (gather adds them to the nodes')
  RunDir dir;
  if (options.records_dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "dagsim-tcp-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw errors::invalid_argument("cannot make a temporary folder for the run");
    dir.path = pattern;
    dir.temporary = true;
  } else {
    dir.path = options.records_dir;
    std::error_code error;
    fs::create_directories(dir.path, error);
    if (error) throw errors::invalid_argument(dir.path + ": cannot create: " + error.message());
    // Incarnation counters, node records and logs of an earlier run in this folder would mix in.
    for (const char* sub : {"incarnations", "nodes", "logs"}) fs::remove_all(fs::path(dir.path) / sub, error);
  }
  const std::unique_ptr<Workload> workload = workload_type(scenario).make(scenario, options.seed);
  if (!options.peers_file.empty()) {
    // Nodes on other hosts: started there, connecting here. What only their host can do to them
    // (stop, continue, start again) is refused before anything runs.
    for (const FaultSpec& f : fault_timeline(scenario, options.seed, TimePoint{scenario.max_virtual_time})) {
      const bool host_only = f.kind == FaultSpec::Kind::restart || f.kind == FaultSpec::Kind::pause ||
                             f.kind == FaultSpec::Kind::resume ||
                             ((f.kind == FaultSpec::Kind::kill || f.kind == FaultSpec::Kind::crash) && f.until);
      if (host_only) {
        const bool stops = f.kind == FaultSpec::Kind::pause || f.kind == FaultSpec::Kind::resume;
        throw errors::invalid_argument(scenario.file + ":" + std::to_string(f.line) + ": a " + fault_kind_name(f.kind) +
                                       (stops ? " (stopping and continuing a process)" : " (a new incarnation's process)") +
                                       " needs the node's own host; with --peers, nodes on other hosts can be "
                                       "killed, crashed and partitioned only (run it locally for the rest)");
      }
    }
    const PeersFile peers = read_peers_file(options.peers_file, scenario);
    net::RunIdentity identity = net::identity_from_environment(net::kLauncherName);
    if (!identity.tls) std::fprintf(stderr, "%s\n", net::shared_secret_warning().c_str());
    TcpCluster cluster(scenario, options, dir.path, options.peers_file, {});
    const uint16_t port = cluster.listen_for_nodes(peers.cluster_id, std::move(identity));
    if (options.on_control_port) options.on_control_port(port);
    return drive_run(scenario, options.seed, "tcp", *workload, cluster);
  }
  std::map<std::string, std::string> child_env;
  // A local run's identities: unless the operator chose a shared secret, a CA of the run's own
  // (in a private temporary folder, gone with the run) and a certificate for each node, each
  // node process given only its own directory (TcpCluster::launch).
  RunDir credentials;
  const char* secret = std::getenv("DAGSIM_SECRET");
  const char* secret_file = std::getenv("DAGSIM_SECRET_FILE");
  const bool shared_secret = (secret != nullptr && *secret != '\0') || (secret_file != nullptr && *secret_file != '\0');
  if (shared_secret) {
    std::fprintf(stderr, "%s\n", net::shared_secret_warning().c_str());
  } else {
    std::string pattern = (fs::temp_directory_path() / "dagsim-credentials-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw errors::invalid_argument("cannot make a private folder for the run's credentials");
    credentials.path = pattern;
    credentials.temporary = true;
    net::CertificateAuthority ca = net::CertificateAuthority::create("dagsim run CA");
    for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
      const std::string name = scenario.cluster.node_name(i);
      ca.issue(name, 2).save((fs::path(credentials.path) / name).string());
    }
  }
  const std::string peers_path = (fs::path(dir.path) / "peers.json").string();
  TcpCluster cluster(scenario, options, dir.path, peers_path, child_env);
  if (!shared_secret) cluster.set_credentials_dir(credentials.path);
  const std::vector<uint16_t> ports = cluster.bind_ports();
  PeersFile peers;
  const std::vector<uint8_t> id = net::random_bytes(8);
  for (uint8_t b : id) peers.cluster_id = (peers.cluster_id << 8) | b;
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) peers.nodes.push_back({scenario.cluster.node_name(i), "127.0.0.1", ports[i]});
  write_peers_file(peers_path, peers);
  return drive_run(scenario, options.seed, "tcp", *workload, cluster);
}

}  // namespace dagsim::scenarios
