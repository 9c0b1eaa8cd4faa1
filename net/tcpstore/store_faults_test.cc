// Tests of the store's fault layer (store_faults.h): the fault file's reader and its bounds, the
// decision (ops filter, probability 0 and 1, the seed), and the real server on a loopback port
// with dagsim's TCPStore client: a delay makes the reply come at least delay_ms late, a drop makes
// the client's call time out (and the query is not applied), a reset closes the connection.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/base/error.h"
#include "core/base/throws_error_test_util.h"
#include "net/tcpstore/store_faults.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/tcp_store_client.h"
#include "net/tcpstore/tcp_store_server.h"

namespace dagsim::net::tcpstore {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

bool refused(std::string_view file, std::initializer_list<std::string> fragments) {
  return static_cast<bool>(throws_error([&] { (void)parse_store_faults(file); }, ErrorCode::invalid_argument, fragments));
}

TEST(StoreFaultsFile, ReadsEveryField) {
  const auto rules = parse_store_faults(
      R"({"faults": [{"kind": "delay", "ops": ["compare_set", "get"], "probability": 0.5, "delay_ms": 250, "name": "line 7"},
                     {"kind": "drop"}, {"kind": "reset", "ops": ["delete_key"]}]})");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].kind, StoreFaultRule::Kind::delay);
  EXPECT_EQ(rules[0].delay, 250ms);
  EXPECT_EQ(rules[0].probability, 0.5);
  EXPECT_EQ(rules[0].name, "line 7");
  EXPECT_TRUE(rules[0].matches(QueryType::compare_set));
  EXPECT_TRUE(rules[0].matches(QueryType::get));
  EXPECT_FALSE(rules[0].matches(QueryType::set));
  EXPECT_EQ(rules[1].probability, 1.0);
  for (uint8_t t = 0; t <= kLastQueryType; ++t) EXPECT_TRUE(rules[1].matches(static_cast<QueryType>(t)));
  EXPECT_TRUE(rules[2].matches(QueryType::delete_key));
  EXPECT_TRUE(parse_store_faults(R"({"faults": []})").empty());
}

