// One link model on both transports (issue 22, item 2): a burst of messages over a narrow link
// serialises back to back, in order, in the simulator and over TCP alike, because both apply the
// scenario's [network] through runtime::LinkQueue. The simulator's delivery times are exact; TCP's
// are the simulator's within 10% (the host's scheduling and loopback add a little; a per-message
// delay would deliver the whole burst after one message's time and fail by far).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <thread>

#include "core/base/error.h"
#include "core/runtime/fiber_context.h"
#include "net/io_scheduler.h"
#include "net/real_clock.h"
#include "net/tcp_transport.h"
#include "sim/sim_test_util.h"
#include "sim/sim_world.h"

namespace dagsim {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using runtime::Delivery;
using runtime::Duration;
using runtime::TimePoint;

constexpr int kMessages = 5;
// Long enough that a busy host's scheduling (11 ms seen under two busy loops with 100 ms
// messages) stays well inside 10% of each delivery time.
constexpr size_t kBytes = 100'000;

// 200 kB/s: each 100 kB message takes 500 ms to leave; 1 ms on the wire after that.
runtime::NetworkModel narrow_link() {
  runtime::NetworkModel m;
  m.latency = runtime::LatencyModel::constant(1ms);
  m.bandwidth_bytes_per_s = 200e3;
  return m;
}

// What the model says: message i (from 1) arrives i * 500 ms + 1 ms after the burst was sent.
Duration expected(int i) { return i * 500ms + 1ms; }

// Delivery times of the burst in the simulator, since the send.
std::vector<Duration> burst_in_simulator() {
  sim::SimOptions options;
  options.network = narrow_link();
  sim::SimWorld world(options);
  std::vector<sim::testing::Received> log;
  world.add_node("a");
  world.add_node("b", sim::testing::recorder(log));
  world.start(0);
  world.start(1);
  const TimePoint sent = sim::testing::at_ms(10);
  world.at(sent, "burst", [&world] {
    for (int i = 0; i < kMessages; ++i) world.env(0).transport.send(1, runtime::Bytes(kBytes, static_cast<uint8_t>(i)));
  });
  world.run({.stop_at = sim::testing::at_ms(5000)});
  std::vector<Duration> out;
  for (const sim::testing::Received& r : log) {
    EXPECT_EQ(r.kind, Delivery::Kind::message);
    out.push_back(std::chrono::microseconds(r.time_us) - sent.since_epoch);
  }
  return out;
}

// The same burst between two TcpTransports on loopback, timed on the receiver's clock.
std::vector<Duration> burst_over_tcp() {
  std::vector<Duration> out;
  std::thread thread([&] {
    asio::io_context& io = net::IoScheduler::for_this_thread().io();
    net::RealClock clock(io);
    runtime::FiberContext context;
    context.node_name = "test";
    context.fiber_name = "main";
    context.clock = &clock;
    runtime::set_current_fiber(&context);
    {
      std::vector<asio::ip::tcp::acceptor> acceptors;
      std::vector<net::TcpEndpoint> peers;
      for (int i = 0; i < 2; ++i) {
        acceptors.emplace_back(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        peers.push_back({"127.0.0.1", acceptors.back().local_endpoint().port()});
      }
      std::vector<std::unique_ptr<net::TcpTransport>> nodes;
      const std::string secret = "a-shared-secret-of-the-cluster";
      for (WorkerId i = 0; i < 2; ++i) {
        net::TcpTransportOptions o;
        o.self = i;
        o.cluster_id = 7;
        o.names = {"a", "b"};
        o.peers = peers;
        o.secret.assign(secret.begin(), secret.end());
        o.shaping = narrow_link();
        nodes.push_back(std::make_unique<net::TcpTransport>(io, std::move(acceptors[i]), std::move(o)));
      }
      // The connection is opened first (as the simulator's is, at no cost), so the burst's times
      // measure the link, not the handshake.
      nodes[0]->send(1, runtime::Bytes{1});
      std::optional<Delivery> first = nodes[1]->inbox().pop_until(clock.now() + 5s);
      EXPECT_TRUE(first && first->kind == Delivery::Kind::message);
      clock.sleep(200ms);  // the opening message's serialisation is long over
      const TimePoint sent = clock.now();
      for (int i = 0; i < kMessages; ++i) nodes[0]->send(1, runtime::Bytes(kBytes, static_cast<uint8_t>(i)));
      for (int i = 0; i < kMessages; ++i) {
        std::optional<Delivery> d = nodes[1]->inbox().pop_until(clock.now() + 5s);
        if (!d) break;
        EXPECT_EQ(d->kind, Delivery::Kind::message);
        EXPECT_EQ(d->payload, runtime::Bytes(kBytes, static_cast<uint8_t>(i))) << "in order";
        out.push_back(clock.now() - sent);
      }
    }
    runtime::set_current_fiber(nullptr);
  });
  thread.join();
  return out;
}

TEST(LinkModel, ABurstOverANarrowLinkSerialisesInTheSimulatorExactly) {
  const std::vector<Duration> sim = burst_in_simulator();
  ASSERT_EQ(sim.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(sim[i], expected(i + 1)) << "message " << i + 1;
}

TEST(LinkModel, ABurstOverANarrowLinkTakesTheSimulatorsTimesOverTcp) {
  const std::vector<Duration> sim = burst_in_simulator();
  const std::vector<Duration> tcp = burst_over_tcp();
  ASSERT_EQ(sim.size(), static_cast<size_t>(kMessages));
  ASSERT_EQ(tcp.size(), static_cast<size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    const double want = std::chrono::duration<double, std::milli>(sim[i]).count();
    const double got = std::chrono::duration<double, std::milli>(tcp[i]).count();
    EXPECT_NEAR(got, want, 0.1 * want) << "message " << i + 1 << ": " << got << " ms over TCP, " << want
                                       << " ms in the simulator";
  }
}

}  // namespace
}  // namespace dagsim
