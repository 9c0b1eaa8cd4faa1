// The node process of a TCP run (tcp_node.h).
#include "scenarios/run/tcp_node.h"


#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>
#include <boost/fiber/operations.hpp>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <csignal>
#include <sys/socket.h>

#include "core/base/probe.h"
#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/fibers/node_fibers.h"
#include "core/runtime/event.h"
#include "core/runtime/fiber_context.h"
#include "net/crypto.h"
#include "net/etcd/etcd_process.h"
#include "net/etcd/etcd_store.h"
#include "net/io_scheduler.h"
#include "net/process_node.h"
#include "net/run_identity.h"
#include "net/real_clock.h"
#include "net/tcp_transport.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/control_link.h"
#include "scenarios/run/control_messages.h"
#include "scenarios/run/fault_triggers.h"
#include "scenarios/run/records.h"
#include "scenarios/run/tcp_peers.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using nlohmann::json;
using runtime::TimePoint;
using net::ProcessNode;

namespace {

constexpr auto kRecordFlushInterval = std::chrono::milliseconds(50);
constexpr auto kSettlePoll = std::chrono::milliseconds(1);
constexpr auto kConnectTimeout = std::chrono::seconds(60);
// What the launcher has to finish the control link's handshake once connected.
constexpr auto kControlHandshakeTimeout = std::chrono::seconds(10);
constexpr auto kSetupTimeout = std::chrono::seconds(30);
constexpr auto kStrikeWait = std::chrono::seconds(5);

// Log events to a file and stderr, one line each, stamped with wall time.
class FileLog final : public runtime::Log {
 public:
  FileLog(const std::string& path, std::string label) : out_(path, std::ios::app), label_(std::move(label)) {}
  void event(std::string_view kind, std::string_view detail) override {
    // Stamped with the host's wall time (ms since the epoch), so the logs of several nodes merge.
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::string line = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now).count() / 1000.0) +
                             " " + label_ + " " + std::string(kind) + ": " + std::string(detail);
    out_ << line << "\n" << std::flush;
    if (kind == "net.refused") std::cerr << "dagsim node: " << line << "\n";
  }

 private:
  std::ofstream out_;
  std::string label_;
};

uint32_t parse_uint32(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const unsigned long long v = std::stoull(text, &used);
    if (used == text.size() && v <= UINT32_MAX) return static_cast<uint32_t>(v);
  } catch (const std::exception&) {
  }
  throw errors::invalid_argument(what + ": not a number: " + text);
}

// The control loop's state: commands from the launcher, handled on the main context.
struct ControlState {
  boost::fibers::mutex mutex;
  boost::fibers::condition_variable cv;
  std::deque<control::Command> commands;
  bool link_closed = false;
  bool tick = false;

  void wake(std::function<void()> change) {
    std::unique_lock lock(mutex);
    change();
    cv.notify_all();
  }
};

// A node process under its NodeContext: the scenario's clock is wall time since the launcher's
// start, foreground work is counted so the launcher hears when the node is busy or idle, workload
// events a fault waits for go to the launcher over the control link, and the outside world is
// real (etcd).
class ProcessRuntime final : public NodeRuntime, public OutsideWorld {
 public:
  ProcessRuntime(ProcessNode& node, boost::asio::io_context& io, const std::vector<FaultSpec>& faults,
                 std::function<void(const control::Event&)> send)
      : node_(node), io_(io), triggers_(faults), send_(std::move(send)) {}

  TimePoint scenario_now() const override { return TimePoint{node_.env().clock.wall_now() - start_wall_}; }
  void spawn_foreground(WorkerId, std::string name, std::function<void()> fn) override {
    if (foreground_++ == 0) send_(control::Busy{});
    node_.fibers().spawn(nullptr, std::move(name), std::move(fn), [this] { end_foreground(); });
  }
  bool wants(WorkloadEvent event) const override { return !done_.contains(event) && triggers_.wants(event); }
  // The launcher strikes what the event triggers, then answers; the reporting fiber waits for that
  // answer, so the node goes on only once the fault has struck, as in the simulator, where the
  // fault strikes at the event's instant. Without an answer in kStrikeWait (a launcher gone), on.
  void report(WorkerId, WorkloadEvent event, uint64_t value) override {
    if (!wants(event)) return;
    if (runtime::current_fiber() == nullptr) {
      // Not on a node fiber (nothing to hold back): the fault strikes when the launcher hears it.
      send_(control::WorkloadReport{std::string(workload_event_name(event)), value, std::nullopt});
      return;
    }
    const uint64_t id = ++last_report_;
    auto answered = std::make_shared<runtime::Event>();
    reports_[id] = {event, answered};
    send_(control::WorkloadReport{std::string(workload_event_name(event)), value, id});
    answered->wait_until(node_.env().clock.now() + kStrikeWait);
    reports_.erase(id);
  }
  // The launcher's answer to report `id`; `more`: whether a fault still waits for its kind.
  void answer(uint64_t id, bool more) {
    const auto it = reports_.find(id);
    if (it == reports_.end()) return;
    if (!more) done_.insert(it->second.event);
    it->second.answered->set();
  }
  OutsideWorld* outside_world() override { return this; }

