// FiberStream: one TCP connection that fibers read with deadlines and write without ever blocking,
// on the thread's IoScheduler (io_scheduler.h). The TCPStore server and client (this folder) both
// speak through it.
//
// Reads: fill(n) blocks the calling fiber until n bytes are buffered, its deadline passes, or the
// connection closes; the fiber then decodes from data() and consume()s what it used. A read that
// was still in flight at a deadline stays in flight, and its bytes are kept for the next fill.
// Writes: send() queues and returns; the queue leaves in gathered writes from Asio handlers, and
// a failed write closes the connection. Asio handlers only append bytes, set flags and wake the
// reader (Note [wake-ups under the lock] in core/runtime/wait.h); they never spawn or block.
//
// await_io() is the same idea for one operation (a connect, an accept): start it, block the fiber
// until its handler ran or a deadline passed.
//
// Threading: one thread (the io_context's, which runs the fibers). One fiber reads at a time;
// any fiber may send. The object lives while a handler or a holder needs it (shared_ptr).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/runtime/transport.h"
#include "core/runtime/wait.h"

namespace dagsim::net::tcpstore {

using runtime::Bytes;

// The outcome of an Asio operation awaited by a fiber.
struct IoCompletion {
  runtime::FiberMutex mutex;
  runtime::FiberCondition cv;
  bool done = false;
  boost::system::error_code ec;
  // The handler to give the operation (it keeps this object alive until it ran).
  static auto handler(const std::shared_ptr<IoCompletion>& c) {
    return [c](const boost::system::error_code& ec, auto&&...) {
      runtime::FiberLock lock(c->mutex);
      c->ec = ec;
      c->done = true;
      c->cv.notify_all();
    };
  }
};

// Starts `start(handler)` and blocks the calling fiber until the handler ran (its error code) or
// `deadline` passed (nullopt: the caller cancels the operation; the handler still runs later).
template <typename Start>
std::optional<boost::system::error_code> await_io(Start&& start, std::optional<runtime::TimePoint> deadline) {
  auto c = std::make_shared<IoCompletion>();
  start(IoCompletion::handler(c));
  runtime::FiberLock lock(c->mutex);
  if (!runtime::block_until(c->cv, lock, [&] { return c->done; }, deadline, "tcpstore.io")) return std::nullopt;
  return c->ec;
}

class FiberStream : public std::enable_shared_from_this<FiberStream> {
 public:
  // `peer` names the other end in messages ("host:port").
  FiberStream(boost::asio::ip::tcp::socket socket, std::string peer);
  ~FiberStream();
  FiberStream(const FiberStream&) = delete;
  FiberStream& operator=(const FiberStream&) = delete;

  // Connects to host:port. A refused connection is retried with back-off until `deadline` (the
  // server may not listen yet; PyTorch's client does the same), unless `retry_refused` is false:
  // then a refusal from every address fails at once (a server that was there and now refuses is
  // gone; see TcpStoreClient). Other errors (unreachable) are retried either way. Throws
  // connection_failed naming host:port and the last error, or timed_out naming it when the
  // deadline passes mid-attempt.
  // REQUIRES: a fiber with a Clock (started by a Spawner).
  static std::shared_ptr<FiberStream> connect(boost::asio::io_context& io, const std::string& host, uint16_t port,
                                              runtime::TimePoint deadline, bool retry_refused = true);

  // Blocks until at least `n` bytes are buffered (true) or `deadline` passes (false). Throws
  // connection_failed naming the peer when the connection closed or closes first.
  bool fill(size_t n, std::optional<runtime::TimePoint> deadline);
  std::span<const uint8_t> data() const { return {in_.data() + head_, in_.size() - head_}; }
  void consume(size_t n);

  // Queues `bytes` for the peer; never blocks. Dropped once closed.
  void send(Bytes bytes);
  size_t queued_bytes() const { return queued_bytes_; }
  // Counts this stream's queued bytes into `*total` too, as they rise and fall (a server's bound
  // over all its connections). Call before the first send.
  void count_queued_in(std::shared_ptr<size_t> total);

  // Closes the socket; readers wake and throw. Idempotent: the first reason is kept.
  void close(const std::string& reason);
  bool closed() const { return closed_; }
  const std::string& close_reason() const { return reason_; }
  const std::string& peer() const { return peer_; }
  // Runs once, when the stream closes (from a fiber or a handler): must not block.
  void set_on_close(std::function<void()> on_close) { on_close_ = std::move(on_close); }

 private:
  void start_read(size_t wanted);
  void start_write();
  void set_queued(size_t bytes);  // queued_bytes_, and *total_ by the difference

  boost::asio::ip::tcp::socket socket_;
  std::string peer_;
  Bytes in_;
  size_t head_ = 0;
  Bytes chunk_;  // what the read in flight writes into
  bool reading_ = false;
  std::deque<Bytes> out_;
  std::vector<Bytes> writing_;
  std::vector<boost::asio::const_buffer> buffers_;
  bool write_busy_ = false;
  size_t queued_bytes_ = 0;
  std::shared_ptr<size_t> total_;
  runtime::FiberMutex mutex_;
  runtime::FiberCondition cv_;
  bool closed_ = false;
  std::string reason_;
  std::function<void()> on_close_;
};

}  // namespace dagsim::net::tcpstore
