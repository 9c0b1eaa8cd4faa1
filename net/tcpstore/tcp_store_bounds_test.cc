// Tests of what bounds a TcpStoreServer's memory and keeps its doors open (issue 23, item 4): a
// client that watches a key and never reads is closed once its unread events pass its share,
// several such clients together never pass the total (the slowest reader goes first), and
// connections held at the connection limit give way to new ones: idle ones first, then waiters
// (a WAIT or a watch), the address holding the most connections first (issue 49).
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

#include <thread>

#include "core/base/error.h"
#include "net/tcpstore/fiber_stream.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/tcp_store_client.h"
#include "net/tcpstore/tcp_store_server.h"

namespace dagsim::net::tcpstore {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

constexpr size_t kMiB = size_t{1} << 20;

struct Bounded {
  Bounded(StoreHost& host, size_t per_connection, size_t total, size_t max_connections = 64)
      : host(host), table(std::make_shared<store::KeyValueTable>()),
        server(host.io(), host.spawner(), tcp::acceptor(host.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
               table, options(per_connection, total, max_connections)) {}

  TcpStoreServerOptions options(size_t per_connection, size_t total, size_t max_connections) {
    TcpStoreServerOptions o;
    o.max_queued_bytes = per_connection;
    o.max_total_queued_bytes = total;
    o.max_connections = max_connections;
    o.log = [this](const std::string& line) { logs.push_back(line); };
    return o;
  }
  std::unique_ptr<TcpStoreClient> client() {
    TcpStoreClientOptions o;
    o.port = server.port();
    auto c = std::make_unique<TcpStoreClient>(host.io(), o);
    c->set_timeout(5s);
    return c;
  }
  // A raw connection that sends `query` (if any) and then never reads.
  std::shared_ptr<FiberStream> silent(std::optional<Query> query = std::nullopt) {
    auto stream = FiberStream::connect(host.io(), "127.0.0.1", server.port(), host.clock().now() + 2s);
    if (query) stream->send(encode_query(*query));
    return stream;
  }
  size_t logs_with(const std::string& text) const {
    size_t n = 0;
    for (const std::string& l : logs) n += l.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

  StoreHost& host;
  std::vector<std::string> logs;
  std::shared_ptr<store::KeyValueTable> table;
  TcpStoreServer server;
};

Query watch_query(const std::string& key) {
  Query q;
  q.type = QueryType::watch_key;
  q.keys = {key};
  return q;
}

// True once the server has closed `stream` (its unread bytes are skipped); false when it is still
// open at `deadline`. A client learns of a close only by reading.
bool closed_by_server(FiberStream& stream, runtime::TimePoint deadline) {
  try {
    for (;;) {
      stream.consume(stream.data().size());
      if (!stream.fill(1, deadline)) return false;
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::connection_failed) throw;
    return true;
  }
}

void on_thread(const std::function<void(StoreHost&)>& body) {
  std::thread thread([&] {
    StoreHost host("test", [](const std::string& line) { ADD_FAILURE() << line; });
    body(host);
  });
  thread.join();
}

TEST(TcpStoreBounds, AWatcherThatNeverReadsIsClosedOnceItsUnreadEventsPassItsShare) {
  on_thread([](StoreHost& host) {
    Bounded f(host, 4 * kMiB, 64 * kMiB);
    auto writer = f.client();
    host.run([&] {
      const auto watcher = f.silent(watch_query("/w"));
      writer->set("ready", Bytes{1});
      ASSERT_TRUE(host.wait_until([&] { return f.server.connections() == 2; }, host.clock().now() + 5s));
      // Each SET queues an event of about 2 MiB (old and new value) to the watcher, which the
      // socket's buffers absorb only so far.
      const Bytes value(kMiB, 7);
      size_t sets = 0;
      while (f.logs_with("per connection") == 0 && sets < 200) {
        writer->set("w", value);
        writer->get("ready");  // the server has handled the SET (and queued its event)
        EXPECT_LE(f.server.queued_bytes(), 4 * kMiB + 3 * kMiB) << "after " << sets << " sets";
        ++sets;
      }
      ASSERT_EQ(f.logs_with("per connection"), 1u) << "not closed after " << sets << " sets";
      EXPECT_NE(f.logs.back().find("closing the connection from 127.0.0.1:"), std::string::npos) << f.logs.back();
      EXPECT_NE(f.logs.back().find("over the limit of 4194304 per connection"), std::string::npos) << f.logs.back();
      EXPECT_EQ(f.server.queued_bytes(), 0u);  // its queue went with it
      EXPECT_EQ(f.server.connections(), 1u);
      // Its watch went too: later SETs queue nothing, and the writer goes on.
      writer->set("w", value);
      EXPECT_EQ(writer->get("w"), value);
      EXPECT_EQ(f.server.stats().refused, 1u);
      (void)watcher;
    });
  });
}

TEST(TcpStoreBounds, ManyNonReadingWatchersTogetherNeverPassTheTotalAndTheSlowestGoesFirst) {
  on_thread([](StoreHost& host) {
    // A share so large that only the total can act.
    Bounded f(host, 1024 * kMiB, 12 * kMiB);
    auto writer = f.client();
    host.run([&] {
      std::vector<std::shared_ptr<FiberStream>> watchers;
      for (int i = 0; i < 3; ++i) watchers.push_back(f.silent(watch_query("/w")));
      writer->set("ready", Bytes{1});
      ASSERT_TRUE(host.wait_until([&] { return f.server.connections() == 4; }, host.clock().now() + 5s));
      const Bytes value(kMiB, 7);
      size_t sets = 0;
      while (f.server.connections() > 1 && sets < 300) {
        writer->set("w", value);
        writer->get("ready");
        // Checked after every delivery: never over the total by more than the event just queued.
        EXPECT_LE(f.server.queued_bytes(), 12 * kMiB) << "after " << sets << " sets";
        ++sets;
      }
      EXPECT_EQ(f.server.connections(), 1u) << "after " << sets << " sets";
      EXPECT_EQ(f.logs_with("the slowest reader"), 3u);
      EXPECT_EQ(writer->get("w"), value);  // the honest client was never the one closed
    });
  });
}

TEST(TcpStoreBounds, IdleConnectionsAtTheLimitGiveWayToHonestClients) {
  on_thread([](StoreHost& host) {
    Bounded f(host, 64 * kMiB, 64 * kMiB, /*max_connections=*/3);
    host.run([&] {
      // Three connections that never say a word fill the store.
      std::vector<std::shared_ptr<FiberStream>> idle;
      for (int i = 0; i < 3; ++i) idle.push_back(f.silent());
      ASSERT_TRUE(host.wait_until([&] { return f.server.stats().accepted == 3; }, host.clock().now() + 5s));
      // An honest client still gets in, each time, and is served.
      for (int round = 0; round < 2; ++round) {
        auto honest = f.client();
        honest->set("k", Bytes{static_cast<uint8_t>(round)});
        EXPECT_EQ(honest->get("k"), Bytes{static_cast<uint8_t>(round)});
      }
      EXPECT_GE(f.logs_with("waiting on nothing"), 1u);
      EXPECT_LE(f.server.connections(), 3u);
    });
  });
}

TEST(TcpStoreBounds, WaitersAtTheLimitGiveWayTooIdleOnesFirstThenTheWaiterIdleLongest) {
  on_thread([](StoreHost& host) {
    Bounded f(host, 64 * kMiB, 64 * kMiB, /*max_connections=*/4);
    host.run([&] {
      // A WAIT on a key nobody sets, then two watchers, then one connection that only checks: the
      // WAIT is idle longest, and the checker, waiting on nothing, is idle least.
      Query wait;
      wait.type = QueryType::wait;
      wait.keys = {"/never"};
      Query check;
      check.type = QueryType::check;
      check.keys = {"/never"};
      auto waiter = f.silent(wait);
      ASSERT_TRUE(host.wait_until([&] { return f.server.stats().queries == 1; }, host.clock().now() + 5s));
      std::vector<std::shared_ptr<FiberStream>> watching;
      for (int i = 0; i < 2; ++i) {
        watching.push_back(f.silent(watch_query("/w" + std::to_string(i))));
        ASSERT_TRUE(host.wait_until([&] { return f.server.stats().queries == 2u + i; }, host.clock().now() + 5s));
      }
      auto checker = f.silent(check);
      ASSERT_TRUE(host.wait_until([&] { return f.server.stats().queries == 4; }, host.clock().now() + 5s));
      // A client at the limit: the one waiting on nothing goes first, though it spoke last.
      auto first = f.client();
      first->set("k", Bytes{1});
      EXPECT_EQ(first->get("k"), Bytes{1});
      EXPECT_TRUE(closed_by_server(*checker, host.clock().now() + 5s));
      EXPECT_EQ(f.logs_with("waiting on nothing"), 1u);
      // The client leaves and a third watcher comes: every connection waits on something, and the
      // next client displaces the waiter idle longest, the WAIT, and is served.
      first.reset();
      ASSERT_TRUE(host.wait_until([&] { return f.server.connections() == 3; }, host.clock().now() + 5s));
      const uint64_t before = f.server.stats().queries;
      watching.push_back(f.silent(watch_query("/w2")));
      ASSERT_TRUE(host.wait_until([&] { return f.server.stats().queries == before + 1; }, host.clock().now() + 5s));
      auto second = f.client();
      second->set("k", Bytes{2});
      EXPECT_EQ(second->get("k"), Bytes{2});
      EXPECT_TRUE(closed_by_server(*waiter, host.clock().now() + 5s));
      EXPECT_EQ(f.logs_with("waited on a watch or a WAIT (cancelled)"), 1u);
      EXPECT_EQ(f.server.connections(), 4u);
      // The watchers were kept and still get their events.
      for (int i = 0; i < 3; ++i) f.table->set("/w" + std::to_string(i), Bytes{1});
      for (auto& w : watching) EXPECT_TRUE(w->fill(2, host.clock().now() + 5s));
    });
  });
}

TEST(TcpStoreBounds, AFloodOfWaitersFromOneAddressDisplacesOnlyItsOwn) {
  on_thread([](StoreHost& host) {
    Bounded f(host, 64 * kMiB, 64 * kMiB, /*max_connections=*/5);
    host.run([&] {
      // An honest watcher from 127.0.0.1 first (so idle longest of all), then four WAITs from
      // 127.0.0.2, which fill the store.
      auto honest_watcher = f.silent(watch_query("/h"));
      ASSERT_TRUE(host.wait_until([&] { return f.server.stats().queries == 1; }, host.clock().now() + 5s));
      std::vector<std::shared_ptr<FiberStream>> flood;
      for (int i = 0; i < 4; ++i) {
        tcp::socket socket(host.io());
        socket.open(tcp::v4());
        socket.bind(tcp::endpoint(asio::ip::make_address("127.0.0.2"), 0));
        socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), f.server.port()));
        auto stream = std::make_shared<FiberStream>(std::move(socket), "flood");
        Query wait;
        wait.type = QueryType::wait;
        wait.keys = {"/never" + std::to_string(i)};
        stream->send(encode_query(wait));
        flood.push_back(stream);
        ASSERT_TRUE(host.wait_until([&] { return f.server.stats().queries == 2u + i; }, host.clock().now() + 5s));
      }
      // Two honest clients from 127.0.0.1, both kept open: each displaces a flooding WAIT, the
      // oldest first, never the honest watcher nor the first client, though both are idle longer
      // and the client waits on nothing.
      std::vector<std::unique_ptr<TcpStoreClient>> clients;
      for (int round = 0; round < 2; ++round) {
        clients.push_back(f.client());
        TcpStoreClient* honest = clients.back().get();
        honest->set("k", Bytes{static_cast<uint8_t>(round)});
        EXPECT_EQ(honest->get("k"), Bytes{static_cast<uint8_t>(round)});
        EXPECT_TRUE(closed_by_server(*flood[static_cast<size_t>(round)], host.clock().now() + 5s)) << round;
      }
      EXPECT_EQ(f.logs_with("from 127.0.0.2, the address holding the most, and waited on a watch or a WAIT"), 2u);
      EXPECT_FALSE(closed_by_server(*flood[2], host.clock().now() + 100ms));
      EXPECT_EQ(clients[0]->get("k"), Bytes{1});
      f.table->set("/h", Bytes{1});
      EXPECT_TRUE(honest_watcher->fill(2, host.clock().now() + 5s));
    });
  });
}

}  // namespace
}  // namespace dagsim::net::tcpstore