  // The etcd lives as long as this runtime, which is this incarnation's; the kernel kills it if the
  // node process dies first (EtcdProcess: PR_SET_PDEATHSIG). Starting it blocks this node's thread
  // until etcd answers (about a second): nothing else of the node runs meanwhile.
  std::string start_etcd() override {
    if (std::optional<std::string> why = net::etcd::EtcdProcess::unavailable()) throw errors::invalid_argument(*why);
    if (!etcd_) etcd_ = std::make_unique<net::etcd::EtcdProcess>();
    return etcd_->endpoint().host + ":" + std::to_string(etcd_->endpoint().port);
  }
  void kill_etcd() override {
    if (!etcd_) throw errors::invalid_argument("this node started no etcd to kill");
    etcd_->kill();
  }
  void restart_etcd() override {
    if (!etcd_) throw errors::invalid_argument("this node started no etcd to restart");
    etcd_->restart_keeping_data();
  }
  std::unique_ptr<store::Store> connect_etcd(const std::string& endpoint, const std::string& prefix) override {
    net::etcd::EtcdStoreOptions options;
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos) throw errors::invalid_argument("etcd endpoint " + endpoint + " is not host:port");
    options.endpoint.host = endpoint.substr(0, colon);
    const uint32_t port = parse_uint32(endpoint.substr(colon + 1), "etcd endpoint " + endpoint);
    if (port == 0 || port > 65535) throw errors::invalid_argument("etcd endpoint " + endpoint + ": no port");
    options.endpoint.port = static_cast<uint16_t>(port);
    options.prefix = prefix;
    return std::make_unique<net::etcd::EtcdStore>(io_, node_.env().clock, std::move(options));
  }

  // The run begins: the workload's main fiber starts, counted as foreground work while it runs.
  void start(TimePoint start_wall, NodeContext& context, Workload& workload) {
    start_wall_ = start_wall;
    spawn_foreground(context.index(), "main", [&context, &workload] { workload.node_main(context); });
  }
  TimePoint start_wall() const { return start_wall_; }

 private:
  void end_foreground() {
    DAGSIM_ASSERT(foreground_ > 0);
    if (--foreground_ == 0) send_(control::Idle{});
  }

  ProcessNode& node_;
  boost::asio::io_context& io_;
  FaultTriggers triggers_;  // which events a fault waits for (the launcher keeps the real ones)
  std::set<WorkloadEvent> done_;  // kinds the launcher said no fault waits for any more
  uint64_t last_report_ = 0;
  struct Report {
    WorkloadEvent event;
    std::shared_ptr<runtime::Event> answered;
  };
  std::map<uint64_t, Report> reports_;  // reports awaiting the launcher's answer
  std::function<void(const control::Event&)> send_;
  std::unique_ptr<net::etcd::EtcdProcess> etcd_;
  TimePoint start_wall_{};
  size_t foreground_ = 0;
};


