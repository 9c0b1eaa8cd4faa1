// Tests of TcpTransport over loopback, every node of a test on one thread (one io_context): the
// delivery contract (in order, exactly once, the sender's incarnation), failure notices at both
// ends, refusal of a peer without the secret while the others keep working, and the delay/drop
// layer's partitions.
#include "net/tcp_transport.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "core/base/error.h"
#include "core/runtime/fiber_context.h"
#include "net/io_scheduler.h"
#include "net/real_clock.h"
#include "net/secure_channel.h"

namespace dagsim::net {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;
using runtime::Delivery;
using runtime::TimePoint;

const std::string kSecret = "a-shared-secret-of-the-cluster";

// A cluster of `n` transports on this thread's io_context.
struct Cluster {
  Cluster(asio::io_context& io, size_t n, runtime::Duration timeout = 1s, std::vector<std::string> secrets = {},
          const std::function<void(TcpTransportOptions&)>& adjust = {}) {
    std::vector<tcp::acceptor> acceptors;
    std::vector<TcpEndpoint> peers;
    for (size_t i = 0; i < n; ++i) {
      acceptors.emplace_back(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      peers.push_back({"127.0.0.1", acceptors.back().local_endpoint().port()});
    }
    for (size_t i = 0; i < n; ++i) {
      TcpTransportOptions o;
      o.self = static_cast<WorkerId>(i);
      o.incarnation = 3;
      o.cluster_id = 42;
      for (size_t j = 0; j < n; ++j) o.names.push_back("worker" + std::to_string(j));
      o.peers = peers;
      const std::string secret = i < secrets.size() ? secrets[i] : kSecret;
      o.secret.assign(secret.begin(), secret.end());
      o.connection_timeout = timeout;
      o.handshake_timeout = timeout / 2;
      o.log = [this, i](const std::string& line) { logs.push_back("worker" + std::to_string(i) + ": " + line); };
      if (adjust) adjust(o);
      nodes.push_back(std::make_unique<TcpTransport>(io, std::move(acceptors[i]), std::move(o)));
    }
  }
  TcpTransport& operator[](size_t i) { return *nodes[i]; }
  std::vector<std::unique_ptr<TcpTransport>> nodes;
  std::vector<std::string> logs;
};

// Runs `body` on a fresh thread whose main fiber has a context with a RealClock, so it may wait
// with deadlines.
void on_io_thread(const std::function<void(asio::io_context&)>& body) {
  std::thread thread([&] {
    asio::io_context& io = IoScheduler::for_this_thread().io();
    RealClock clock(io);
    runtime::FiberContext context;
    context.node_name = "test";
    context.fiber_name = "main";
    context.clock = &clock;
    runtime::set_current_fiber(&context);
    body(io);
    runtime::set_current_fiber(nullptr);
  });
  thread.join();
}

Delivery pop(TcpTransport& t, runtime::Duration within = 5s) {
  runtime::Clock& clock = *runtime::current_fiber()->clock;
  std::optional<Delivery> d = t.inbox().pop_until(clock.now() + within);
  if (!d) throw errors::timed_out("nothing arrived in time");
  return std::move(*d);
}

runtime::Bytes bytes_of(size_t n, uint8_t seed) {
  runtime::Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed * 7 + i);
  return b;
}

TEST(TcpTransport, MessagesArriveInOrderOnceEachWithTheSendersIncarnation) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 2);
    const std::vector<size_t> sizes = {1, 64, 4096, 1 << 20, 0, 17};
    for (size_t round = 0; round < 20; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) c[0].send(1, bytes_of(sizes[i], static_cast<uint8_t>(round + i)), i);
    }
    for (size_t round = 0; round < 20; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        const Delivery d = pop(c[1]);
        ASSERT_EQ(d.kind, Delivery::Kind::message) << d.reason;
        EXPECT_EQ(d.peer, 0u);
        EXPECT_EQ(d.peer_incarnation, 3u);
        EXPECT_EQ(d.payload, bytes_of(sizes[i], static_cast<uint8_t>(round + i)));
        EXPECT_EQ(d.padding, i);
      }
    }
    EXPECT_FALSE(c[1].inbox().try_pop().has_value());
    EXPECT_EQ(c[0].stats().sent, 120u);
    EXPECT_EQ(c[1].stats().delivered, 120u);
    EXPECT_LT(c[0].stats().writes, 120u) << "small frames queued together leave in one write";
  });
}

