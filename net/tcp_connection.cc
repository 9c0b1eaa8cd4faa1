// One TCP connection of TcpTransport: see tcp_connection.h.
#include "net/tcp_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "net/secure_channel.h"
#include "net/tcp_transport_impl.h"

namespace dagsim::net {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Padding leaves from this page, as many times as it takes.
constexpr size_t kZeroPageBytes = 64 * 1024;
const std::array<uint8_t, kZeroPageBytes> kZeroPage{};

// Note [MAC as it goes]: an envelope's MAC trails its payload, so a sender need not MAC a whole
// payload before its first byte leaves. A connection MACs at most kMacAheadBytes of payload ahead
// of the socket: the receiver (another process, another core) reads and verifies the first
// pieces while the sender still MACs the rest. MACing 1 MiB whole first added its full cost to
// every large message's latency. Small envelopes still leave many per write.
constexpr size_t kMacAheadBytes = 128 * 1024;
// The same bound for TLS: a connection encrypts at most this much ahead of the socket, so a
// large message's first records are on their way (and being decrypted) while the rest is
// encrypted, and what waits encrypted stays small whatever the message or its padding.
constexpr size_t kEncryptAheadBytes = 128 * 1024;
// TLS reads go through this much buffer (records are at most 16 KiB of plaintext).
constexpr size_t kCipherReadBytes = 64 * 1024;

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "closed by the peer";
  return ec.message();
}

}  // namespace

Connection::Connection(std::weak_ptr<TcpTransport::Impl> owner, tcp::socket socket, Opening opening,
                       runtime::Duration timeout, EnvelopeLimits limits, bool trusted)
    : owner_(std::move(owner)), socket_(std::move(socket)), handshake_(std::move(opening)),
      timer_(socket_.get_executor()), timeout_(timeout), limits_(limits), trusted_(trusted) {
  DAGSIM_ASSERT(socket_.is_open());
  DAGSIM_ASSERT(timeout_ > runtime::Duration::zero());
  if (handshake_.tls()) cipher_in_.resize(kCipherReadBytes);
}

void Connection::set_state(ConnectionState to) {
  transition(state_, to, ConnectionFacts{established(), sealer_.has_value() && decoder_.has_value(), socket_.is_open()});
}

void Connection::start(runtime::Duration handshake_timeout) {
  DAGSIM_ASSERT(state_ == ConnectionState::handshaking);
  DAGSIM_ASSERT(queue_.empty() && !writing_);
  queue_raw(handshake_.take_output());
  timer_.expires_after(handshake_timeout);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec && self->state_ == ConnectionState::handshaking) {
      DAGSIM_PROBE("net.handshake_timed_out");
      self->fail("the handshake timed out");
    }
  });
  read();
}

size_t Connection::queued_messages() const {
  size_t n = 0;
  for (const Writing& w : queue_) n += w.envelope;
  for (const Writing& w : in_flight_) n += w.envelope;
  DAGSIM_ASSERT(n <= queue_.size() + in_flight_.size());
  return n;
}

void Connection::queue_envelope(rpc::GatheredFrame payload, uint64_t padding) {
  DAGSIM_ASSERT(state_ == ConnectionState::open);
  DAGSIM_ASSERT(sealer_.has_value());
  Writing w;
  w.payload = std::move(payload);
  w.padding = padding;
  w.envelope = true;
  queued_bytes_ += w.payload.size;
  queue_.push_back(std::move(w));
}

void Connection::flush(TcpTransportStats& stats) {
  if (writing_ || queue_.empty() || closed()) return;
  DAGSIM_ASSERT(in_flight_.empty());
  writing_ = true;
  in_flight_.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  next_ = 0;
  const size_t mac_bytes = sealer_ && sealer_->macs() ? kEnvelopeMacBytes : 0;  // TLS: counted as plaintext
  for (const Writing& w : in_flight_) {
    // An envelope leaves only once the handshake is done; handshake bytes only before.
    if (w.envelope) DAGSIM_ASSERT(sealer_.has_value());
    stats.bytes_sent += w.envelope ? kEnvelopeHeaderBytes + w.payload.size + w.padding + mac_bytes : w.head.size();
  }
  ++stats.writes;
  gather();
  write_some();
}

