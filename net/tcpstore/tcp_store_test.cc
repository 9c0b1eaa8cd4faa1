// Tests of TcpStoreServer and TcpStoreClient together, in one process over loopback (each test on
// a thread of its own, with its own IoScheduler): every Store operation with PyTorch's semantics,
// waiting calls that block only their own connection, versions and watches over a protocol that
// has neither, bad input closing only the connection that sent it (with a log line naming the
// peer), and a dead server failing a call with an error naming host:port within its timeout.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

#include <thread>

#include "core/base/error.h"
#include "core/base/throws_error_test_util.h"
#include "net/tcpstore/fiber_stream.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/tcp_store_client.h"
#include "net/tcpstore/tcp_store_server.h"

namespace dagsim::net::tcpstore {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;
using store::Versioned;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

// A server and clients on one thread's StoreHost.
struct Fixture {
  explicit Fixture(StoreHost& host)
      : host(host), table(std::make_shared<store::KeyValueTable>()),
        server(host.io(), host.spawner(), tcp::acceptor(host.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
               table, options()) {}

  TcpStoreServerOptions options() {
    TcpStoreServerOptions o;
    o.log = [this](const std::string& line) { logs.push_back(line); };
    return o;
  }
  std::unique_ptr<TcpStoreClient> client(runtime::Duration timeout = 2s) {
    TcpStoreClientOptions o;
    o.port = server.port();
    auto c = std::make_unique<TcpStoreClient>(host.io(), o);
    c->set_timeout(timeout);
    return c;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server.port()); }

  StoreHost& host;
  std::vector<std::string> logs;
  std::shared_ptr<store::KeyValueTable> table;
  TcpStoreServer server;
};

// Runs `body` on a fresh thread (a thread keeps the first IoScheduler installed on it).
void on_thread(const std::function<void(StoreHost&)>& body) {
  std::thread thread([&] {
    StoreHost host("test", [](const std::string& line) { ADD_FAILURE() << line; });
    body(host);
  });
  thread.join();
}

TEST(TcpStore, EveryOperationWithPyTorchsSemantics) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto c = f.client();
    host.run([&] {
      c->set("a", text("1"));
      EXPECT_EQ(c->get("a"), text("1"));
      // Keys carry PyTorch's "/" on the wire, so PyTorch clients see the same keys.
      EXPECT_EQ(f.table->get("/a"), text("1"));
      EXPECT_EQ(c->compare_set("b", {}, text("x")), text("x"));        // absent, empty expected: written
      EXPECT_EQ(c->compare_set("c", text("e"), text("y")), text("e"));  // absent, other expected: not
      EXPECT_FALSE(c->check({"c"}));
      EXPECT_EQ(c->compare_set("b", text("x"), text("z")), text("z"));
      EXPECT_EQ(c->compare_set("b", text("x"), text("w")), text("z"));
      EXPECT_EQ(c->add("n", 5), 5);
      EXPECT_EQ(c->add("n", -2), 3);
      EXPECT_EQ(c->get("n"), text("3"));
      EXPECT_TRUE(c->check({"a", "b", "n"}));
      c->wait({"a", "n"});
      EXPECT_EQ(c->num_keys(), 3);
      c->multi_set({"m1", "m2"}, {text("p"), text("q")});
      EXPECT_EQ(c->multi_get({"m1", "m2", "a"}), (std::vector<Bytes>{text("p"), text("q"), text("1")}));
      EXPECT_TRUE(c->delete_key("m1"));
      EXPECT_FALSE(c->delete_key("m1"));
      EXPECT_EQ(c->num_keys(), 4);
    });
    EXPECT_TRUE(f.logs.empty());
  });
}

TEST(TcpStore, AWaitingGetBlocksOnlyItsOwnConnection) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto waiter = f.client(), other = f.client();
    runtime::TimePoint got_at, others_done_at;
    const runtime::TimePoint start = host.clock().now();
    host.spawner().spawn("waiter", [&] {
      EXPECT_EQ(waiter->get("late"), text("v"));
      got_at = host.clock().now();
    });
    host.run([&] {
      // The other client works while the waiter's WAIT is pending at the server.
      for (int i = 0; i < 100; ++i) other->add("count", 1);
      others_done_at = host.clock().now();
      host.clock().sleep(200ms);
      other->set("late", text("v"));
    });
    host.wait_until([&] { return got_at != runtime::TimePoint{}; }, host.clock().now() + 5s);
    EXPECT_LT(others_done_at - start, 150ms);
    EXPECT_GE(got_at - start, 200ms);
  });
}