TEST(TcpTransport, ANodeSendsToItselfThroughItsInbox) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 2);
    c[1].send(1, bytes_of(5, 1));
    const Delivery d = pop(c[1]);
    EXPECT_EQ(d.kind, Delivery::Kind::message);
    EXPECT_EQ(d.peer, 1u);
    EXPECT_EQ(d.payload, bytes_of(5, 1));
  });
}

TEST(TcpTransport, WhenOneEndClosesBothEndsAreToldOnceNamingThePeer) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 2);
    c[0].send(1, bytes_of(10, 1));
    c[1].send(0, bytes_of(10, 2));
    EXPECT_EQ(pop(c[1]).kind, Delivery::Kind::message);
    EXPECT_EQ(pop(c[0]).kind, Delivery::Kind::message);
    c[1].close();
    const Delivery d = pop(c[0]);
    ASSERT_EQ(d.kind, Delivery::Kind::peer_failed);
    EXPECT_EQ(d.peer, 1u);
    EXPECT_EQ(d.peer_incarnation, 3u);
    EXPECT_NE(d.reason.find("connection to worker1"), std::string::npos) << d.reason;
    EXPECT_THROW(pop(c[0], 300ms), Error) << "told once";
    EXPECT_THROW(c[1].send(0, bytes_of(1, 1)), Error);
  });
}

// Nothing listens at a dead peer's address: the refusal fails the link at once (the simulator's
// "connection refused"), not after the connection timeout of retries.
TEST(TcpTransport, APeerWithNothingListeningRefusesAtOnce) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 2, 5s);
    c[1].close();
    c.nodes[1].reset();  // nobody listens on its port any more
    runtime::Clock& clock = *runtime::current_fiber()->clock;
    const TimePoint sent = clock.now();
    c[0].send(1, bytes_of(10, 1));
    const Delivery d = pop(c[0], 3s);
    ASSERT_EQ(d.kind, Delivery::Kind::peer_failed);
    EXPECT_NE(d.reason.find("connection refused: worker1"), std::string::npos) << d.reason;
    EXPECT_LT(clock.now() - sent, 3s) << "a refusal is final; the connection timeout is 5 s";
    EXPECT_EQ(c[0].stats().dropped, 1u);
  });
}

TEST(TcpTransport, APeerWithTheWrongSecretIsRefusedWhileTheOthersKeepWorking) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 3, 600ms, {kSecret, kSecret, "an-impostor-without-the-secret"});
    c[2].send(0, bytes_of(10, 1));  // the impostor dials worker0
    c[1].send(0, bytes_of(10, 2));
    const Delivery good = pop(c[0]);
    EXPECT_EQ(good.kind, Delivery::Kind::message);
    EXPECT_EQ(good.peer, 1u);
    const Delivery refused = pop(c[2], 3s);
    ASSERT_EQ(refused.kind, Delivery::Kind::peer_failed);
    EXPECT_NE(refused.reason.find("could not prove the shared secret"), std::string::npos) << refused.reason;
    EXPECT_FALSE(c[0].inbox().try_pop().has_value()) << "nothing of the impostor's reached worker0";
    EXPECT_GE(c[2].stats().refused, 1u);
    // worker0 and worker1 still talk.
    c[0].send(1, bytes_of(10, 3));
    EXPECT_EQ(pop(c[1]).payload, bytes_of(10, 3));
  });
}

