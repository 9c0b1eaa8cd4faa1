#include "net/tcpstore/fiber_stream.h"

#include <boost/asio/write.hpp>

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/clock.h"
#include "core/runtime/fiber_context.h"

namespace dagsim::net::tcpstore {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// A read asks for what the frame still needs, within these bounds. The lower one is what every
// idle connection holds while it waits for its next query: a store serving 10,000 of them held
// 710 MB with 64 KiB here.
constexpr size_t kMinRead = 4 * 1024;
constexpr size_t kMaxRead = 16 * 1024 * 1024;
// A buffer grown past this for a large frame is given back once that frame is consumed, so a
// connection that once sent a 256 MiB value does not keep its memory while idle.
constexpr size_t kKeptCapacity = 1024 * 1024;

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "closed by the peer";
  return ec.message();
}

runtime::Clock& fiber_clock() {
  runtime::FiberContext* self = runtime::current_fiber();
  if (self == nullptr || self->clock == nullptr) {
    throw errors::internal_error("tcpstore: connecting needs a fiber with a Clock (one started by a Spawner)");
  }
  return *self->clock;
}

// The addresses of `host`: a literal at once, a name through Asio's resolver (which runs
// getaddrinfo off this thread and completes here).
std::vector<tcp::endpoint> resolve(asio::io_context& io, const std::string& host, uint16_t port,
                                   runtime::TimePoint deadline, const std::string& where) {
  boost::system::error_code ec;
  const asio::ip::address literal = asio::ip::make_address(host, ec);
  if (!ec) return {tcp::endpoint(literal, port)};
  auto resolver = std::make_shared<tcp::resolver>(io);
  auto found = std::make_shared<std::vector<tcp::endpoint>>();
  const std::optional<boost::system::error_code> done = await_io(
      [&](auto handler) {
        resolver->async_resolve(host, std::to_string(port),
                                [resolver, found, handler](const boost::system::error_code& e, tcp::resolver::results_type r) {
                                  for (const auto& entry : r) found->push_back(entry.endpoint());
                                  handler(e);
                                });
      },
      deadline);
  if (!done) {
    resolver->cancel();
    throw errors::timed_out("resolving the store's host " + where + " timed out");
  }
  if (*done || found->empty()) {
    throw errors::connection_failed("cannot resolve the store's host " + where + ": " + error_text(*done));
  }
  return *found;
}

}  // namespace

FiberStream::FiberStream(tcp::socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);  // replies are small and awaited one by one
}

FiberStream::~FiberStream() {
  boost::system::error_code ignored;
  socket_.close(ignored);
}

std::shared_ptr<FiberStream> FiberStream::connect(asio::io_context& io, const std::string& host, uint16_t port,
                                                  runtime::TimePoint deadline, bool retry_refused) {
  const std::string where = host + ":" + std::to_string(port);
  runtime::Clock& clock = fiber_clock();
  const std::vector<tcp::endpoint> endpoints = resolve(io, host, port, deadline, where);
  runtime::Duration backoff = std::chrono::milliseconds(10);
  std::string last_error;
  for (;;) {
    bool all_refused = true;
    for (const tcp::endpoint& endpoint : endpoints) {
      auto socket = std::make_shared<tcp::socket>(io);
      const std::optional<boost::system::error_code> done =
          await_io([&](auto handler) { socket->async_connect(endpoint, [socket, handler](auto ec) { handler(ec); }); },
                   deadline);
      if (!done) {
        boost::system::error_code ignored;
        socket->close(ignored);
        throw errors::timed_out("connecting to the store at " + where + " timed out" +
                                (last_error.empty() ? "" : " (last error: " + last_error + ")"));
      }
      if (!*done) return std::make_shared<FiberStream>(std::move(*socket), where);
      last_error = error_text(*done);
      all_refused = all_refused && *done == asio::error::connection_refused;
    }
    if (!retry_refused && all_refused) {
      throw errors::connection_failed("cannot connect to the store at " + where + ": " + last_error);
    }
    // Refused (nobody listens yet) or unreachable: try again until the deadline, as PyTorch does.
    if (clock.now() + backoff >= deadline) {
      throw errors::connection_failed("cannot connect to the store at " + where + ": " + last_error);
    }
    clock.sleep_until(clock.now() + backoff);
    backoff = std::min<runtime::Duration>(backoff * 2, std::chrono::milliseconds(500));
  }
}