// Whole envelopes, except that with MACs on at most kMacAheadBytes of payload are MACed ahead of
// the socket (Note [MAC as it goes]).
void Connection::gather() {
  DAGSIM_ASSERT(written_buffers_ == buffers_.size());
  DAGSIM_ASSERT(next_ < in_flight_.size());
  buffers_.clear();
  written_buffers_ = 0;
  if (encrypted()) return gather_encrypted();
  size_t budget = sealer_ && sealer_->macs() ? kMacAheadBytes : SIZE_MAX;
  for (; next_ < in_flight_.size(); ++next_) {
    Writing& w = in_flight_[next_];
    if (!w.envelope) {
      buffers_.emplace_back(w.head.data(), w.head.size());
      continue;
    }
    if (w.head.empty()) {
      const auto header = sealer_->begin(w.payload.size, w.padding);
      w.head.assign(header.begin(), header.end());
      buffers_.emplace_back(w.head.data(), w.head.size());
    }
    const size_t n = std::min(budget, w.payload.size - w.maced);
    if (n > 0) {
      w.take(n, [&](std::span<const uint8_t> piece) {
        sealer_->update(piece);
        buffers_.emplace_back(piece.data(), piece.size());
      });
      budget -= n;
    }
    DAGSIM_ASSERT(w.maced <= w.payload.size);
    if (w.maced < w.payload.size) return;  // the rest of it after these bytes are written
    for (uint64_t left = w.padding; left > 0;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(left, kZeroPageBytes));
      buffers_.emplace_back(kZeroPage.data(), k);
      left -= k;
    }
    const SealedEnvelope sealed = sealer_->finish();
    w.mac = sealed.mac;
    w.mac_bytes = sealed.mac_bytes;
    if (w.mac_bytes > 0) buffers_.emplace_back(w.mac.data(), w.mac_bytes);
  }
}

// gather() for TLS: the next records, encrypted into cipher_out_, at most kEncryptAheadBytes of
// plaintext at a time; handshake bytes (already TLS's own records) pass as they are, in order.
void Connection::gather_encrypted() {
  DAGSIM_ASSERT(handshake_.tls() != nullptr);
  DAGSIM_ASSERT(buffers_.empty());
  SecureChannel& tls = *handshake_.tls();
  cipher_out_.clear();
  size_t budget = kEncryptAheadBytes;
  for (; next_ < in_flight_.size() && budget > 0; ++next_) {
    Writing& w = in_flight_[next_];
    if (!w.envelope) {
      tls.take_output(cipher_out_);
      cipher_out_.insert(cipher_out_.end(), w.head.begin(), w.head.end());
      continue;
    }
    if (w.head.empty()) {
      const auto header = sealer_->begin(w.payload.size, w.padding);
      w.head.assign(header.begin(), header.end());
      tls.write(w.head);
    }
    const size_t n = std::min(budget, w.payload.size - w.maced);
    if (n > 0) {
      w.take(n, [&](std::span<const uint8_t> piece) {
        sealer_->update(piece);  // no MAC under TLS: only counts what the envelope has had
        tls.write(piece);
      });
      budget -= n;
    }
    while (w.maced == w.payload.size && w.padded < w.padding && budget > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>({w.padding - w.padded, kZeroPageBytes, budget}));
      tls.write(std::span<const uint8_t>(kZeroPage.data(), k));
      w.padded += k;
      budget -= k;
    }
    if (w.maced < w.payload.size || w.padded < w.padding) break;  // the rest after these bytes
    sealer_->finish();
  }
  tls.take_output(cipher_out_);
  buffers_.emplace_back(cipher_out_.data(), cipher_out_.size());
}

