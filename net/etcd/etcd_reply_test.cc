// Tests of reading etcd's replies (etcd_reply.h) and of EtcdStore against an endpoint that answers
// what it likes (issue 49, etcd_hostile_reply_exit3): every bound refuses while parsing, every
// field is read at its type, and a hostile reply is protocol_error naming the endpoint, the call
// and what was wrong, at once (never asked again, never a nlohmann exception, memory bounded).
#include "net/etcd/etcd_reply.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "core/base/printable.h"
#include "core/base/throws_error_test_util.h"
#include "net/etcd/etcd_store.h"
#include "net/etcd/real_runtime_harness.h"

namespace dagsim::net::etcd {
namespace {

using namespace std::chrono_literals;

TEST(EtcdReply, ParsingRefusesDepthAndSizeWhileItParses) {
  EXPECT_TRUE(throws_error([] { parse_reply(std::string(100'000, '[')); }, ErrorCode::protocol_error, {"nested deeper than 32"}));
  EXPECT_TRUE(throws_error([] { parse_reply("{\"a\":" + std::string(40, '[')); }, ErrorCode::protocol_error, {"nested deeper"}));
  std::string deep = "{\"a\":" + std::string(31, '[') + std::string(31, ']') + "}";
  EXPECT_NO_THROW(parse_reply(deep)) << "32 levels are a reply";
  std::string wide = "{\"a\":[0";
  for (uint64_t i = 0; i < kMaxReplyValues; ++i) wide += ",0";
  EXPECT_TRUE(throws_error([&] { parse_reply(wide + "]}"); }, ErrorCode::protocol_error, {"more than 1048576 values"}));
  EXPECT_TRUE(throws_error([] { parse_reply("\x00\xffnot json"); }, ErrorCode::protocol_error, {"not JSON"}));
  EXPECT_TRUE(throws_error([] { parse_reply("[1]"); }, ErrorCode::protocol_error, {"a reply that is an array, not an object"}));
}

TEST(EtcdReply, EveryFieldIsReadAtItsTypeAndNamedWhenItIsNot) {
  const std::string where = "etcd at 127.0.0.1:1: store get of key k";
  const auto reply = [&](const std::string& text) { return Reply(parse_reply(text), where); };
  const auto refused = [&](auto read, std::vector<std::string> says) {
    says.push_back(where);
    return throws_error(read, ErrorCode::protocol_error, says);
  };
  EXPECT_TRUE(refused([&] { reply(R"({"succeeded": "yes"})").succeeded(); }, {"succeeded is a string, not a boolean"}));
  EXPECT_FALSE(reply("{}").succeeded()) << "proto3 leaves false out";
  EXPECT_TRUE(refused([&] { reply(R"({"header": 5})").revision(); }, {"header is a number, not an object"}));
  EXPECT_TRUE(refused([&] { reply(R"({"header": {"revision": "x"}})").revision(); }, {"revision is x, not an unsigned number"}));
  EXPECT_TRUE(refused([&] { reply(R"({"count": "99999999999999999999999"})").number("count"); }, {"not an unsigned number"}));
  EXPECT_TRUE(refused([&] { reply(R"({"count": -1})").number("count"); }, {"count is a number, not an unsigned number"}));
  EXPECT_TRUE(refused([&] { reply(R"({"kvs": 5})").first_kv(); }, {"kvs is a number, not an array"}));
  EXPECT_TRUE(refused([&] { reply(R"({"kvs": [5]})").first_kv(); }, {"is in a number, not an object"}));
  EXPECT_TRUE(refused([&] { reply(R"({"kvs": [{"value": 5, "mod_revision": "1"}]})").first_kv(); }, {"value is a number, not a string"}));
  EXPECT_TRUE(refused([&] { reply(R"({"kvs": [{"value": "!!!!", "mod_revision": "1"}]})").first_kv(); }, {"not base64"}));
  EXPECT_TRUE(refused([&] { reply(R"({"kvs": [{"value": ""}]})").first_kv(); }, {"kv has no mod_revision"}));
  EXPECT_TRUE(refused([&] { reply(R"({"responses": [{"response_range": 5}]})").txn_range(0); }, {"response_range is a number"}));
  EXPECT_TRUE(refused([&] { reply(R"({"responses": [{"response_put": {}}]})").txn_range(0); }, {"response 0 is not a response_range"}));
  EXPECT_TRUE(refused([&] { reply(R"({"responses": []})").txn_range(1); }, {"responses hold 0, not response 1"}));
  const KeyState found = reply(R"({"responses": [{"response_range": {"kvs": [{"value": "YmFy", "mod_revision": "7"}]}}]})").txn_range(0);
  EXPECT_EQ(found.mod_revision, 7u);
  EXPECT_EQ(std::string(found.value.begin(), found.value.end()), "bar");
}

TEST(EtcdReply, AWatchMessageIsReadAtItsTypesAndItsErrorEscaped) {
  const auto watch = [](const std::string& text) { return Reply(parse_reply(text), "w").watch(); };
  const WatchMessage m = watch(R"({"result": {"created": true, "events": [{"kv": {"value": "eA==", "mod_revision": "4"}},
                                                                          {"type": "DELETE", "kv": {}}]}})");
  EXPECT_TRUE(m.created);
  EXPECT_FALSE(m.canceled);
  ASSERT_EQ(m.events.size(), 2u);
  EXPECT_EQ(m.events[0].mod_revision, 4u);
  EXPECT_FALSE(m.events[1].present());
  EXPECT_TRUE(throws_error([&] { watch(R"({"result": {"canceled": "no"}})"); }, ErrorCode::protocol_error, {"canceled is a string"}));
  EXPECT_TRUE(throws_error([&] { watch(R"({"result": {"events": {}}})"); }, ErrorCode::protocol_error, {"events is an object, not an array"}));
  EXPECT_TRUE(throws_error([&] { watch(R"({"result": {"events": [{"type": "MOVE"}]}})"); }, ErrorCode::protocol_error,
                           {"event type is MOVE, not PUT or DELETE"}));
  EXPECT_TRUE(throws_error([&] { watch(R"({"result": {"events": [{"kv": {"value": ""}}]}})"); }, ErrorCode::protocol_error,
                           {"PUT event has no mod_revision"}));
  const WatchMessage failed = watch("{\"error\": {\"message\": \"\\u001b[2Jgone\"}}");
  ASSERT_TRUE(failed.error.has_value());
  EXPECT_EQ(failed.error->find('\x1b'), std::string::npos) << *failed.error;
}

// An endpoint that answers every request with `response` (the whole HTTP response, written as is)
// and closes the connection; it counts the requests.
class HostileEndpoint {
 public:
  explicit HostileEndpoint(std::string response) : response_(std::move(response)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(listener_, nullptr, nullptr);
        if (c < 0) return;
        std::string request;
        char buffer[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          const ssize_t n = ::recv(c, buffer, sizeof buffer, 0);
          if (n <= 0) break;
          request.append(buffer, static_cast<size_t>(n));
        }
        ++requests_;
        for (size_t sent = 0; sent < response_.size();) {
          const ssize_t n = ::send(c, response_.data() + sent, response_.size() - sent, MSG_NOSIGNAL);
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
        ::close(c);
      }
    });
  }
  ~HostileEndpoint() {
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    thread_.join();
  }
  uint16_t port() const { return port_; }
  int requests() const { return requests_; }

  static std::string answer(const std::string& body, const std::string& length = "") {
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
           (length.empty() ? std::to_string(body.size()) : length) + "\r\n\r\n" + body;
  }

 private:
  std::string response_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST(EtcdReply, AHostileEndpointIsAProtocolErrorNamingItAtOnce) {
  struct Case {
    std::string response;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {HostileEndpoint::answer(R"({"header": {"revision": "5"}, "succeeded": "yes", "responses": [{"response_range": 5}]})"),
       {"store compare_set_version of key k", "succeeded is a string, not a boolean"}},
      // A body the size of the repro's 200 MB of "[": refused by its Content-Length, unread.
      {HostileEndpoint::answer("[[[[", "200000000"), {"a reply refused", "64 MiB"}},
      {HostileEndpoint::answer(std::string(1'000'000, '[')), {"nested deeper than 32"}},
      {HostileEndpoint::answer(R"({"responses": [{"response_range": {"kvs": 5}}]})"), {"kvs is a number, not an array"}},
      {HostileEndpoint::answer(R"({"responses": []})"), {"responses hold 0, not response 0"}},
      {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: \x01\x02\r\n\r\n{}{}{", {"a reply refused"}},
  };
  for (const Case& c : cases) {
    HostileEndpoint endpoint(c.response);
    run_on_real_runtime(1, 30s, [&](RealRuntime& rt) {
      EtcdStore store(rt.io, rt.clock, EtcdStoreOptions{{"127.0.0.1", endpoint.port()}, "/h/"});
      store.set_timeout(10s);
      const auto start = rt.clock.now();
      std::vector<std::string> says = c.says;
      says.push_back("etcd at 127.0.0.1:" + std::to_string(endpoint.port()));
      EXPECT_TRUE(throws_error([&] { (void)store.compare_set_version("k", 1, Bytes{'v'}); }, ErrorCode::protocol_error, says))
          << printable(c.response, 80);
      EXPECT_LT(rt.clock.now() - start, 5s) << "refused at once, not asked again until the timeout";
    });
    EXPECT_EQ(endpoint.requests(), 1) << "one request, never asked again";
  }
}

}  // namespace
}  // namespace dagsim::net::etcd