// A gathered frame (core/rpc/gathered_frame.h): a head and pieces that stay where they are, some
// past the MAC's run-ahead of 128 KiB, some empty, arrives as their concatenation, in order with
// plain sends, with MACs, in trusted-network mode and to oneself.
TEST(TcpTransport, GatheredFramesArriveAsTheirPiecesJoinedInOrder) {
  for (bool trusted : {false, true}) {
    on_io_thread([trusted](asio::io_context& io) {
      Cluster c(io, 2, 1s, {}, [trusted](TcpTransportOptions& o) { o.trusted_network = trusted; });
      auto parts = std::make_shared<std::vector<runtime::Bytes>>();
      for (size_t n : {size_t{300} << 10, size_t{0}, size_t{5}, size_t{1} << 20, size_t{64}}) {
        parts->push_back(bytes_of(n, static_cast<uint8_t>(parts->size() + 1)));
      }
      const auto gathered = [&] {
        rpc::GatheredFrame f = rpc::GatheredFrame::of(bytes_of(40, 9));
        for (const runtime::Bytes& part : *parts) f.tail.emplace_back(part.data(), part.size());
        f.size = f.head.size();
        for (std::span<const uint8_t> piece : f.tail) f.size += piece.size();
        f.keep = parts;
        return f;
      };
      runtime::Bytes joined = bytes_of(40, 9);
      for (const runtime::Bytes& part : *parts) joined.insert(joined.end(), part.begin(), part.end());
      for (int round = 0; round < 3; ++round) {
        c[0].send(1, bytes_of(10, static_cast<uint8_t>(round)));
        c[0].send_gathered(1, gathered());
        c[0].send_gathered(0, gathered());
      }
      for (int round = 0; round < 3; ++round) {
        Delivery d = pop(c[1]);
        ASSERT_EQ(d.kind, Delivery::Kind::message) << d.reason;
        EXPECT_EQ(d.payload, bytes_of(10, static_cast<uint8_t>(round)));
        d = pop(c[1]);
        ASSERT_EQ(d.kind, Delivery::Kind::message) << d.reason;
        EXPECT_TRUE(d.payload == joined) << "round " << round << (trusted ? ", trusted" : ", with MACs");
        EXPECT_TRUE(pop(c[0]).payload == joined) << "to oneself";
      }
      EXPECT_FALSE(c[1].inbox().try_pop().has_value());
    });
  }
}

TEST(TcpTransport, APeerOfAnotherProtocolVersionIsRefusedAndLogged) {
  on_io_thread([](asio::io_context& io) {
    asio::io_context& ctx = io;
    Cluster c(ctx, 2, 500ms);
    // A third party speaking version 1 (contiguous RPC frames) dials worker1 as if it were worker0.
    tcp::acceptor unused(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    TcpTransportOptions o;
    o.self = 0;
    o.cluster_id = 42;
    o.names = {"worker0", "worker1"};
    o.peers = {{"127.0.0.1", unused.local_endpoint().port()}, {"127.0.0.1", c[1].port()}};
    o.secret.assign(kSecret.begin(), kSecret.end());
    o.connection_timeout = 500ms;
    o.handshake_timeout = 250ms;
    o.protocol_version = 1;
    TcpTransport stranger(io, std::move(unused), o);
    stranger.send(1, bytes_of(4, 1));
    EXPECT_EQ(pop(stranger, 3s).kind, Delivery::Kind::peer_failed);
    bool logged = false;
    for (const std::string& line : c.logs) logged = logged || line.find("protocol version 1") != std::string::npos;
    EXPECT_TRUE(logged);
    EXPECT_FALSE(c[1].inbox().try_pop().has_value());
  });
}

TEST(TcpTransport, ABlockedLinkHoldsItsTrafficAndFailsAfterTheConnectionTimeout) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 2, 300ms);
    c[0].block(1, true);
    c[0].send(1, bytes_of(3, 1));
    EXPECT_THROW(pop(c[1], 150ms), Error) << "held while blocked";
    c[0].block(1, false);
    EXPECT_EQ(pop(c[1]).payload, bytes_of(3, 1)) << "a healed link delivers what it held";
    c[0].block(1, true);
    c[0].send(1, bytes_of(3, 2));
    const Delivery d = pop(c[0], 2s);
    ASSERT_EQ(d.kind, Delivery::Kind::peer_failed);
    EXPECT_NE(d.reason.find("timed out"), std::string::npos) << d.reason;
  });
}

