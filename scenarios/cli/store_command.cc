// `dagsim store`: serves the built-in store over PyTorch 1.13's TCPStore protocol
// (net/tcpstore/tcp_store_server.h) until SIGTERM or SIGINT, so PyTorch processes
// (torch.distributed.TCPStore(host, port, is_master=False)) and dagsim ones share one store. The
// bound port goes to standard output alone on the first line (with --port 0 the OS picks it), for
// scripts to read; everything else goes to standard error. --record FILE writes every client
// operation as a JSON line (net/tcpstore/store_recorder.h), for `dagsim judge`, bounded by
// --record-max-bytes and --record-value-bytes. --restore FILE... replays earlier stores' records
// into the table before it listens (net/tcpstore/store_restore.h: a store restarted keeping its
// data). --faults FILE names the fault layer's rules (net/tcpstore/store_faults.h), read at the
// start and again on each SIGUSR1 (an absent file: no faults; a bad one is logged and the rules in
// force stay), its draws seeded by --seed. Exit 0 after a signal, 2 when it cannot listen
// (naming the address and why), a record to restore is unreadable or cannot be replayed exactly
// (naming FILE:LINE), --max-connections is past the file-descriptor limit, or the
// record cannot be written or its limits are out of range.
#include <boost/asio/ip/tcp.hpp>

#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/tcpstore/store_faults.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/store_restore.h"
#include "net/tcpstore/tcp_store_server.h"
#include "scenarios/cli/commands.h"

namespace dagsim::cli {

namespace {

volatile std::sig_atomic_t stop_requested = 0;
volatile std::sig_atomic_t reload_requested = 0;

// Descriptors the store keeps for itself beyond its connections: standard streams, the listening
// socket, the I/O loop's epoll and eventfd, and room to spare.
constexpr rlim_t kReservedDescriptors = 64;

// A job connects every worker to the store, so a store for tens of thousands of workers needs as
// many descriptors. The soft limit (1,024 on a default Debian login) is raised to the hard one
// (524,288 under systemd), and the store serves that many connections less its reserve. The
// number of connections served, or nullopt (with `error` set) when --max-connections asks for more
// than the limit allows.
std::optional<size_t> connection_limit(size_t asked, std::string& error) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    error = std::string("cannot read the file-descriptor limit: ") + std::strerror(errno);
    return std::nullopt;
  }
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const rlim_t usable = limit.rlim_cur == RLIM_INFINITY ? rlim_t{1} << 20 : limit.rlim_cur;
  const size_t allowed = usable > kReservedDescriptors ? static_cast<size_t>(usable - kReservedDescriptors) : 1;
  if (asked == 0) return allowed;
  if (asked > allowed) {
    error = "--max-connections " + std::to_string(asked) + " is more than the file-descriptor limit (" +
            std::to_string(usable) + ", less " + std::to_string(kReservedDescriptors) +
            " for the store itself) allows: raise the hard limit (ulimit -Hn) or ask for at most " + std::to_string(allowed);
    return std::nullopt;
  }
  return asked;
}

extern "C" void request_stop(int) { stop_requested = 1; }
extern "C" void request_reload(int) { reload_requested = 1; }

// (Re)reads the fault layer's rules; a bad file is logged and the rules in force stay.
void load_faults(const std::string& path, net::tcpstore::StoreFaults& faults) {
  try {
    faults.set(net::tcpstore::read_store_faults(path));
    std::cerr << "dagsim store: fault layer: " << faults.rules().size() << " rule(s) from " << printable(path) << "\n";
  } catch (const Error& e) {
    std::cerr << "dagsim store: fault layer: ignoring " << e.detail() << " (the " << faults.rules().size()
              << " rule(s) in force stay)\n";
  }
}

}  // namespace

int store_command(const StoreArgs& args) {
  namespace asio = boost::asio;
  using asio::ip::tcp;
  // Before anything else: whoever started the store may signal it as soon as it is running (a
  // SIGUSR1 left to its default would end the store).
  struct sigaction action{};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  struct sigaction reload{};
  reload.sa_handler = request_reload;
  sigemptyset(&reload.sa_mask);
  sigaction(SIGUSR1, &reload, nullptr);
  std::string limit_error;
  const std::optional<size_t> max_connections = connection_limit(args.max_connections, limit_error);
  if (!max_connections) {
    std::cerr << "dagsim store: " << limit_error << "\n";
    return kBadInput;
  }
  net::tcpstore::StoreHost host("store");
  const std::string where = printable(args.host + ":" + std::to_string(args.port));
  tcp::acceptor acceptor(host.io());
  try {
    const tcp::endpoint endpoint(asio::ip::make_address(args.host), args.port);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    std::cerr << "dagsim store: cannot listen on " << where << ": " << e.code().message() << "\n";
    return kBadInput;
  }
  net::tcpstore::TcpStoreServerOptions options;
  options.max_connections = *max_connections;
  if (!args.record.empty()) {
    try {
      const net::tcpstore::RecorderLimits limits{args.record_max_bytes, args.record_value_bytes};
      options.recorder = std::make_shared<net::tcpstore::StoreRecorder>(
          args.record, limits, [](const std::string& line) { std::cerr << "dagsim store: " << line << "\n"; });
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      std::cerr << "dagsim store: " << e.detail() << "\n";
      return kBadInput;
    }
  }
  options.log = [](const std::string& line) { std::cerr << "dagsim store: " << line << "\n"; };
  auto table = std::make_shared<store::KeyValueTable>();
  if (!args.restore.empty()) {
    try {
      const net::tcpstore::RestoreSummary restored = net::tcpstore::restore_store_records(args.restore, *table);
      std::cerr << "dagsim store: restored " << table->size() << " keys from " << restored.writes << " writes in "
                << restored.files << " record(s)"
                << (restored.torn_lines ? " (an unterminated last line skipped: its store was killed writing it)" : "") << "\n";
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      std::cerr << "dagsim store: cannot restore: " << e.detail() << "\n";
      return kBadInput;
    }
  }
  if (!args.faults.empty()) {
    options.faults = std::make_shared<net::tcpstore::StoreFaults>(args.seed);
    load_faults(args.faults, *options.faults);
  }
  net::tcpstore::TcpStoreServer server(host.io(), host.spawner(), std::move(acceptor), table, options);
  std::cout << server.port() << std::endl;
  std::cerr << "dagsim store: serving PyTorch 1.13's TCPStore protocol on " << printable(args.host) << ":" << server.port()
            << " to at most " << *max_connections << " connections until SIGTERM or SIGINT\n";
  while (stop_requested == 0) {
    // Every 10 ms: a fault struck at a moment takes effect within 10 ms of its signal.
    host.wait_until([] { return stop_requested != 0 || reload_requested != 0; }, runtime::TimePoint::max(),
                    std::chrono::milliseconds(10));
    if (reload_requested != 0) {
      reload_requested = 0;
      if (options.faults) load_faults(args.faults, *options.faults);
    }
  }
  const net::tcpstore::TcpStoreServerStats stats = server.stats();
  server.close();
  std::cerr << "dagsim store: stopped after " << stats.accepted << " connections, " << stats.queries << " queries, "
            << stats.refused << " refused\n";
  if (options.recorder) {
    options.recorder->stop();
    if (!options.recorder->error().empty()) {
      std::cerr << "dagsim store: " << options.recorder->error() << "\n";
      return kBadInput;
    }
  }
  return kPassed;
}

}  // namespace dagsim::cli