TEST(TcpStore, AWaitThatTimesOutNamesTheKeysAndTheServerAndTheClientGoesOn) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto c = f.client(300ms);
    host.run([&] {
      const runtime::TimePoint start = host.clock().now();
      EXPECT_TRUE(throws_error([&] { c->wait({"never"}); }, ErrorCode::timed_out, {"never", f.address(), "300 ms"}));
      EXPECT_LT(host.clock().now() - start, 1s);
      // A late STOP_WAITING must not answer a later query: the client dropped that connection.
      c->set("never", text("now"));
      EXPECT_EQ(c->get("never"), text("now"));
      EXPECT_EQ(c->num_keys(), 1);
    });
  });
}

TEST(TcpStore, VersionsNameValuesAndAStaleTokenNeverWrites) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto a = f.client(), b = f.client();
    host.run([&] {
      EXPECT_EQ(a->get_versioned("s").version, 0u);
      store::CasOutcome first = a->compare_set_version("s", 0, text("one"));
      ASSERT_TRUE(first.written);
      EXPECT_GT(first.current.version, 0u);
      // Another writer moves the key on: a's token is stale and never writes.
      b->set("s", text("two"));
      store::CasOutcome stale = a->compare_set_version("s", first.current.version, text("three"));
      EXPECT_FALSE(stale.written);
      EXPECT_EQ(stale.current.value, text("two"));
      EXPECT_GT(stale.current.version, first.current.version);
      store::CasOutcome fresh = a->compare_set_version("s", stale.current.version, text("three"));
      EXPECT_TRUE(fresh.written);
      EXPECT_GT(fresh.current.version, stale.current.version);
      EXPECT_EQ(b->get("s"), text("three"));
      // From "absent" when present: not written.
      EXPECT_FALSE(a->compare_set_version("s", 0, text("x")).written);
      // An unchanged key keeps its version.
      EXPECT_EQ(a->get_versioned("s").version, fresh.current.version);
      EXPECT_TRUE(a->delete_key("s"));
      EXPECT_EQ(a->get_versioned("s").version, 0u);
      EXPECT_FALSE(a->compare_set_version("s", fresh.current.version, text("y")).written);
    });
  });
}

TEST(TcpStore, AWatchWakesOnAChangeAndNotBeforeAndABoundedOneAnswersUnchanged) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto watcher = f.client(), writer = f.client();
    host.run([&] {
      writer->set("w", text("a"));
      const Versioned v = watcher->get_versioned("w");
      const runtime::TimePoint start = host.clock().now();
      host.spawner().spawn("writer", [&] {
        host.clock().sleep(200ms);
        writer->set("w", text("b"));
      });
      const Versioned changed = watcher->watch("w", v.version);
      EXPECT_GE(host.clock().now() - start, 200ms);
      EXPECT_LT(host.clock().now() - start, 1s);
      EXPECT_EQ(changed.value, text("b"));
      EXPECT_GT(changed.version, v.version);
      // Nothing changes: the bounded watch answers the key as it is at its timeout.
      const runtime::TimePoint quiet_start = host.clock().now();
      const Versioned same = watcher->watch_at_most("w", changed.version, 150ms);
      EXPECT_EQ(same.version, changed.version);
      EXPECT_GE(host.clock().now() - quiet_start, 150ms);
      // A delete is a change too; the unbounded watch times out naming the key and the server.
      host.spawner().spawn("deleter", [&] { writer->delete_key("w"); });
      EXPECT_EQ(watcher->watch("w", changed.version).version, 0u);
      watcher->set_timeout(200ms);
      EXPECT_TRUE(throws_error([&] { watcher->watch("w", 0); }, ErrorCode::timed_out, {"w", f.address()}));
    });
  });
}

