// EtcdHttp: a fiber-blocking HTTP/1.1 client for one etcd endpoint's JSON gateway (etcd 3.4 serves
// its gRPC API as JSON at /v3/...), on Boost.Beast and the calling thread's io_context. EtcdStore
// is its one user.
//
// Promises:
//  - post() and every read of a Stream block the calling fiber only: the socket operation runs on
//    the io_context, its completion handler only wakes the fiber (under the wait's mutex: Note
//    [wake-ups under the lock] in core/runtime/wait.h), and the deadline is a Clock timer.
//  - Every call ends by its deadline: a refused connect is tried again, backing off (kFirstBackoff
//    to kLastBackoff), until the deadline, since nothing was sent; connection_failed when the
//    endpoint still cannot be reached by then or the connection breaks (a refused or timed-out connect, a reset, an early close), timed_out when
//    it was sent but no answer came in time, protocol_error when etcd answered something other
//    than a JSON reply within the bounds (not HTTP, a reply over kMaxReplyBytes or a message over
//    kMaxStreamMessageBytes, JSON past etcd_reply.h's depth and size bounds, not an object; never
//    asked again); each error names the endpoint ("etcd at 127.0.0.1:2379") and the call, and
//    text from the reply is printable().
//  - A fiber that unwinds (node_killed, cancelled) or times out closes the connection it used: a
//    half-read reply never reaches the next caller. Finished connections are kept (up to
//    kIdleConnections) and reused by the next call; a reused connection that the server had
//    closed while idle is retried once on a new one (the request never reached etcd then).
//
// Threading: one EtcdHttp belongs to the thread whose io_context it was given; any number of that
// thread's fibers may call it at once (each takes a connection of its own).
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/runtime/clock.h"

namespace dagsim::net::etcd {

using Json = nlohmann::json;

struct EtcdEndpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 2379;
  // "etcd at HOST:PORT", the name errors carry.
  std::string name() const { return "etcd at " + host + ":" + std::to_string(port); }
};

inline constexpr size_t kIdleConnections = 8;
// A call whose connection is refused (etcd restarting) or lost asks again after this, doubling up
// to kLastBackoff, until its deadline.
inline constexpr runtime::Duration kFirstBackoff = std::chrono::milliseconds(25);
inline constexpr runtime::Duration kLastBackoff = std::chrono::milliseconds(500);
// A watch stream's message (one JSON line) may carry a whole value; past this it is refused.
inline constexpr size_t kMaxStreamMessageBytes = 64 * 1024 * 1024;
// A whole (non-streaming) reply holds a value at most, a few for a multi_get (etcd refuses a
// request over 1.5 MiB by default): past this it is refused, by its Content-Length before its body
// is read, or as its body passes the limit.
inline constexpr uint64_t kMaxReplyBytes = 64 * 1024 * 1024;

class HttpConnection;

class EtcdHttp {
 public:
  EtcdHttp(boost::asio::io_context& io, runtime::Clock& clock, EtcdEndpoint endpoint);
  ~EtcdHttp();
  EtcdHttp(const EtcdHttp&) = delete;
  EtcdHttp& operator=(const EtcdHttp&) = delete;

  // POSTs `body` to `path` ("/v3/kv/range") and returns etcd's JSON reply. `what` names the call
  // in errors ("store get of key k"). REQUIRES: a fiber started by a Spawner.
  // A kept connection that fails before any byte of the reply may have been closed by etcd while
  // idle (the request never reached it) or as it died after applying it: with `idempotent` the
  // request is sent once more on a fresh connection; without, that is connection_failed, and the
  // caller must learn what happened (EtcdStore reads the key back).
  Json post(const std::string& path, const Json& body, runtime::TimePoint deadline, const std::string& what,
            bool idempotent = true);

  // A streaming reply (/v3/watch): one JSON message per line, for as long as the stream is open.
  // Destroying it closes the connection, which ends the stream on etcd's side too.
  class Stream {
   public:
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    // The next message, or nullopt when `deadline` passes first (the stream stays usable).
    std::optional<Json> next(runtime::TimePoint deadline);

   private:
    friend class EtcdHttp;
    Stream(EtcdHttp& owner, std::shared_ptr<HttpConnection> connection, std::string what);
    EtcdHttp& owner_;
    std::shared_ptr<HttpConnection> connection_;
    std::string what_;
    std::string pending_;  // bytes of the body not yet split into messages
  };
  std::unique_ptr<Stream> open_stream(const std::string& path, const Json& body, runtime::TimePoint deadline,
                                      const std::string& what);

  const EtcdEndpoint& endpoint() const { return endpoint_; }
  // Connections opened so far (for tests: reuse keeps this low).
  uint64_t connections_opened() const { return connections_opened_; }

 private:
  friend class HttpConnection;
  std::shared_ptr<HttpConnection> fresh_connection(runtime::TimePoint deadline, const std::string& what);
  std::string fail_text(const std::string& what, const std::string& why) const;

  boost::asio::io_context& io_;
  runtime::Clock& clock_;
  EtcdEndpoint endpoint_;
  std::vector<std::shared_ptr<HttpConnection>> idle_;
  uint64_t connections_opened_ = 0;
};

}  // namespace dagsim::net::etcd