bool FiberStream::fill(size_t n, std::optional<runtime::TimePoint> deadline) {
  const std::shared_ptr<FiberStream> self = shared_from_this();  // handlers may close and drop holders
  runtime::FiberLock lock(mutex_);
  while (in_.size() - head_ < n) {
    if (closed_) throw errors::connection_failed("connection to " + peer_ + " failed: " + reason_);
    if (!reading_) start_read(n - (in_.size() - head_));
    if (!runtime::block_until(cv_, lock, [&] { return !reading_ || closed_; }, deadline, "tcpstore.read")) return false;
  }
  return true;
}

void FiberStream::consume(size_t n) {
  head_ += std::min(n, in_.size() - head_);
  // Compact once the consumed front is most of the buffer, so memory stays about one frame.
  if (head_ == in_.size()) {
    if (in_.capacity() > kKeptCapacity) {
      Bytes().swap(in_);
    } else {
      in_.clear();
    }
    head_ = 0;
  } else if (head_ > in_.size() / 2) {
    in_.erase(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(head_));
    head_ = 0;
  }
}

void FiberStream::start_read(size_t wanted) {
  DAGSIM_ASSERT(!reading_);  // one read at a time: a second would interleave bytes in in_
  DAGSIM_ASSERT(!closed_);
  reading_ = true;
  const size_t size = std::clamp(wanted, kMinRead, kMaxRead);
  if (chunk_.capacity() > kKeptCapacity && size <= kKeptCapacity) Bytes().swap(chunk_);
  chunk_.resize(size);
  socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](const boost::system::error_code& ec, size_t got) {
    {
      runtime::FiberLock lock(self->mutex_);
      self->reading_ = false;
      if (!ec) self->in_.insert(self->in_.end(), self->chunk_.begin(), self->chunk_.begin() + static_cast<ptrdiff_t>(got));
      self->cv_.notify_all();
    }
    if (ec) self->close(error_text(ec));
  });
}

void FiberStream::send(Bytes bytes) {
  if (closed_ || bytes.empty()) return;
  set_queued(queued_bytes_ + bytes.size());
  out_.push_back(std::move(bytes));
  start_write();
}

void FiberStream::start_write() {
  if (write_busy_ || out_.empty() || closed_) return;
  write_busy_ = true;
  writing_.assign(std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end()));
  out_.clear();
  buffers_.clear();
  for (const Bytes& b : writing_) buffers_.emplace_back(b.data(), b.size());
  asio::async_write(socket_, buffers_, [self = shared_from_this()](const boost::system::error_code& ec, size_t written) {
    self->write_busy_ = false;
    self->set_queued(self->queued_bytes_ - std::min(self->queued_bytes_, written));
    self->writing_.clear();
    if (ec) return self->close("write failed: " + error_text(ec));
    self->start_write();
  });
}

void FiberStream::count_queued_in(std::shared_ptr<size_t> total) {
  DAGSIM_ASSERT(total_ == nullptr && queued_bytes_ == 0);  // from the start, once
  total_ = std::move(total);
}

void FiberStream::set_queued(size_t bytes) {
  if (total_ != nullptr) {
    DAGSIM_ASSERT(*total_ >= queued_bytes_);
    *total_ = *total_ - queued_bytes_ + bytes;
  }
  queued_bytes_ = bytes;
}

void FiberStream::close(const std::string& reason) {
  {
    runtime::FiberLock lock(mutex_);
    if (closed_) return;
    closed_ = true;
    reason_ = reason;
    cv_.notify_all();
  }
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  out_.clear();
  set_queued(0);
  DAGSIM_ASSERT_EQ(queued_bytes_, size_t{0});  // what it held is no longer counted in the total
  if (on_close_) {
    std::function<void()> on_close = std::move(on_close_);
    on_close_ = nullptr;
    on_close();
  }
}

}  // namespace dagsim::net::tcpstore