TEST(TcpTransport, ASenderWaitsForRoomWhileItsPeersQueueIsFullAndGoesOnWhenItDrains) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 2, 5s, {}, [](TcpTransportOptions& o) {
      o.room_per_peer = 1 << 20;
      o.room_total = 8 << 20;
    });
    runtime::Clock& clock = *runtime::current_fiber()->clock;
    EXPECT_TRUE(c[0].wait_for_room(1, clock.now() + 10ms)) << "an empty queue has room";
    c[0].block(1, true);  // the peer reads nothing (a partition holds the traffic here)
    c[0].send(1, bytes_of(600 << 10, 1));
    EXPECT_TRUE(c[0].wait_for_room(1, clock.now() + 10ms)) << "600 KiB is under the 1 MiB bound";
    c[0].send(1, bytes_of(600 << 10, 2));
    EXPECT_EQ(c[0].queued_bytes(1), size_t{1200} << 10);
    EXPECT_EQ(c[0].queued_bytes(), size_t{1200} << 10);
    EXPECT_FALSE(c[0].wait_for_room(1, clock.now() + 50ms)) << "the deadline ends the wait; the queue is still full";
    EXPECT_TRUE(c[0].wait_for_room(0, clock.now() + 10ms)) << "only the full link's senders wait";
    // The link opens 20 ms into the next wait: the queue drains and the waiter goes on.
    asio::steady_timer open(io, 20ms);
    open.async_wait([&](const boost::system::error_code&) { c[0].block(1, false); });
    EXPECT_TRUE(c[0].wait_for_room(1, clock.now() + 5s));
    EXPECT_LT(c[0].queued_bytes(1), size_t{1} << 20);
    EXPECT_EQ(pop(c[1]).payload, bytes_of(600 << 10, 1));
    EXPECT_EQ(pop(c[1]).payload, bytes_of(600 << 10, 2));
    EXPECT_EQ(c[0].queued_bytes(), 0u);
  });
}

TEST(TcpTransport, ANodePastItsQueuedBoundFailsTheLinkThatHoldsTheMostNamingIt) {
  on_io_thread([](asio::io_context& io) {
    Cluster c(io, 3, 5s, {}, [](TcpTransportOptions& o) { o.max_queued = 2 << 20; });
    c[0].send(2, bytes_of(100, 1));
    EXPECT_EQ(pop(c[2]).payload, bytes_of(100, 1));
    runtime::Clock& clock = *runtime::current_fiber()->clock;
    for (int i = 0; i < 1000 && c[0].queued_bytes() > 0; ++i) clock.sleep(1ms);  // its write completes
    ASSERT_EQ(c[0].queued_bytes(), 0u);
    c[0].block(1, true);
    c[0].send(1, bytes_of(1 << 20, 1));
    c[0].send(1, bytes_of(1 << 20, 2));
    EXPECT_EQ(c[0].stats().connection_failures, 0u) << "2 MiB is the bound, not past it";
    c[0].send(1, bytes_of(1, 3));  // one byte past it
    const Delivery d = pop(c[0]);
    ASSERT_EQ(d.kind, Delivery::Kind::peer_failed);
    EXPECT_EQ(d.peer, 1u);
    EXPECT_NE(d.reason.find("worker1"), std::string::npos) << d.reason;
    EXPECT_NE(d.reason.find("does not read"), std::string::npos) << d.reason;
    EXPECT_EQ(c[0].queued_bytes(1), 0u) << "what it held went with the link";
    c[0].send(2, bytes_of(100, 2));
    EXPECT_EQ(pop(c[2]).payload, bytes_of(100, 2)) << "the other link is untouched";
    ASSERT_FALSE(c.logs.empty());
    EXPECT_NE(c.logs.back().find("failed the link to worker1"), std::string::npos) << c.logs.back();
  });
}