// Opens the control link to a launcher on another host: connects (retrying while the launcher is
// not up yet, for kConnectTimeout), opens it as its own node (TLS with its certificate, or the
// shared secret), and hands the socket to a ControlLink with what the opening established.
std::shared_ptr<ControlLink> connect_to_launcher(asio::io_context& io, const std::string& address, uint64_t cluster_id,
                                                 const std::vector<std::string>& names, WorkerId self,
                                                 const net::RunIdentity& identity) {
  const HostPort launcher = parse_host_port(address, "--control");
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto endpoints = resolver.resolve(launcher.host, std::to_string(launcher.port), ec);
  if (ec) throw errors::invalid_argument("--control " + printable(address) + ": " + ec.message());
  asio::ip::tcp::socket socket(io);
  const auto started = std::chrono::steady_clock::now();
  const auto give_up = started + kConnectTimeout;
  auto next_word = started + std::chrono::milliseconds(500);
  for (;;) {
    asio::connect(socket, endpoints, ec);
    if (!ec) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= give_up) {
      throw errors::invalid_argument("--control " + printable(address) + ": cannot connect to the launcher: " + ec.message());
    }
    // An operator starting nodes by hand learns at once that this one waits, and why, and goes
    // on learning it: within a second, then every 5 s until it connects or gives up.
    if (now >= next_word) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - started).count();
      std::fprintf(stderr, "dagsim node: cannot reach the launcher at %s yet (%s); retrying (%llds of %llds)\n",
                   printable(address).c_str(), ec.message().c_str(), static_cast<long long>(waited),
                   static_cast<long long>(kConnectTimeout.count()));
      next_word = now + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // before the node's fibers exist
  }
  socket.set_option(asio::ip::tcp::no_delay(true));
  net::Opening handshake = control_dial(cluster_id, names, self, identity.tls, identity.secret);
  std::array<uint8_t, 16384> buffer{};
  // Something that accepts and never answers (not a launcher, or a stopped one) must not hold the
  // node for ever: each read waits at most until the handshake's deadline.
  const auto handshake_by = std::chrono::steady_clock::now() + kControlHandshakeTimeout;
  bool late = false;
  while (handshake.status() == net::Handshake::Status::in_progress) {
    const std::vector<uint8_t> out = handshake.take_output();
    if (!out.empty()) asio::write(socket, asio::buffer(out), ec);
    if (ec) break;
    int ready = -1;
    do {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(handshake_by - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ready = 0;
        break;
      }
      pollfd readable{socket.native_handle(), POLLIN, 0};
      ready = ::poll(&readable, 1, static_cast<int>(left.count()));
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) {
      late = true;
      break;
    }
    if (ready < 0) {
      ec = boost::system::error_code(errno, boost::system::system_category());
      break;
    }
    const size_t n = socket.read_some(asio::buffer(buffer), ec);
    if (ec) break;
    handshake.feed({buffer.data(), n});
  }
  if (late) {
    throw errors::invalid_argument("--control " + printable(address) + ": no handshake from the launcher within " +
                                   std::to_string(kControlHandshakeTimeout.count()) +
                                   " s (something accepted the connection and said nothing: is a dagsim launcher there?)");
  }
  if (handshake.status() != net::Handshake::Status::established) {
    throw errors::invalid_argument("--control " + address + ": the launcher refused or was refused: " +
                                   (ec ? ec.message() : handshake.error()));
  }
  const std::vector<uint8_t> out = handshake.take_output();  // the response
  asio::write(socket, asio::buffer(out), ec);
  if (ec) throw errors::invalid_argument("--control " + address + ": " + ec.message());
  const int family = socket.local_endpoint().protocol().family();
  return std::make_shared<ControlLink>(io, socket.release(), family, std::move(handshake));
}

}  // namespace

uint32_t next_incarnation(const std::string& records_dir, const std::string& node, const std::string& run) {
  if (run.empty() || run.size() > 64 || run.find_first_of(" \n") != std::string::npos) {
    throw errors::invalid_argument("the launcher named no run (or a malformed one) in its setup");
  }
  const fs::path dir = fs::path(records_dir) / "incarnations";
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw errors::invalid_argument(dir.string() + ": cannot create: " + error.message());
  const fs::path path = dir / node;
  uint32_t next = 0;
  if (fs::exists(path, error)) {
    // "RUN LAST": the last incarnation of this node in that run.
    std::ifstream in(path);
    std::string recorded_run, text;
    in >> recorded_run >> text;
    if (recorded_run == run) {
      const uint32_t last = parse_uint32(text, path.string());
      if (last == UINT32_MAX || last >= UINT16_MAX) throw errors::invalid_argument(path.string() + ": no incarnation numbers left");
      next = last + 1;
    }
  }
  // Persisted before the node talks to anyone: written to a temporary file, synced, renamed.
  const fs::path temporary = path.string() + ".tmp";
  {
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw errors::invalid_argument(temporary.string() + ": cannot write");
    const std::string text = run + " " + std::to_string(next) + "\n";
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!ok) throw errors::invalid_argument(temporary.string() + ": cannot write");
  }
  fs::rename(temporary, path, error);
  if (error) throw errors::invalid_argument(path.string() + ": cannot write: " + error.message());
  return next;
}

