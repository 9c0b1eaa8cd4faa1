// Tests of IoScheduler and RealClock: fibers blocked on untimed waits are woken by Asio timers and
// socket completions run by the scheduler's I/O loop, by a cancelled timer never, and by another
// OS thread through notify(). Each test runs on a thread of its own: a thread keeps the first
// scheduling algorithm installed on it, and other tests in a process may have installed theirs.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/fiber/all.hpp>

#include <array>
#include <thread>

#include "net/io_scheduler.h"
#include "net/real_clock.h"

namespace dagsim::net {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

// Runs `body` on a fresh OS thread with an IoScheduler and its io_context.
void on_io_thread(const std::function<void(asio::io_context&)>& body) {
  std::thread thread([&] { body(IoScheduler::for_this_thread().io()); });
  thread.join();
}

// Blocks the calling fiber until `fire` of a clock timer ran (an untimed Boost.Fiber wait).
struct Flag {
  boost::fibers::mutex mutex;
  boost::fibers::condition_variable cv;
  bool set = false;
  void raise() {
    std::lock_guard lock(mutex);
    set = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [this] { return set; });
  }
};

TEST(IoScheduler, AClockTimerWakesAFiberAtOrAfterItsDeadline) {
  on_io_thread([](asio::io_context& io) {
    RealClock clock(io);
    Flag flag;
    const runtime::TimePoint start = clock.now();
    clock.call_at(start + 20ms, [&] { flag.raise(); });
    boost::fibers::fiber waiter([&] { flag.wait(); });
    waiter.join();
    EXPECT_GE(clock.now() - start, 20ms);
    EXPECT_EQ(clock.armed(), 0u);
  });
}

TEST(IoScheduler, ACancelledTimerNeverFires) {
  on_io_thread([](asio::io_context& io) {
    RealClock clock(io);
    bool cancelled_fired = false;
    Flag later;
    const runtime::TimerId id = clock.call_at(clock.now() + 5ms, [&] { cancelled_fired = true; });
    clock.call_at(clock.now() + 30ms, [&] { later.raise(); });
    clock.cancel(id);
    clock.cancel(id);  // a no-op
    later.wait();
    EXPECT_FALSE(cancelled_fired);
  });
}

TEST(IoScheduler, FibersPingPongOverLoopbackTcpWithoutAThreadHandoff) {
  on_io_thread([](asio::io_context& io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));  // the OS picks the port
    tcp::socket server(io), client(io);
    // Socket completions fulfil fiber promises; the fibers wait on the futures, untimed.
    auto accept = [&] {
      boost::fibers::promise<boost::system::error_code> done;
      auto result = done.get_future();
      acceptor.async_accept(server, [&done](const boost::system::error_code& ec) { done.set_value(ec); });
      return result.get();
    };
    auto exchange = [](tcp::socket& socket, std::array<char, 8>& buffer, bool write) {
      boost::fibers::promise<boost::system::error_code> done;
      auto result = done.get_future();
      auto handler = [&done](const boost::system::error_code& ec, size_t) { done.set_value(ec); };
      if (write) {
        asio::async_write(socket, asio::buffer(buffer), handler);
      } else {
        asio::async_read(socket, asio::buffer(buffer), handler);
      }
      return result.get();
    };
    constexpr int kRounds = 1000;
    boost::fibers::fiber echo([&] {
      ASSERT_FALSE(accept());
      std::array<char, 8> buffer{};
      for (int i = 0; i < kRounds; ++i) {
        ASSERT_FALSE(exchange(server, buffer, false));
        ASSERT_FALSE(exchange(server, buffer, true));
      }
    });
    {
      boost::fibers::promise<boost::system::error_code> connected;
      auto result = connected.get_future();
      client.async_connect(acceptor.local_endpoint(), [&](const boost::system::error_code& ec) { connected.set_value(ec); });
      ASSERT_FALSE(result.get());
    }
    client.set_option(tcp::no_delay(true));
    std::array<char, 8> buffer{};
    for (int i = 0; i < kRounds; ++i) {
      std::snprintf(buffer.data(), buffer.size(), "%07u", static_cast<unsigned>(i) % 10000000u);  // 7 digits and a NUL
      ASSERT_FALSE(exchange(client, buffer, true));
      ASSERT_FALSE(exchange(client, buffer, false));
      ASSERT_EQ(std::atoi(buffer.data()), i);
    }
    echo.join();
  });
}

TEST(IoScheduler, AnotherThreadWakesAFiberThroughNotify) {
  on_io_thread([](asio::io_context&) {
    boost::fibers::promise<int> promise;
    auto future = promise.get_future();
    std::thread remote([&] {
      std::this_thread::sleep_for(10ms);  // the fiber below is blocked in the I/O loop by then
      promise.set_value(42);
    });
    EXPECT_EQ(future.get(), 42);
    remote.join();
  });
}

}  // namespace
}  // namespace dagsim::net