TEST(StoreFaultsFile, RefusesWhatItCannotUseSayingWhy) {
  EXPECT_TRUE(refused("", {"not JSON"}));
  EXPECT_TRUE(refused("[]", {"not a JSON object"}));
  EXPECT_TRUE(refused(R"({"rules": []})", {"unknown key", "rules"}));
  EXPECT_TRUE(refused(R"({})", {"\"faults\": required"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "delay"}]})", {"faults[0].delay_ms", "required"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "delay", "delay_ms": 0}]})", {"faults[0].delay_ms", "1 .."}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "delay", "delay_ms": 18446744073709551615}]})", {"faults[0].delay_ms"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "delay", "delay_ms": 1.5}]})", {"faults[0].delay_ms", "whole"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "delay_ms": 5}]})", {"applies only to kind \"delay\""}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drip"}]})", {"faults[0].kind", "drip"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "ops": ["GET"]}]})", {"faults[0].ops[0]", "names no TCPStore query"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "ops": ["get", "get"]}]})", {"faults[0].ops[1]", "twice"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "ops": "get"}]})", {"faults[0].ops", "not an array"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "probability": 1.01}]})", {"probability", "[0, 1]"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "probability": -0.0001}]})", {"probability", "[0, 1]"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "probability": "1"}]})", {"probability", "not a number"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "extra": 1}]})", {"faults[0]", "unknown key", "extra"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "name": 3}]})", {"faults[0].name"}));
  EXPECT_TRUE(refused(R"({"faults": [7]})", {"faults[0] is not an object"}));
  // Bounds: nesting (refused before the parser builds it), size, rules, a NUL.
  EXPECT_TRUE(refused(std::string(100000, '['), {"bytes; at most"}));
  EXPECT_TRUE(refused(std::string(1000, '[') + std::string(1000, ']'), {"nested deeper than 4"}));
  EXPECT_TRUE(refused(R"({"faults": [{"kind": "drop", "ops": [["get"]]}]})", {"nested deeper"}));
  // Brackets inside strings do not count.
  EXPECT_NO_THROW(parse_store_faults(R"({"faults": [{"kind": "drop", "name": "[[[[[[{{{{\"]]"}]})"));
  std::string many = R"({"faults": [)";
  for (size_t i = 0; i <= kMaxFaultRules; ++i) many += std::string(i ? "," : "") + R"({"kind":"drop"})";
  EXPECT_TRUE(refused(many + "]}", {"257 faults; at most 256"}));
  EXPECT_TRUE(refused(std::string("{\"faults\": []}\0", 15), {"NUL"}));
}

TEST(StoreFaultsFile, AnAbsentFileIsNoFaultsAndABadOneNamesItsPath) {
  const std::string dir = ::testing::TempDir();
  EXPECT_TRUE(read_store_faults(dir + "/no-such-faults.json").empty());
  const std::string path = dir + "/bad-faults.json";
  std::ofstream(path) << R"({"faults": [{"kind": "drop", "probability": 2}]})";
  EXPECT_TRUE(throws_error([&] { (void)read_store_faults(path); }, ErrorCode::invalid_argument, {path, "probability"}));
}

TEST(StoreFaultsDecision, OpsFilterProbabilityAndSeed) {
  StoreFaults faults(7);
  EXPECT_FALSE(faults.decide(QueryType::get));  // no rules
  StoreFaultRule never;
  never.probability = 0;
  StoreFaultRule cas;
  cas.kind = StoreFaultRule::Kind::reset;
  cas.ops = 1u << static_cast<unsigned>(QueryType::compare_set);
  faults.set({never, cas});
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(faults.decide(QueryType::get));
  const FaultDecision hit = faults.decide(QueryType::compare_set);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit.rule->kind, StoreFaultRule::Kind::reset);  // the never-rule came first and never hits
  // A half: some hit, some not, and the same seed draws the same sequence.
  StoreFaultRule half;
  half.probability = 0.5;
  StoreFaults a(42), b(42);
  a.set({half});
  b.set({half});
  std::string sa, sb;
  for (int i = 0; i < 200; ++i) {
    sa += a.decide(QueryType::set) ? '1' : '0';
    sb += b.decide(QueryType::set) ? '1' : '0';
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa.find('1'), std::string::npos);
  EXPECT_NE(sa.find('0'), std::string::npos);
}

// A server with a fault layer, and clients, on one thread's StoreHost.
struct Fixture {
  explicit Fixture(StoreHost& host)
      : host(host), table(std::make_shared<store::KeyValueTable>()), faults(std::make_shared<StoreFaults>(1)),
        server(host.io(), host.spawner(), tcp::acceptor(host.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
               table, options()) {}
  TcpStoreServerOptions options() {
    TcpStoreServerOptions o;
    o.log = [this](const std::string& line) { logs.push_back(line); };
    o.faults = faults;
    return o;
  }
  std::unique_ptr<TcpStoreClient> client(runtime::Duration timeout = 2s) {
    TcpStoreClientOptions o;
    o.port = server.port();
    auto c = std::make_unique<TcpStoreClient>(host.io(), o);
    c->set_timeout(timeout);
    return c;
  }
  bool logged(const std::string& fragment) const {
    for (const std::string& l : logs) {
      if (l.find(fragment) != std::string::npos) return true;
    }
    return false;
  }
  StoreHost& host;
  std::vector<std::string> logs;
  std::shared_ptr<store::KeyValueTable> table;
  std::shared_ptr<StoreFaults> faults;
  TcpStoreServer server;
};

void on_thread(const std::function<void(StoreHost&)>& body) {
  std::thread thread([&] {
    StoreHost host("test", [](const std::string& line) { ADD_FAILURE() << line; });
    body(host);
  });
  thread.join();
}

StoreFaultRule rule(StoreFaultRule::Kind kind, std::initializer_list<QueryType> ops) {
  StoreFaultRule r;
  r.kind = kind;
  for (QueryType t : ops) r.ops |= static_cast<uint16_t>(1u << static_cast<unsigned>(t));
  return r;
}

TEST(StoreFaultsServer, ADelayMakesTheReplyAtLeastThatLate) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto c = f.client(10s);
    StoreFaultRule delay = rule(StoreFaultRule::Kind::delay, {QueryType::compare_set});
    delay.delay = 300ms;
    f.faults->set({delay});
    host.run([&] {
      auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(c->add("n", 1), 1);  // not a compare_set: not delayed (no upper bound asserted)
      t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(c->compare_set("k", {}, text("v")), text("v"));
      EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
    });
    EXPECT_TRUE(f.logged("fault delay on COMPARE_SET"));
    EXPECT_EQ(f.table->get("/k"), text("v"));
  });
}

TEST(StoreFaultsServer, ADropMakesTheClientsCallTimeOutAndIsNotApplied) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto c = f.client(400ms);
    f.faults->set({rule(StoreFaultRule::Kind::drop, {QueryType::compare_set})});
    host.run([&] {
      EXPECT_TRUE(throws_error([&] { c->compare_set("k", {}, text("v")); }, ErrorCode::timed_out, {}));
      f.faults->set({});
      EXPECT_EQ(c->add("n", 2), 2);  // the client connects again and is served
    });
    EXPECT_FALSE(f.table->get("/k").has_value());
    EXPECT_TRUE(f.logged("fault drop on COMPARE_SET"));
  });
}

TEST(StoreFaultsServer, AResetClosesTheConnectionAtThatQuery) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto c = f.client(5s);
    f.faults->set({rule(StoreFaultRule::Kind::reset, {QueryType::add})});
    host.run([&] {
      c->set("a", text("1"));  // a set passes
      EXPECT_TRUE(throws_error([&] { c->add("n", 1); }, ErrorCode::connection_failed, {}));
      f.faults->set({});
      EXPECT_EQ(c->add("n", 1), 1);  // not applied the first time
    });
    EXPECT_EQ(f.table->get("/a"), text("1"));
    EXPECT_TRUE(f.logged("fault reset on ADD"));
  });
}

TEST(StoreFaultsServer, ProbabilityZeroNeverHits) {
  on_thread([](StoreHost& host) {
    Fixture f(host);
    auto c = f.client(2s);
    StoreFaultRule never = rule(StoreFaultRule::Kind::reset, {});
    never.probability = 0;
    f.faults->set({never});
    host.run([&] {
      for (int i = 1; i <= 200; ++i) EXPECT_EQ(c->add("n", 1), i);
    });
    EXPECT_EQ(f.faults->hits(), 0u);
    EXPECT_FALSE(f.logged("fault"));
  });
}

}  // namespace
}  // namespace dagsim::net::tcpstore