// True once a TLS connection is established and not plain (--trusted-network): every byte then
// goes through the channel's encryption.
bool Connection::encrypted() {
  SecureChannel* tls = handshake_.tls();
  return tls != nullptr && tls->status() == Handshake::Status::established && !tls->plain();
}

// Hands the kernel as much of buffers_ as it takes, until all of in_flight_ is written. Not
// asio::async_write: its completion condition caps every write at 64 KiB, so a 1 MiB message took
// 16 system calls, each behind a trip through the reactor.
void Connection::write_some() {
  DAGSIM_ASSERT(writing_);
  DAGSIM_ASSERT(written_buffers_ < buffers_.size());
  const std::span<const asio::const_buffer> rest = std::span(buffers_).subspan(written_buffers_);
  socket_.async_write_some(rest, [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
    self->on_write(ec, n);
  });
}

void Connection::on_write(const boost::system::error_code& ec, size_t n) {
  DAGSIM_ASSERT(writing_);
  if (!ec && !closed() && consume_written(n)) return write_some();
  if (!ec && !closed() && next_ < in_flight_.size()) {
    gather();
    return write_some();
  }
  writing_ = false;
  for (const Writing& w : in_flight_) {
    DAGSIM_ASSERT(queued_bytes_ >= w.payload.size);
    queued_bytes_ -= w.payload.size;
  }
  in_flight_.clear();
  if (closed()) return;
  if (ec) {
    DAGSIM_PROBE("net.connection_write_failed");
    return fail("write failed: " + error_text(ec));
  }
  if (auto owner = owner_.lock()) {
    flush(owner->stats_);
    owner->on_written();
  }
}

// Marks `n` more bytes of buffers_ written; true while some remain. (An index, not erasure: a
// padded envelope is thousands of zero-page buffers.)
bool Connection::consume_written(size_t n) {
  DAGSIM_ASSERT(written_buffers_ < buffers_.size());
  while (written_buffers_ < buffers_.size() && n >= buffers_[written_buffers_].size()) {
    n -= buffers_[written_buffers_++].size();
  }
  if (written_buffers_ < buffers_.size()) buffers_[written_buffers_] += n;
  // The kernel cannot have taken more than it was handed.
  if (written_buffers_ == buffers_.size()) DAGSIM_ASSERT_EQ(n, size_t{0});
  return written_buffers_ < buffers_.size();
}

void Connection::close() {
  if (closed()) return;
  boost::system::error_code ignored;
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  set_state(ConnectionState::closed);
  if (auto owner = owner_.lock()) owner->on_closed(*this);
}