// Sends raw bytes on a connection of its own and reports whether the server closed it.
bool server_closes_after(StoreHost& host, uint16_t port, const Bytes& bytes) {
  auto stream = FiberStream::connect(host.io(), "127.0.0.1", port, host.clock().now() + 2s);
  stream->send(bytes);
  try {
    stream->fill(1, host.clock().now() + 2s);
  } catch (const Error& e) {
    return e.code() == ErrorCode::connection_failed;
  }
  return false;
}

TEST(TcpStore, BadInputClosesOnlyThatConnectionWithALogLineNamingThePeer) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto good = f.client();
    host.run([&] {
      good->set("k", text("v"));
      Bytes oversized = {static_cast<uint8_t>(QueryType::set)};
      append_u64(oversized, uint64_t{1} << 40);  // a key of 1 TiB
      EXPECT_TRUE(server_closes_after(host, f.server.port(), oversized));
      EXPECT_TRUE(server_closes_after(host, f.server.port(), Bytes{42}));
      Bytes get_absent = {static_cast<uint8_t>(QueryType::get)};
      append_blob(get_absent, text("/absent"));
      EXPECT_TRUE(server_closes_after(host, f.server.port(), get_absent));
      // The good client's connection, opened before, still works.
      EXPECT_EQ(good->get("k"), text("v"));
      EXPECT_EQ(good->num_keys(), 1);
    });
    ASSERT_EQ(f.logs.size(), 3u);
    EXPECT_NE(f.logs[0].find("closing the connection from 127.0.0.1:"), std::string::npos) << f.logs[0];
    EXPECT_NE(f.logs[0].find("a key of 1099511627776 bytes, over the limit"), std::string::npos) << f.logs[0];
    EXPECT_NE(f.logs[1].find("unknown query type 42"), std::string::npos) << f.logs[1];
    EXPECT_NE(f.logs[2].find("GET of the absent key"), std::string::npos) << f.logs[2];
    EXPECT_EQ(f.server.stats().refused, 3u);
  });
}

TEST(TcpStore, ADeadServerFailsACallNamingHostAndPortWithinItsTimeout) {
  on_thread([](StoreHost& host) {
    uint16_t dead_port = 0;
    {
      tcp::acceptor probe(host.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      dead_port = probe.local_endpoint().port();
    }  // closed: nobody listens there now
    TcpStoreClientOptions o;
    o.port = dead_port;
    TcpStoreClient c(host.io(), o);
    c.set_timeout(500ms);
    host.run([&] {
      const runtime::TimePoint start = host.clock().now();
      const std::string where = "127.0.0.1:" + std::to_string(dead_port);
      EXPECT_TRUE(throws_error([&] { c.get("x"); }, ErrorCode::connection_failed, {where}));
      EXPECT_LT(host.clock().now() - start, 1500ms);
    });
    // A server that dies under a waiting call fails it at once, naming the server.
    Fixture f(host);
    auto waiter = f.client(5s);
    bool failed = false;
    runtime::TimePoint failed_at;
    host.spawner().spawn("waiter", [&] {
      failed = static_cast<bool>(throws_error([&] { waiter->get("never"); }, ErrorCode::connection_failed, {f.address()}));
      failed_at = host.clock().now();
    });
    host.run([&] { host.clock().sleep(100ms); });
    const runtime::TimePoint closed_at = host.clock().now();
    f.server.close();
    host.wait_until([&] { return failed_at != runtime::TimePoint{}; }, host.clock().now() + 5s);
    EXPECT_TRUE(failed);
    EXPECT_LT(failed_at - closed_at, 500ms);
    // The server served this client, so a refusal now means it is gone (its keys with it): the
    // next call fails at once, not at its 5 s timeout, and the client says so. A client that was
    // never served still waits out its deadline for a server that may not listen yet (above).
    host.run([&] {
      const runtime::TimePoint start = host.clock().now();
      EXPECT_TRUE(throws_error([&] { waiter->set("k", {}); }, ErrorCode::connection_failed, {f.address(), "its server is gone"}));
      EXPECT_LT(host.clock().now() - start, 1s);
      EXPECT_TRUE(throws_error([&] { (void)waiter->watch_at_most("k", 0, 5s); }, ErrorCode::connection_failed, {f.address()}));
      EXPECT_LT(host.clock().now() - start, 2s);
    });
    EXPECT_TRUE(waiter->gone());
  });
}

}  // namespace
}  // namespace dagsim::net::tcpstore
