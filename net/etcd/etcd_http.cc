// EtcdHttp's implementation: connections whose Asio operations wake the waiting fiber, a pool of
// idle keep-alive connections, and the line splitting of a streaming reply. See etcd_http.h.
#include "net/etcd/etcd_http.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <mutex>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/runtime/wait.h"
#include "net/etcd/etcd_reply.h"

namespace dagsim::net::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// One socket operation's outcome, shared with its handler, which may run after the fiber gave up
// (it then finds nobody waiting and only sets the flag).
struct Completion {
  runtime::FiberMutex mutex;
  runtime::FiberCondition cv;
  bool done = false;
  boost::system::error_code ec;
};

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof || ec == http::error::end_of_stream) return "the connection was closed by etcd";
  return ec.message();
}

// Whether reading a reply failed on what the peer sent (not HTTP, or over a bound), rather than on
// the connection: that is the peer's answer, and asking again would only fetch it again.
bool refused_reply(const boost::system::error_code& ec) {
  if (ec.category() != http::make_error_code(http::error::body_limit).category()) return false;
  return ec != http::error::end_of_stream && ec != http::error::partial_message && ec != http::error::short_read &&
         ec != http::error::need_more && ec != http::error::need_buffer;
}

// A field of an error reply, for its message only: any other type reads as absent.
std::string error_field(const Json& reply, const char* field) {
  const auto it = reply.find(field);
  if (it == reply.end()) return "";
  if (it->is_string()) return printable(it->get<std::string>(), 200);
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return "";
}