TEST(TcpTransport, TheDelayLayerKeepsEachLinkInOrder) {
  on_io_thread([](asio::io_context& io) {
    std::vector<tcp::acceptor> acceptors;
    acceptors.emplace_back(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptors.emplace_back(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    std::vector<TcpEndpoint> peers = {{"127.0.0.1", acceptors[0].local_endpoint().port()},
                                      {"127.0.0.1", acceptors[1].local_endpoint().port()}};
    std::vector<std::unique_ptr<TcpTransport>> nodes;
    for (WorkerId i = 0; i < 2; ++i) {
      TcpTransportOptions o;
      o.self = i;
      o.cluster_id = 1;
      o.names = {"a", "b"};
      o.peers = peers;
      o.secret.assign(kSecret.begin(), kSecret.end());
      runtime::NetworkModel m;
      m.latency = runtime::LatencyModel::uniform(0us, 3ms);
      o.shaping = m;
      nodes.push_back(std::make_unique<TcpTransport>(io, std::move(acceptors[i]), o));
    }
    for (uint8_t i = 0; i < 50; ++i) nodes[0]->send(1, {i});
    for (uint8_t i = 0; i < 50; ++i) EXPECT_EQ(pop(*nodes[1]).payload, runtime::Bytes{i});
  });
}

// Mutual TLS with per-node certificates (issue 49): what the shared-secret tests above show, over
// TLS, and a node that holds its own certificate but claims another node's id is refused by name.
struct Credentials {
  CertificateAuthority ca = CertificateAuthority::create("test run CA");
  std::vector<std::shared_ptr<const TlsContext>> nodes;
  explicit Credentials(size_t n) {
    for (size_t i = 0; i < n; ++i) nodes.push_back(std::make_shared<TlsContext>(ca.issue("worker" + std::to_string(i))));
  }
};

TEST(TcpTransport, OverTlsMessagesAndTheirPaddingArriveWholeAndInOrder) {
  on_io_thread([](asio::io_context& io) {
    Credentials credentials(2);
    Cluster c(io, 2, 1s, {}, [&](TcpTransportOptions& o) { o.tls = credentials.nodes[o.self]; });
    const std::vector<size_t> sizes = {1, 64, 4096, 3 << 20, 0, 17};
    for (size_t round = 0; round < 5; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) c[0].send(1, bytes_of(sizes[i], static_cast<uint8_t>(round + i)), i * 100000);
    }
    for (size_t round = 0; round < 5; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        const Delivery d = pop(c[1]);
        ASSERT_EQ(d.kind, Delivery::Kind::message) << d.reason;
        EXPECT_EQ(d.peer_incarnation, 3u);
        EXPECT_EQ(d.payload, bytes_of(sizes[i], static_cast<uint8_t>(round + i)));
        EXPECT_EQ(d.padding, i * 100000);
      }
    }
    c[1].send(0, bytes_of(10, 9));
    EXPECT_EQ(pop(c[0]).payload, bytes_of(10, 9));
    EXPECT_EQ(c[0].stats().refused + c[1].stats().refused, 0u);
  });
}

TEST(TcpTransport, OverTlsANodeClaimingAnotherNodesIdIsRefusedByNameWhileTheOthersKeepWorking) {
  on_io_thread([](asio::io_context& io) {
    Credentials credentials(3);
    // worker2's process, holding its own certificate, says it is worker1.
    Cluster c(io, 3, 1s, {}, [&](TcpTransportOptions& o) {
      o.tls = credentials.nodes[o.self];
      if (o.self == 2) o.self = 1;
    });
    c[2].send(0, bytes_of(8, 1));  // from the impostor
    c[1].send(0, bytes_of(8, 2));  // from the real worker1
    const Delivery d = pop(c[0]);
    ASSERT_EQ(d.kind, Delivery::Kind::message) << d.reason;
    EXPECT_EQ(d.payload, bytes_of(8, 2));
    EXPECT_FALSE(c[0].inbox().try_pop().has_value()) << "the impostor's message was delivered";
    bool named = false;
    for (const std::string& line : c.logs) {
      named = named || (line.starts_with("worker0: ") && line.find("certificate names \"worker2\"") != std::string::npos &&
                        line.find("claims to be \"worker1\"") != std::string::npos);
    }
    EXPECT_TRUE(named) << ::testing::PrintToString(c.logs);
  });
}

}  // namespace
}  // namespace dagsim::net