// The node's index in `scenario`, or an error naming the scenario.
uint32_t node_index(const Scenario& scenario, const std::string& name, const std::string& file) {
  for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
    if (scenario.cluster.node_name(i) == name) return i;
  }
  throw errors::invalid_argument("--name " + name + ": not a node of " + file);
}

int run_tcp_node(const TcpNodeOptions& options) {
  if ((options.control_fd < 0) == options.control_address.empty()) {
    throw errors::invalid_argument("dagsim node needs its launcher: --control HOST:PORT (or --control-fd from a local launcher); see docs/tcp.md");
  }
  // A node on another host proves the cluster's secret before it hears from the launcher, and the
  // handshake names the cluster's size and this node's index: it needs its own copy of the
  // scenario, which must then be the launcher's, byte for byte. A local node gets the launcher's.
  std::optional<std::string> own_text;
  std::optional<Scenario> own;
  if (!options.scenario_file.empty()) {
    own_text = read_scenario_text(options.scenario_file);
    own = parse_scenario(*own_text, options.scenario_file);
  } else if (options.control_fd < 0) {
    throw errors::invalid_argument("--control " + options.control_address +
                                   " needs --scenario FILE: this host's copy of the launcher's scenario");
  }
  const net::RunIdentity identity = net::identity_from_environment(options.node_name);

  net::IoScheduler& scheduler = net::IoScheduler::for_this_thread();
  asio::io_context& io = scheduler.io();
  net::RealClock clock(io);
  ControlState control;
  std::shared_ptr<ControlLink> link;
  if (options.control_fd >= 0) {
    link = std::make_shared<ControlLink>(io, options.control_fd, AF_UNIX, std::nullopt);
  } else {
    const PeersFile own_peers = read_peers_file(options.peers_file, *own);
    std::vector<std::string> names;
    for (const PeerAddress& p : own_peers.nodes) names.push_back(p.name);
    link = connect_to_launcher(io, options.control_address, own_peers.cluster_id, names,
                               static_cast<WorkerId>(node_index(*own, options.node_name, options.scenario_file)), identity);
    // Said once the node is in the run (a node refused earlier says only why).
    if (!identity.tls) std::fprintf(stderr, "%s\n", net::shared_secret_warning().c_str());
  }
  // A command that does not decode is a launcher out of protocol: the node stops listening to it,
  // as to a launcher gone (the link closed), and says why in its log.
  std::string protocol_error;
  link->start(
      [&](const json& message) {
        try {
          control::Command command = control::decode_command(message);
          control.wake([&] { control.commands.push_back(std::move(command)); });
        } catch (const Error& e) {
          control.wake([&] {
            protocol_error = e.what();
            control.link_closed = true;
          });
          link->close();
        }
      },
              [&](const std::string&) { control.wake([&] { control.link_closed = true; }); });

  // The launcher's first word: the scenario's bytes, their digest and the run's seed, so every node
  // runs exactly the launcher's run, whatever files lie on its host.
  net::wait_on_main(clock, [&] { return !control.commands.empty() || control.link_closed; }, clock.now() + kSetupTimeout);
  const control::Setup* first = control.commands.empty() ? nullptr : std::get_if<control::Setup>(&control.commands.front());
  if (first == nullptr) {
    if (!protocol_error.empty()) throw errors::protocol_error("the launcher's first message: " + protocol_error);
    throw errors::invalid_argument("the launcher sent no scenario within " + std::to_string(kSetupTimeout.count()) +
                                   " s of connecting (or closed the control link)");
  }
  const control::Setup setup = std::move(*first);
  control.commands.pop_front();
  const std::string& launcher_digest = setup.digest;
  const uint64_t seed = setup.seed;
  // A node's own copy or seed that is not the launcher's would run another scenario than the one
  // judged: refused, saying so to the launcher (which ends the run at once) and to the operator.
  std::string refusal;
  if (own_text && net::sha256_hex(net::bytes_of(*own_text)) != launcher_digest) {
    refusal = options.node_name + "'s scenario " + options.scenario_file + " (sha256 " +
              net::sha256_hex(net::bytes_of(*own_text)) + ") is not the launcher's (sha256 " + launcher_digest +
              "): copy the launcher's file to this host";
  } else if (options.seed && *options.seed != seed) {
    refusal = options.node_name + " was given --seed " + std::to_string(*options.seed) + " but the launcher runs seed " +
              std::to_string(seed) + " (a node takes the launcher's seed; leave --seed out)";
  }
  if (!refusal.empty()) {
    link->send(control::Refused{refusal});
    net::wait_on_main(clock, [&] { return link->drained() || control.link_closed; }, clock.now() + std::chrono::seconds(5));
    throw errors::invalid_argument(refusal);
  }
  const Scenario scenario =
      own ? std::move(*own) : parse_scenario(setup.scenario, setup.file.empty() ? std::string("scenario") : setup.file);
  // Numbered within the launcher's run, persisted before the node opens any connection to a peer.
  const uint32_t incarnation = next_incarnation(options.records_dir, options.node_name, setup.run);
  const std::string label = options.node_name + "." + std::to_string(incarnation);
  fs::create_directories(fs::path(options.records_dir) / "logs");
  FileLog log((fs::path(options.records_dir) / "logs" / (label + ".log")).string(), label);
  const uint32_t index = node_index(scenario, options.node_name, scenario.file);
  const PeersFile peers = read_peers_file(options.peers_file, scenario);

  asio::ip::tcp::acceptor acceptor(io);
  if (options.listen_fd >= 0) {
    acceptor.assign(asio::ip::tcp::v4(), options.listen_fd);
  } else {
    const PeerAddress& self = peers.nodes[index];
    try {
      acceptor = asio::ip::tcp::acceptor(io, asio::ip::tcp::endpoint(asio::ip::tcp::v4(), self.port));
    } catch (const boost::system::system_error& e) {
      throw errors::invalid_argument("--peers " + options.peers_file + ": cannot listen on port " + std::to_string(self.port) +
                                     " for " + options.node_name + ": " + e.code().message());
    }
  }
  net::TcpTransportOptions t;
  t.self = static_cast<WorkerId>(index);
  t.incarnation = incarnation;
  t.cluster_id = peers.cluster_id;
  for (const PeerAddress& p : peers.nodes) {
    t.names.push_back(p.name);
    t.peers.push_back({p.host, p.port});
  }
  t.tls = identity.tls;
  t.secret = identity.secret;
  t.trusted_network = options.trusted_network;
  t.connection_timeout = scenario.network.connection_timeout;
  t.handshake_timeout = std::min<runtime::Duration>(scenario.network.connection_timeout, std::chrono::seconds(2));
  t.shaping = scenario.network;
  t.seed = seed ^ (uint64_t{incarnation} << 32);
  t.log = [&log](const std::string& line) { log.event("net.refused", line); };
  bool finished = false;  // after its final snapshot, peers closing is the run's end, not news
  t.on_failure = [&](WorkerId peer, const std::string& reason) {
    if (finished) return;
    log.event("net.connection_failed", reason);
    link->send(control::ConnectionFailed{peer, (clock.wall_now() - TimePoint{}).count()});
  };
  net::TcpTransport transport(io, std::move(acceptor), t);

  const std::unique_ptr<Workload> workload = workload_type(scenario).make(scenario, seed);
  // The node's GPUs, as the simulator gives them (node_gpus.h); they outlive its fibers.
  const std::unique_ptr<DeviceSet> gpus =
      scenario.devices.gpus > 0 ? make_node_gpus(scenario, index, seed, clock, options.gpus, options.make_cuda_gpu) : nullptr;
  std::optional<ProcessRuntime*> runtime_ptr;
  ProcessNode node(options.node_name, static_cast<WorkerId>(index), incarnation, seed, clock, transport, log,
                   [&](const runtime::FiberContext& fiber, std::string what) {
                     const TimePoint start = runtime_ptr ? (*runtime_ptr)->start_wall() : TimePoint{};
                     link->send(control::Failure{(clock.wall_now() - start).count(), fiber.fiber_name, std::move(what)});
                   });
  if (gpus != nullptr) node.fibers().set_devices(gpus.get());
  // Messages name peers as the scenario does ("worker3"), as in the simulator.
  node.env().name_of = [&cluster = scenario.cluster](WorkerId id) {
    return id < cluster.nodes ? cluster.node_name(id) : "node " + std::to_string(id);
  };
  ProcessRuntime runtime(node, io, scenario.faults, [&](const control::Event& m) { link->send(m); });
  runtime_ptr = &runtime;
  probe::reset();  // this incarnation's probes alone
  NodeRecord record{index, incarnation};
  NodeContext context(runtime, node.env(), record.data);

  link->send(control::Hello{index, incarnation, ::getpid()});

  // The record, rewritten when it changed.
  std::string last_written;
  // The transport's figures, sent with each record: a killed incarnation's count too.
  auto stats_now = [&] {
    const net::TcpTransportStats s = transport.stats();
    return control::NodeStats{s.sent, s.delivered, s.dropped, s.connection_failures, s.refused, s.bytes_sent, s.writes};
  };
  std::optional<control::NodeStats> last_stats;
  auto flush_stats = [&] {
    const control::NodeStats now = stats_now();
    if (last_stats == now) return;
    last_stats = now;
    link->send(control::Stats{now});
  };
  // The launcher writes it (nodes/NAME.INC.json beside the run's other records), whichever host
  // this node runs on.
  // The probes this process hit ride along (kNodeProbesKey); the launcher sums them.
  auto flush_record = [&] {
    nlohmann::json out = record.data;
    if (out.is_object()) out[kNodeProbesKey] = probe::snapshot();
    std::string now = out.dump();
    if (now == last_written) return;
    link->send(control::Record{std::move(out)});
    last_written = std::move(now);
  };
  std::function<void()> arm_tick = [&] {
    clock.call_at(clock.now() + kRecordFlushInterval, [&] {
      control.wake([&] { control.tick = true; });
    });
  };
  arm_tick();
  // Waits on the main context until `done` holds, `deadline` passes or the launcher is gone.
  auto wait_until = [&](const std::function<bool()>& done, TimePoint deadline) {
    net::wait_on_main(clock, [&] { return done() || control.link_closed; }, deadline, kSettlePoll);
  };

  bool crashed = false, started = false, exit_requested = false;
  while (!exit_requested) {
    control::Command command;
    {
      std::unique_lock lock(control.mutex);
      control.cv.wait(lock, [&] { return !control.commands.empty() || control.link_closed || control.tick; });
      if (control.tick && control.commands.empty() && !control.link_closed) {
        control.tick = false;
        lock.unlock();
        if (!crashed) flush_record();
        flush_stats();
        arm_tick();
        continue;
      }
      if (control.commands.empty()) break;  // the launcher is gone: nobody will judge this run
      command = std::move(control.commands.front());
      control.commands.pop_front();
    }
    std::visit(
        control::Overloaded{
            [&](const control::Start& start) {
              if (started) return;
              started = true;
              runtime.start(TimePoint{runtime::Duration{start.start_wall_ns}}, context, *workload);
            },
            [&](const control::Kill&) {
              ::kill(::getpid(), SIGKILL);  // a process death, as a SIGKILL from the launcher's host
            },
            [&](const control::Crash&) {
              flush_record();
              crashed = true;
              transport.silence();
              node.fibers().kill();
            },
            [&](const control::Block& block) {
              if (block.peer < scenario.cluster.nodes && block.peer != index) transport.block(static_cast<WorkerId>(block.peer), block.blocked);
            },
            [&](const control::Finish& finish) {
              const TimePoint deadline = clock.now() + std::chrono::milliseconds(finish.drain_ms);
              if (!crashed) {
                wait_until([&] { return workload->settled(index) && transport.idle(); }, deadline);
                context.run_at_end();
                flush_record();
              }
              finished = true;
              link->send(control::Finished{stats_now()});
            },
            [&](const control::Struck& struck) {
              // The answer to a workload event (ProcessRuntime::report); the kind is the report's own.
              runtime.answer(struck.id, struck.more);
            },
            [&](const control::Exit&) { exit_requested = true; },
            [&](const control::Setup&) { log.event("control.setup_again", "a second setup from the launcher, ignored"); }},
        command);
  }
  if (!protocol_error.empty()) log.event("control.protocol_error", protocol_error);
  // Shut down: no more traffic, every fiber unwinds (node_killed at its blocking point).
  transport.close();
  node.fibers().kill();
  net::wait_on_main(clock, [&] { return node.live() == 0 && (link->drained() || control.link_closed); },
                    clock.now() + std::chrono::seconds(5));
  if (node.live() > 0) {
    std::string report;
    node.fibers().describe(report, options.node_name);
    std::cerr << "dagsim node: fibers that did not unwind at shutdown:\n" << report;
    std::cerr.flush();
    ::_exit(3);  // their stacks cannot be unwound safely: leave without destroying them
  }
  workload->release_nodes();
  return 0;
}

}  // namespace dagsim::scenarios