void Connection::set_socket_options(runtime::Duration timeout) {
  DAGSIM_ASSERT(!closed());
  DAGSIM_ASSERT(timeout > runtime::Duration::zero());
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  socket_.set_option(asio::socket_base::keep_alive(true), ignored);
  const int fd = socket_.native_handle();
  // Unacknowledged data older than the timeout fails the connection (a dead host); idle
  // connections probe after half of it.
  const auto ms = static_cast<unsigned>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
  const int idle_s = std::max(1, static_cast<int>(ms / 2000)), interval_s = 1, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

void Connection::queue_raw(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return;
  // Handshake bytes: TLS may still send some (a session ticket) once open, a shared secret never.
  if (state_ == ConnectionState::open) DAGSIM_ASSERT(handshake_.tls() != nullptr);
  Writing w;
  w.head = std::move(bytes);
  queue_.push_back(std::move(w));
  if (auto owner = owner_.lock()) flush(owner->stats_);
}

void Connection::read() {
  if (closed()) return;
  DAGSIM_ASSERT(state_ != ConnectionState::failed);  // a failing connection closes before it reads again
  std::span<uint8_t> into = decoder_ && !encrypted() ? decoder_->next_buffer()
                            : handshake_.tls()         ? std::span<uint8_t>(cipher_in_)
                                                       : std::span<uint8_t>(handshake_buffer_);
  socket_.async_read_some(asio::buffer(into.data(), into.size()),
                          [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                            if (self->closed()) return;
                            if (ec) return self->fail(error_text(ec));
                            self->on_read(n);
                          });
}

void Connection::on_handshake_done(TcpTransport::Impl& owner, std::span<const uint8_t> got, size_t used) {
  DAGSIM_ASSERT(established());
  DAGSIM_ASSERT(!decoder_.has_value());
  timer_.cancel();
  // TLS authenticates every byte itself: envelopes then carry no MAC of their own.
  const Handshake* secret = handshake_.shared_secret();
  const bool macs = secret != nullptr && !trusted_;
  sealer_.emplace(macs ? std::optional<Digest>(secret->keys().send) : std::nullopt);
  decoder_.emplace(macs ? std::optional<Digest>(secret->keys().receive) : std::nullopt, limits_);
  set_state(ConnectionState::open);
  owner.on_established(shared_from_this());
  if (closed()) return;
  if (secret != nullptr) {
    decoder_->push(got.subspan(used));
  } else if (handshake_.tls()->plain()) {
    decoder_->push(handshake_.tls()->take_unread());
  }
}

void Connection::on_read(size_t n) {
  auto owner = owner_.lock();
  if (!owner) return;
  DAGSIM_ASSERT(!closed());
  try {
    if (!decoder_) {
      DAGSIM_ASSERT(state_ == ConnectionState::handshaking);
      const std::span<const uint8_t> got(handshake_.tls() ? cipher_in_.data() : handshake_buffer_.data(), n);
      const size_t used = handshake_.feed(got);
      queue_raw(handshake_.take_output());
      if (handshake_.status() == Handshake::Status::refused) return owner->on_refused(shared_from_this(), handshake_.error());
      if (handshake_.status() == Handshake::Status::established) on_handshake_done(*owner, got, used);
      if (closed()) return;
    } else if (encrypted()) {
      handshake_.tls()->feed({cipher_in_.data(), n});
    } else {
      decoder_->commit(n);
    }
    if (decoder_ && encrypted()) {
      // Decrypts straight into where the decoder wants its next bytes (a large payload's buffer).
      SecureChannel& tls = *handshake_.tls();
      while (size_t k = tls.read(decoder_->next_buffer())) decoder_->commit(k);
    }
    if (decoder_) {
      DAGSIM_ASSERT(state_ == ConnectionState::open);
      while (std::optional<ReceivedEnvelope> e = decoder_->pop()) {
        owner->on_envelope(shared_from_this(), std::move(*e));
        if (closed()) return;
      }
      arm_read_timeout();
    }
  } catch (const Error& e) {
    DAGSIM_PROBE("net.connection_protocol_error");
    return fail(e.detail());
  }
  read();
}

// An envelope must not stall half-way for longer than the connection timeout.
void Connection::arm_read_timeout() {
  DAGSIM_ASSERT(decoder_.has_value());
  DAGSIM_ASSERT(state_ == ConnectionState::open);
  if (!decoder_->mid_envelope()) {
    if (read_timer_armed_) timer_.cancel(), read_timer_armed_ = false;
    return;
  }
  if (read_timer_armed_) return;
  read_timer_armed_ = true;
  timer_.expires_after(timeout_);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed()) return;
    self->read_timer_armed_ = false;
    if (self->decoder_->mid_envelope()) {
      DAGSIM_PROBE("net.envelope_stalled_half_way");
      self->fail("an envelope stalled half-way for the connection timeout");
    }
  });
}

void Connection::fail(const std::string& why) {
  if (closed() || state_ == ConnectionState::failed) return;
  set_state(ConnectionState::failed);
  if (auto owner = owner_.lock()) {
    owner->on_error(shared_from_this(), why);
  }
  close();
  DAGSIM_ASSERT(closed());
}

}  // namespace dagsim::net