std::string ms(runtime::Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

// One TCP connection and the buffers of the request in flight on it. Handlers hold it alive, so a
// fiber that gives up (deadline, unwinding) can drop it while an operation is still pending.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  explicit HttpConnection(asio::io_context& io) : socket(io) {}

  void close() {
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  // Starts an operation with `start(handler)` and blocks the fiber until the handler ran: its
  // error code, or nullopt when `deadline` passed first. Unless the operation completed cleanly the
  // socket is closed (a pending operation then ends aborted), so no caller sees half a reply.
  template <typename Start>
  std::optional<boost::system::error_code> await(Start start, runtime::TimePoint deadline) {
    auto completion = std::make_shared<Completion>();
    start([self = shared_from_this(), completion](const boost::system::error_code& ec, auto&&...) {
      std::lock_guard lock(completion->mutex);
      completion->ec = ec;
      completion->done = true;
      completion->cv.notify_all();
    });
    runtime::FiberLock lock(completion->mutex);
    bool done = false;
    try {
      done = runtime::block_until(completion->cv, lock, [&] { return completion->done; }, deadline, "etcd.http");
    } catch (...) {
      close();
      throw;
    }
    if (!done || completion->ec) close();
    if (!done) return std::nullopt;
    return completion->ec;
  }

  void start_request(const EtcdEndpoint& endpoint, const std::string& path, const std::string& payload) {
    request = {http::verb::post, path, 11};
    request.set(http::field::host, endpoint.host + ":" + std::to_string(endpoint.port));
    request.set(http::field::content_type, "application/json");
    request.keep_alive(true);
    request.body() = payload;
    request.prepare_payload();
    parser.emplace();
  }

  tcp::socket socket;
  beast::flat_buffer buffer;
  http::request<http::string_body> request;
  std::optional<http::response_parser<http::string_body>> parser;
  bool reused = false;
};

EtcdHttp::EtcdHttp(asio::io_context& io, runtime::Clock& clock, EtcdEndpoint endpoint)
    : io_(io), clock_(clock), endpoint_(std::move(endpoint)) {}

EtcdHttp::~EtcdHttp() {
  for (const auto& c : idle_) c->close();
}

std::string EtcdHttp::fail_text(const std::string& what, const std::string& why) const {
  return endpoint_.name() + ": " + what + ": " + why;
}

std::shared_ptr<HttpConnection> EtcdHttp::fresh_connection(runtime::TimePoint deadline, const std::string& what) {
  boost::system::error_code parse_error;
  const asio::ip::address address = asio::ip::make_address(endpoint_.host, parse_error);
  if (parse_error) {
    // Only addresses: resolving a name would need the resolver's thread and its own timeout.
    throw errors::invalid_argument(fail_text(what, "the endpoint's host must be an IP address"));
  }
  const tcp::endpoint target(address, endpoint_.port);
  const runtime::TimePoint start = clock_.now();
  // A refused connect sent nothing: an etcd that is restarting gets asked again, backing off,
  // until the call's deadline (a restart costs the call a delay, not a failure).
  runtime::Duration backoff = kFirstBackoff;
  for (;;) {
    auto c = std::make_shared<HttpConnection>(io_);
    const auto ec = c->await([&](auto handler) { c->socket.async_connect(target, std::move(handler)); }, deadline);
    if (!ec) throw errors::connection_failed(fail_text(what, "could not connect within " + ms(clock_.now() - start)));
    if (!*ec) {
      boost::system::error_code ignored;
      c->socket.set_option(tcp::no_delay(true), ignored);
      ++connections_opened_;
      return c;
    }
    if (clock_.now() + backoff >= deadline) {
      throw errors::connection_failed(fail_text(what, "could not connect for " + ms(clock_.now() - start) + " (" + ms(deadline - clock_.now()) + " left): " + ec->message()));
    }
    clock_.sleep(backoff);
    backoff = std::min(backoff * 2, kLastBackoff);
  }
}

Json EtcdHttp::post(const std::string& path, const Json& body, runtime::TimePoint deadline, const std::string& what,
                    bool idempotent) {
  const std::string payload = body.dump();
  const runtime::TimePoint start = clock_.now();
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<HttpConnection> c;
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
      c->reused = true;
    } else {
      c = fresh_connection(deadline, what);
    }
    c->start_request(endpoint_, path, payload);
    c->parser->body_limit(kMaxReplyBytes);
    auto ec = c->await([&](auto handler) { http::async_write(c->socket, c->request, std::move(handler)); }, deadline);
    // The header first: a body over the limit is refused by its Content-Length (body_limit)
    // before any of it is read or reserved. Boost 1.74's whole-message read instead reports such a
    // body as a partial message once the peer closes, after reserving the length it claimed.
    if (ec && !*ec) {
      ec = c->await([&](auto handler) { http::async_read_header(c->socket, c->buffer, *c->parser, std::move(handler)); },
                    deadline);
    }
    if (ec && !*ec && !c->parser->is_done()) {
      ec = c->await([&](auto handler) { http::async_read(c->socket, c->buffer, *c->parser, std::move(handler)); },
                    deadline);
    }
    if (!ec) throw errors::timed_out(fail_text(what, "no answer within " + ms(clock_.now() - start)));
    if (*ec) {
      // A kept connection etcd closed while it sat idle never delivered the request; but one that
      // broke as etcd died may have, after etcd applied it. Only a request that can land twice
      // is sent again (the property test found a compare-and-set told "not written" by its own
      // resent copy, which failed on the version its first copy had made).
      if (idempotent && c->reused && attempt == 0 && !c->parser->got_some()) continue;
      if (refused_reply(*ec)) {
        throw errors::protocol_error(fail_text(what, "a reply refused: " + error_text(*ec) + " (the limit of a reply is " +
                                                         std::to_string(kMaxReplyBytes >> 20) + " MiB)"));
      }
      throw errors::connection_failed(fail_text(what, error_text(*ec)));
    }
    http::response<http::string_body>& reply = c->parser->get();
    const unsigned status = reply.result_int();
    const bool keep = reply.keep_alive();
    std::string text = std::move(reply.body());
    if (keep && idle_.size() < kIdleConnections) {
      idle_.push_back(std::move(c));
    } else {
      c->close();
    }
    Json parsed;
    try {
      parsed = parse_reply(text);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::protocol_error) throw;
      throw errors::protocol_error(fail_text(what, "HTTP " + std::to_string(status) + " with " + e.detail()));
    }
    if (status != 200) {
      std::string message = error_field(parsed, "message");
      if (message.empty()) message = error_field(parsed, "error");
      if (message.empty()) message = "no message";
      const std::string code = error_field(parsed, "code");
      // gRPC's Unavailable (14) and DeadlineExceeded (4): etcd is there but cannot serve (no
      // leader, no quorum), which a caller treats as an unreachable store.
      if (status == 503 || status == 504 || code == "14" || code == "4") {
        throw errors::connection_failed(fail_text(what, "etcd cannot serve: " + message));
      }
      throw errors::protocol_error(fail_text(what, "HTTP " + std::to_string(status) + ": " + message));
    }
    return parsed;
  }
}

