// dagsim_bench_peer: the second process of the TCP benchmarks (bm_transports.cc). It dies with its
// parent (PR_SET_PDEATHSIG) and ends when its standard input closes.
//   dagsim_bench_peer raw-echo PORT BYTES        connect to PORT, echo BYTES-sized messages
//   dagsim_bench_peer raw-sink PORT ACK_BYTES    connect to PORT, read, send one byte per ACK_BYTES
//   dagsim_bench_peer node FD PORT0 PORT1 TRUSTED [GPU]  node 1 of the pair, listening on
//                                                  inherited FD; GPU: none, sim or cuda (cuda:0)
#include <sys/prctl.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/transport_bench.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

int raw_echo(uint16_t port, size_t bytes) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port));
  s.set_option(tcp::no_delay(true));
  std::vector<char> buffer(bytes);
  boost::system::error_code ec;
  for (;;) {
    asio::read(s, asio::buffer(buffer), ec);
    if (ec) return 0;
    asio::write(s, asio::buffer(buffer), ec);
    if (ec) return 0;
  }
}

int raw_sink(uint16_t port, size_t ack_bytes) {
  asio::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port));
  s.set_option(tcp::no_delay(true));
  std::vector<char> buffer(1 << 20);
  size_t since_ack = 0;
  boost::system::error_code ec;
  for (;;) {
    const size_t n = s.read_some(asio::buffer(buffer), ec);
    if (ec) return 0;
    since_ack += n;
    while (since_ack >= ack_bytes) {
      since_ack -= ack_bytes;
      const char ack = 'a';
      asio::write(s, asio::buffer(&ack, 1), ec);
      if (ec) return 0;
    }
  }
}

int node(int fd, uint16_t port0, uint16_t port1, dagsim::bench::BenchChannel channel, dagsim::bench::BenchGpu gpu,
         const std::string& credentials) {
  using namespace dagsim;
  asio::io_context& io = net::IoScheduler::for_this_thread().io();
  tcp::acceptor acceptor(io);
  acceptor.assign(tcp::v4(), fd);
  bench::MlpModels models;
  const rpc::FunctionRegistry registry = bench::bench_registry(models);
  bench::BenchNode node(1, std::move(acceptor), port0, port1, channel, credentials, registry, gpu);
  if (gpu != bench::BenchGpu::none) models.place_on(Device::cuda(0));
  node.start();
  // Serve until the parent closes our standard input.
  asio::posix::stream_descriptor input(io, ::dup(STDIN_FILENO));
  boost::fibers::mutex mutex;
  boost::fibers::condition_variable cv;
  bool done = false;
  char byte = 0;
  asio::async_read(input, asio::buffer(&byte, 1), [&](const boost::system::error_code&, size_t) {
    std::unique_lock lock(mutex);
    done = true;
    cv.notify_all();
  });
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return done; });
  models.release_gpu();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "raw-echo") return raw_echo(static_cast<uint16_t>(std::stoi(args[1])), std::stoul(args[2]));
  if (args.size() == 3 && args[0] == "raw-sink") return raw_sink(static_cast<uint16_t>(std::stoi(args[1])), std::stoul(args[2]));
  if (args.size() >= 5 && args.size() <= 7 && args[0] == "node" && (args[4] == "0" || args[4] == "1" || args[4] == "2")) {
    const auto gpu = args.size() >= 6 ? dagsim::bench::parse_bench_gpu(args[5]) : dagsim::bench::BenchGpu::none;
    if (gpu.has_value()) {
      return node(std::stoi(args[1]), static_cast<uint16_t>(std::stoi(args[2])), static_cast<uint16_t>(std::stoi(args[3])),
                  static_cast<dagsim::bench::BenchChannel>(std::stoi(args[4])), *gpu, args.size() == 7 ? args[6] : "");
    }
  }
  std::fprintf(stderr,
               "usage: dagsim_bench_peer raw-echo PORT BYTES | raw-sink PORT ACK_BYTES | "
               "node FD PORT0 PORT1 CHANNEL [GPU [CREDENTIALS]]\n");
  return 2;
}
