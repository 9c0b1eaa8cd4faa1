// The real runtime's I/O loop against the machine's floor (issue 10): 64-byte ping-pong over
// loopback TCP between two fibers of one IoScheduler thread (no thread handoff; every wait goes
// through the io_context), and the same between two OS threads with blocking sockets (the floor:
// what the kernel costs). Each iteration is one round trip. Both run on threads of their own, so
// they never meet the scheduler installed on the benchmark's main thread.
#include <benchmark/benchmark.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/fiber/all.hpp>

#include <array>
#include <cstring>
#include <vector>
#include <thread>

#include "net/crypto.h"
#include "net/io_scheduler.h"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
constexpr size_t kBytes = 64;

// A connected pair of loopback sockets on `io`, TCP_NODELAY on both.
void connect_pair(asio::io_context& io, tcp::socket& a, tcp::socket& b) {
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  a.connect(acceptor.local_endpoint());
  acceptor.accept(b);
  a.set_option(tcp::no_delay(true));
  b.set_option(tcp::no_delay(true));
}

// One async transfer awaited by the calling fiber (untimed: the I/O loop wakes it).
void fiber_transfer(tcp::socket& socket, std::array<char, kBytes>& buffer, bool write) {
  boost::fibers::promise<void> done;
  auto result = done.get_future();
  auto handler = [&done](const boost::system::error_code& ec, size_t) {
    if (ec) {
      done.set_exception(std::make_exception_ptr(boost::system::system_error(ec)));
    } else {
      done.set_value();
    }
  };
  if (write) {
    asio::async_write(socket, asio::buffer(buffer), handler);
  } else {
    asio::async_read(socket, asio::buffer(buffer), handler);
  }
  result.get();
}

void BM_LoopbackPingPongFibers(benchmark::State& state) {
  std::thread thread([&state] {
    asio::io_context& io = dagsim::net::IoScheduler::for_this_thread().io();
    tcp::socket a(io), b(io);
    connect_pair(io, a, b);
    bool stop = false;
    boost::fibers::fiber echo([&] {
      std::array<char, kBytes> buffer{};
      for (;;) {
        fiber_transfer(b, buffer, false);
        if (buffer[0] == 'q') return;
        fiber_transfer(b, buffer, true);
      }
    });
    std::array<char, kBytes> buffer{};
    for (auto _ : state) {
      buffer[0] = 'p';
      fiber_transfer(a, buffer, true);
      fiber_transfer(a, buffer, false);
    }
    stop = true;
    buffer[0] = 'q';
    fiber_transfer(a, buffer, true);
    echo.join();
    benchmark::DoNotOptimize(stop);
  });
  thread.join();
}
BENCHMARK(BM_LoopbackPingPongFibers)->UseRealTime();

void BM_LoopbackPingPongThreads(benchmark::State& state) {
  std::thread thread([&state] {
    asio::io_context io;
    tcp::socket a(io), b(io);
    connect_pair(io, a, b);
    std::thread echo([&b] {
      std::array<char, kBytes> buffer{};
      for (;;) {
        asio::read(b, asio::buffer(buffer));
        if (buffer[0] == 'q') return;
        asio::write(b, asio::buffer(buffer));
      }
    });
    std::array<char, kBytes> buffer{};
    for (auto _ : state) {
      buffer[0] = 'p';
      asio::write(a, asio::buffer(buffer));
      asio::read(a, asio::buffer(buffer));
    }
    buffer[0] = 'q';
    asio::write(a, asio::buffer(buffer));
    echo.join();
  });
  thread.join();
}
BENCHMARK(BM_LoopbackPingPongThreads)->UseRealTime();

// The per-envelope MAC (net/crypto.h's EnvelopeMac: Poly1305 under a ChaCha20-derived one-time
// key) against a copy of the same bytes, the "memory speed" issue 25 asks of it.
void BM_EnvelopeMac(benchmark::State& state) {
  const std::vector<uint8_t> data(static_cast<size_t>(state.range(0)), 0x5a);
  const dagsim::net::EnvelopeMac mac(dagsim::net::Digest{1, 2, 3});
  uint64_t nonce = 0;
  for (auto _ : state) {
    dagsim::net::Tag tag = mac.tag(nonce++, {data});
    benchmark::DoNotOptimize(tag);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EnvelopeMac)->Arg(64)->Arg(1 << 20);

void BM_Memcpy(benchmark::State& state) {
  const std::vector<uint8_t> from(static_cast<size_t>(state.range(0)), 0x5a);
  std::vector<uint8_t> to(from.size());
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), from.size());
    benchmark::DoNotOptimize(to.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Memcpy)->Arg(1 << 20);

}  // namespace