std::unique_ptr<EtcdHttp::Stream> EtcdHttp::open_stream(const std::string& path, const Json& body,
                                                        runtime::TimePoint deadline, const std::string& what) {
  const runtime::TimePoint start = clock_.now();
  std::shared_ptr<HttpConnection> c = fresh_connection(deadline, what);
  c->start_request(endpoint_, path, body.dump());
  // The stream's body has no end; each message is bounded in Stream::next instead.
  c->parser->body_limit(std::numeric_limits<uint64_t>::max());
  auto ec = c->await([&](auto handler) { http::async_write(c->socket, c->request, std::move(handler)); }, deadline);
  if (ec && !*ec) {
    ec = c->await([&](auto handler) { http::async_read_header(c->socket, c->buffer, *c->parser, std::move(handler)); },
                  deadline);
  }
  if (!ec) throw errors::timed_out(fail_text(what, "no answer within " + ms(clock_.now() - start)));
  if (*ec && refused_reply(*ec)) throw errors::protocol_error(fail_text(what, "a reply refused: " + error_text(*ec)));
  if (*ec) throw errors::connection_failed(fail_text(what, error_text(*ec)));
  if (c->parser->get().result_int() != 200) {
    const unsigned status = c->parser->get().result_int();
    c->close();
    throw errors::protocol_error(fail_text(what, "HTTP " + std::to_string(status) + " to a watch"));
  }
  return std::unique_ptr<Stream>(new Stream(*this, std::move(c), what));
}

EtcdHttp::Stream::Stream(EtcdHttp& owner, std::shared_ptr<HttpConnection> connection, std::string what)
    : owner_(owner), connection_(std::move(connection)), what_(std::move(what)) {}

EtcdHttp::Stream::~Stream() { connection_->close(); }

std::optional<Json> EtcdHttp::Stream::next(runtime::TimePoint deadline) {
  HttpConnection& c = *connection_;
  for (;;) {
    std::string& body = c.parser->get().body();
    pending_ += body;
    body.clear();
    const size_t end = pending_.find('\n');
    if (end != std::string::npos) {
      Json message;
      try {
        message = parse_reply(std::string_view(pending_).substr(0, end));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::protocol_error) throw;
        throw errors::protocol_error(owner_.fail_text(what_, "a watch message: " + e.detail()));
      }
      pending_.erase(0, end + 1);
      return message;
    }
    if (pending_.size() > kMaxStreamMessageBytes) {
      throw errors::protocol_error(owner_.fail_text(what_, "a watch message over " + std::to_string(kMaxStreamMessageBytes) + " bytes"));
    }
    if (c.parser->is_done()) throw errors::connection_failed(owner_.fail_text(what_, "etcd ended the watch stream"));
    const auto ec = c.await([&](auto handler) { http::async_read_some(c.socket, c.buffer, *c.parser, std::move(handler)); },
                            deadline);
    if (!ec) return std::nullopt;
    if (*ec && refused_reply(*ec)) throw errors::protocol_error(owner_.fail_text(what_, "a watch stream refused: " + error_text(*ec)));
    if (*ec) throw errors::connection_failed(owner_.fail_text(what_, error_text(*ec)));
  }
}

}  // namespace dagsim::net::etcd
