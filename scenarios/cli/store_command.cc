// `dagsim store`: serves the built-in store over PyTorch 1.13's TCPStore protocol
// (net/tcpstore/tcp_store_server.h) until SIGTERM or SIGINT, so PyTorch processes
// (torch.distributed.TCPStore(host, port, is_master=False)) and dagsim ones share one store. The
// bound port goes to standard output alone on the first line (with --port 0 the OS picks it), for
// scripts to read; everything else goes to standard error. Exit 0 after a signal, 2 when it cannot
// listen (naming the address and why).
#include <boost/asio/ip/tcp.hpp>

#include <csignal>
#include <iostream>

#include "core/base/error.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/tcp_store_server.h"
#include "scenarios/cli/commands.h"

namespace dagsim::cli {

namespace {

volatile std::sig_atomic_t stop_requested = 0;

extern "C" void request_stop(int) { stop_requested = 1; }

}  // namespace

int store_command(const StoreArgs& args) {
  namespace asio = boost::asio;
  using asio::ip::tcp;
  net::tcpstore::StoreHost host("store");
  const std::string where = args.host + ":" + std::to_string(args.port);
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
  options.log = [](const std::string& line) { std::cerr << "dagsim store: " << line << "\n"; };
  net::tcpstore::TcpStoreServer server(host.io(), host.spawner(), std::move(acceptor),
                                       std::make_shared<store::KeyValueTable>(), options);
  struct sigaction action{};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::cout << server.port() << std::endl;
  std::cerr << "dagsim store: serving PyTorch 1.13's TCPStore protocol on " << args.host << ":" << server.port()
            << " until SIGTERM or SIGINT\n";
  host.wait_until([] { return stop_requested != 0; }, runtime::TimePoint::max(), std::chrono::milliseconds(50));
  const net::tcpstore::TcpStoreServerStats stats = server.stats();
  server.close();
  std::cerr << "dagsim store: stopped after " << stats.accepted << " connections, " << stats.queries << " queries, "
            << stats.refused << " refused\n";
  return kPassed;
}

}  // namespace dagsim::cli
