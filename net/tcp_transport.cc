// TcpTransport's implementation: connections, links (a peer's pair of connections and what waits
// for them), the delay/drop layer. See tcp_transport.h for the promises.
#include "net/tcp_transport.h"

#include "core/runtime/link_queue.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <deque>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/fiber_context.h"
#include "net/handshake.h"
#include "net/opening.h"
#include "net/secure_channel.h"

namespace dagsim::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using runtime::Delivery;
using runtime::TimePoint;

namespace {

// Padding leaves from this page, as many times as it takes.
constexpr size_t kZeroPageBytes = 64 * 1024;
const std::array<uint8_t, kZeroPageBytes> kZeroPage{};

struct Writing {
  std::vector<uint8_t> head;  // handshake bytes, or an envelope's header (once begun)
  runtime::Bytes payload;
  uint64_t padding = 0;
  std::array<uint8_t, kEnvelopeMacBytes> mac{};
  size_t mac_bytes = 0;
  bool envelope = false;  // a message (counted when lost), not handshake bytes
  size_t maced = 0;       // payload bytes MACed (or encrypted) and handed on (Note [MAC as it goes])
  uint64_t padded = 0;    // padding bytes encrypted and handed on (TLS)
};

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

struct Outgoing {
  runtime::Bytes payload;
  uint64_t padding = 0;
  SteadyClock::time_point due;
};

Nonce fresh_nonce() {
  const std::vector<uint8_t> bytes = random_bytes(sizeof(Nonce));
  Nonce n{};
  std::ranges::copy(bytes, n.begin());
  return n;
}

std::string error_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "closed by the peer";
  return ec.message();
}

}  // namespace

class Connection;

class TcpTransport::Impl : public std::enable_shared_from_this<TcpTransport::Impl> {
 public:
  Impl(asio::io_context& io, tcp::acceptor acceptor, TcpTransportOptions options);

  void start();
  void send(WorkerId target, runtime::Bytes payload, uint64_t padding);
  void close();
  void block(WorkerId peer, bool blocked);
  void silence();
  bool idle() const;
  bool wait_for_room(WorkerId target, std::optional<TimePoint> deadline);
  size_t queued_bytes(WorkerId peer) const;
  size_t queued_bytes() const;

  // Called by connections.
  void on_written();
  void on_established(const std::shared_ptr<Connection>& c);
  void on_error(const std::shared_ptr<Connection>& c, const std::string& why);
  void on_envelope(const std::shared_ptr<Connection>& c, ReceivedEnvelope envelope);
  void on_refused(const std::shared_ptr<Connection>& c, const std::string& why);
  void on_closed(const Connection& c);

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  TcpTransportOptions options_;
  runtime::Channel<Delivery> inbox_;
  TcpTransportStats stats_;
  bool closed_ = false;
  bool silenced_ = false;
  size_t inbound_ = 0;
  // Senders waiting for room (wait_for_room) sleep here; whatever shrinks a queue wakes them.
  runtime::FiberMutex room_mutex_;
  runtime::FiberCondition room_;
  size_t room_waiters_ = 0;

 private:
  struct Link {
    std::shared_ptr<Connection> out;  // ours to the peer (dialling, handshaking or established)
    std::shared_ptr<Connection> in;   // the peer's to us, once established
    std::optional<uint32_t> incarnation;
    std::deque<Outgoing> waiting;     // not yet due, not yet connected, or held
    size_t waiting_bytes = 0;         // their payloads
    runtime::LinkQueue queue;         // the delay/drop layer: the simulator's link model
    bool blocked = false;
    bool dialing = false;
    SteadyClock::time_point dial_started{};
    unsigned attempts = 0;
    // Counts connect() calls: an attempt's completion acts only if no later attempt started (a
    // link that failed and dialled again while an earlier connect was still in flight).
    uint64_t attempt_id = 0;
    std::string last_dial_error;
    std::unique_ptr<asio::steady_timer> shaping, retry, hold;
    bool shaping_armed = false, hold_armed = false;
  };

  void accept_next();
  void pump(WorkerId peer);
  void dial(WorkerId peer);
  void connect(WorkerId peer);
  // A refusal is final (nothing listens at the peer's address: it is dead, or not started yet),
  // as in the simulator, and fails the link at once; anything else is retried with back-off until
  // the connection timeout.
  void dial_failed(WorkerId peer, const std::string& why, bool refused = false);
  void arm_hold(WorkerId peer);
  void fail_link(WorkerId peer, const std::string& why);
  void wake_room_waiters();
  bool has_room(WorkerId peer) const;
  // The hard bound: while the node holds more than max_queued, the link holding the most fails.
  void enforce_max_queued();
  std::string name(WorkerId w) const;
  std::string where(WorkerId w) const;
  HandshakeParams handshake_params() const;
  ChannelParams channel_params() const;
  // How a new connection opens: TLS when the node has a certificate, else the shared secret.
  Opening dial_opening(WorkerId peer) const;
  Opening accept_opening() const;
  void log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  std::vector<Link> links_;
  Prng random_;
};

// One TCP connection: its handshake, then envelopes; reads and writes run as Asio handlers that
// hold the connection alive and call back into the transport only while it exists.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::weak_ptr<TcpTransport::Impl> owner, tcp::socket socket, Opening opening,
             runtime::Duration timeout, EnvelopeLimits limits, bool trusted)
      : owner_(std::move(owner)), socket_(std::move(socket)), handshake_(std::move(opening)),
        timer_(socket_.get_executor()), timeout_(timeout), limits_(limits), trusted_(trusted) {
    if (handshake_.tls()) cipher_in_.resize(kCipherReadBytes);
  }

  // Starts the handshake: what it has to say, then reads, within `handshake_timeout`.
  void start(runtime::Duration handshake_timeout) {
    queue_raw(handshake_.take_output());
    timer_.expires_after(handshake_timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && !self->established() && !self->closed_) self->fail("the handshake timed out");
    });
    read();
  }

  bool established() const { return handshake_.status() == Handshake::Status::established; }
  // The name in the peer's certificate ("" before TLS saw it, or with a shared secret).
  std::string certificate_name() {
    return handshake_.tls() ? handshake_.tls()->peer_certificate_name() : std::string();
  }
  bool closed() const { return closed_; }
  Handshake::Role role() const { return handshake_.role(); }
  const PeerIdentity& peer() const { return handshake_.peer(); }
  std::optional<WorkerId> claimed_peer() const { return handshake_.claimed_peer(); }
  bool writing() const { return writing_ || !queue_.empty(); }
  // Payload bytes queued or being written.
  size_t queued_bytes() const { return queued_bytes_; }
  // Messages queued or being written: lost if the connection fails now.
  size_t queued_messages() const {
    size_t n = 0;
    for (const Writing& w : queue_) n += w.envelope;
    for (const Writing& w : in_flight_) n += w.envelope;
    return n;
  }

  void queue_envelope(runtime::Bytes payload, uint64_t padding) {
    DAGSIM_ASSERT(established() && sealer_);
    Writing w;
    w.payload = std::move(payload);
    w.padding = padding;
    w.envelope = true;
    queued_bytes_ += w.payload.size();
    queue_.push_back(std::move(w));
  }

  // Writes everything queued in gathered writes (small frames batch up while one is in flight).
  void flush(TcpTransportStats& stats) {
    if (writing_ || queue_.empty() || closed_) return;
    writing_ = true;
    in_flight_.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    next_ = 0;
    const size_t mac_bytes = sealer_ && sealer_->macs() ? kEnvelopeMacBytes : 0;  // TLS: counted as plaintext
    for (const Writing& w : in_flight_) {
      stats.bytes_sent += w.envelope ? kEnvelopeHeaderBytes + w.payload.size() + w.padding + mac_bytes : w.head.size();
    }
    ++stats.writes;
    gather();
    write_some();
  }

  // Makes buffers_ the next bytes of in_flight_ to write: whole envelopes, except that with MACs
  // on at most kMacAheadBytes of payload are MACed ahead of the socket (Note [MAC as it goes]).
  // REQUIRES: all of buffers_ written.
  void gather() {
    DAGSIM_ASSERT(written_buffers_ == buffers_.size() && next_ < in_flight_.size());
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
        const auto header = sealer_->begin(w.payload.size(), w.padding);
        w.head.assign(header.begin(), header.end());
        buffers_.emplace_back(w.head.data(), w.head.size());
      }
      const size_t n = std::min(budget, w.payload.size() - w.maced);
      if (n > 0) {
        const std::span<const uint8_t> piece = std::span<const uint8_t>(w.payload).subspan(w.maced, n);
        sealer_->update(piece);
        buffers_.emplace_back(piece.data(), piece.size());
        w.maced += n;
        budget -= n;
      }
      if (w.maced < w.payload.size()) return;  // the rest of it after these bytes are written
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
  void gather_encrypted() {
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
        const auto header = sealer_->begin(w.payload.size(), w.padding);
        w.head.assign(header.begin(), header.end());
        tls.write(w.head);
      }
      const size_t n = std::min(budget, w.payload.size() - w.maced);
      if (n > 0) {
        const std::span<const uint8_t> piece = std::span<const uint8_t>(w.payload).subspan(w.maced, n);
        sealer_->update(piece);  // no MAC under TLS: only counts what the envelope has had
        tls.write(piece);
        w.maced += n;
        budget -= n;
      }
      while (w.maced == w.payload.size() && w.padded < w.padding && budget > 0) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>({w.padding - w.padded, kZeroPageBytes, budget}));
        tls.write(std::span<const uint8_t>(kZeroPage.data(), k));
        w.padded += k;
        budget -= k;
      }
      if (w.maced < w.payload.size() || w.padded < w.padding) break;  // the rest after these bytes
      sealer_->finish();
    }
    tls.take_output(cipher_out_);
    buffers_.emplace_back(cipher_out_.data(), cipher_out_.size());
  }

  // True once a TLS connection is established and not plain (--trusted-network): every byte then
  // goes through the channel's encryption.
  bool encrypted() {
    SecureChannel* tls = handshake_.tls();
    return tls != nullptr && tls->status() == Handshake::Status::established && !tls->plain();
  }

  // Hands the kernel as much of buffers_ as it takes, until all of in_flight_ is written. Not
  // asio::async_write: its completion condition caps every write at 64 KiB, so a 1 MiB message took
  // 16 system calls, each behind a trip through the reactor.
  void write_some() {
    const std::span<const asio::const_buffer> rest = std::span(buffers_).subspan(written_buffers_);
    socket_.async_write_some(rest, [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
      if (!ec && !self->closed_ && self->consume_written(n)) return self->write_some();
      if (!ec && !self->closed_ && self->next_ < self->in_flight_.size()) {
        self->gather();
        return self->write_some();
      }
      self->writing_ = false;
      for (const Writing& w : self->in_flight_) self->queued_bytes_ -= w.payload.size();
      self->in_flight_.clear();
      if (self->closed_) return;
      if (ec) return self->fail("write failed: " + error_text(ec));
      if (auto owner = self->owner_.lock()) {
        self->flush(owner->stats_);
        owner->on_written();
      }
    });
  }

  // Marks `n` more bytes of buffers_ written; true while some remain. (An index, not erasure: a
  // padded envelope is thousands of zero-page buffers.)
  bool consume_written(size_t n) {
    while (written_buffers_ < buffers_.size() && n >= buffers_[written_buffers_].size()) {
      n -= buffers_[written_buffers_++].size();
    }
    if (written_buffers_ < buffers_.size()) buffers_[written_buffers_] += n;
    return written_buffers_ < buffers_.size();
  }

  // Closes the socket; pending handlers run with operation_aborted and do nothing.
  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    if (auto owner = owner_.lock()) owner->on_closed(*this);
  }

  void set_socket_options(runtime::Duration timeout) {
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

  bool counted_inbound = false;

 private:
  void queue_raw(std::vector<uint8_t> bytes) {
    if (bytes.empty()) return;
    Writing w;
    w.head = std::move(bytes);
    queue_.push_back(std::move(w));
    if (auto owner = owner_.lock()) flush(owner->stats_);
  }

  void read() {
    if (closed_) return;
    std::span<uint8_t> into = decoder_ && !encrypted() ? decoder_->next_buffer()
                              : handshake_.tls()         ? std::span<uint8_t>(cipher_in_)
                                                         : std::span<uint8_t>(handshake_buffer_);
    socket_.async_read_some(asio::buffer(into.data(), into.size()),
                            [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                              if (self->closed_) return;
                              if (ec) return self->fail(error_text(ec));
                              self->on_read(n);
                            });
  }

  void on_read(size_t n) {
    auto owner = owner_.lock();
    if (!owner) return;
    try {
      if (!decoder_) {
        const std::span<const uint8_t> got(handshake_.tls() ? cipher_in_.data() : handshake_buffer_.data(), n);
        const size_t used = handshake_.feed(got);
        queue_raw(handshake_.take_output());
        if (handshake_.status() == Handshake::Status::refused) return owner->on_refused(shared_from_this(), handshake_.error());
        if (handshake_.status() == Handshake::Status::established) {
          timer_.cancel();
          // TLS authenticates every byte itself: envelopes then carry no MAC of their own.
          const Handshake* secret = handshake_.shared_secret();
          const bool macs = secret != nullptr && !trusted_;
          sealer_.emplace(macs ? std::optional<Digest>(secret->keys().send) : std::nullopt);
          decoder_.emplace(macs ? std::optional<Digest>(secret->keys().receive) : std::nullopt, limits_);
          owner->on_established(shared_from_this());
          if (closed_) return;
          if (secret != nullptr) {
            decoder_->push(got.subspan(used));
          } else if (handshake_.tls()->plain()) {
            decoder_->push(handshake_.tls()->take_unread());
          }
        }
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
        while (std::optional<ReceivedEnvelope> e = decoder_->pop()) {
          owner->on_envelope(shared_from_this(), std::move(*e));
          if (closed_) return;
        }
        arm_read_timeout();
      }
    } catch (const Error& e) {
      return fail(e.detail());
    }
    read();
  }

  // An envelope must not stall half-way for longer than the connection timeout.
  void arm_read_timeout() {
    if (!decoder_->mid_envelope()) {
      if (read_timer_armed_) timer_.cancel(), read_timer_armed_ = false;
      return;
    }
    if (read_timer_armed_) return;
    read_timer_armed_ = true;
    timer_.expires_after(timeout_);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->closed_) return;
      self->read_timer_armed_ = false;
      if (self->decoder_->mid_envelope()) self->fail("an envelope stalled half-way for the connection timeout");
    });
  }

  void fail(const std::string& why) {
    if (closed_) return;
    if (auto owner = owner_.lock()) {
      owner->on_error(shared_from_this(), why);
    }
    close();
  }

  std::weak_ptr<TcpTransport::Impl> owner_;
  tcp::socket socket_;
  Opening handshake_;
  asio::steady_timer timer_;
  runtime::Duration timeout_;
  EnvelopeLimits limits_;
  bool trusted_;
  std::optional<EnvelopeSealer> sealer_;
  std::optional<EnvelopeDecoder> decoder_;
  std::array<uint8_t, 256> handshake_buffer_{};
  std::vector<uint8_t> cipher_in_;   // TLS: what the socket read, before decryption
  std::vector<uint8_t> cipher_out_;  // TLS: encrypted records being written
  std::deque<Writing> queue_;
  std::vector<Writing> in_flight_;
  size_t next_ = 0;  // in_flight_[next_] is the first not wholly in buffers_ yet
  std::vector<asio::const_buffer> buffers_;
  size_t written_buffers_ = 0;  // buffers_[0, written_buffers_) are on the wire
  size_t queued_bytes_ = 0;  // payloads in queue_ and in_flight_
  bool writing_ = false;
  bool closed_ = false;
  bool read_timer_armed_ = false;
};

// Impl ------------------------------------------------------------------------------------------

TcpTransport::Impl::Impl(asio::io_context& io, tcp::acceptor acceptor, TcpTransportOptions options)
    : io_(io), acceptor_(std::move(acceptor)), options_(std::move(options)), links_(options_.peers.size()),
      random_(Prng(options_.seed).fork(0x7c9 + options_.self)) {
  DAGSIM_ASSERT(options_.self < options_.peers.size());
  DAGSIM_ASSERT(options_.names.size() == options_.peers.size());
  for (Link& l : links_) {
    l.shaping = std::make_unique<asio::steady_timer>(io_);
    l.retry = std::make_unique<asio::steady_timer>(io_);
    l.hold = std::make_unique<asio::steady_timer>(io_);
  }
}

std::string TcpTransport::Impl::name(WorkerId w) const {
  return w < options_.names.size() ? options_.names[w] : "worker id " + std::to_string(w);
}

std::string TcpTransport::Impl::where(WorkerId w) const {
  return options_.peers[w].host + ":" + std::to_string(options_.peers[w].port);
}

HandshakeParams TcpTransport::Impl::handshake_params() const {
  HandshakeParams p;
  p.cluster_id = options_.cluster_id;
  p.self = options_.self;
  p.incarnation = options_.incarnation;
  p.num_workers = static_cast<uint32_t>(options_.peers.size());
  p.secret = options_.secret;
  if (options_.protocol_version != 0) p.version = options_.protocol_version;
  return p;
}

ChannelParams TcpTransport::Impl::channel_params() const {
  ChannelParams p;
  p.cluster_id = options_.cluster_id;
  p.self = options_.self;
  p.incarnation = options_.incarnation;
  p.names = options_.names;
  p.plain_after_handshake = options_.trusted_network;
  if (options_.protocol_version != 0) p.version = options_.protocol_version;
  return p;
}

Opening TcpTransport::Impl::dial_opening(WorkerId peer) const {
  if (options_.tls) return Opening(SecureChannel::dial(options_.tls, channel_params(), peer));
  return Opening(Handshake::dial(handshake_params(), peer, fresh_nonce()));
}

Opening TcpTransport::Impl::accept_opening() const {
  if (options_.tls) return Opening(SecureChannel::accept(options_.tls, channel_params()));
  return Opening(Handshake::accept(handshake_params(), fresh_nonce()));
}

void TcpTransport::Impl::start() { accept_next(); }

void TcpTransport::Impl::accept_next() {
  acceptor_.async_accept([weak = weak_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    if (ec) {
      if (ec != asio::error::operation_aborted) self->log("accept failed: " + ec.message());
      if (ec == asio::error::bad_descriptor) return;
    } else if (self->inbound_ >= self->options_.max_inbound) {
      boost::system::error_code ignored;
      self->log("refused a connection from " + socket.remote_endpoint(ignored).address().to_string() + ": already " +
                std::to_string(self->inbound_) + " inbound connections (the limit)");
      socket.close(ignored);
    } else {
      auto c = std::make_shared<Connection>(weak, std::move(socket), self->accept_opening(),
                                            self->options_.connection_timeout, self->options_.limits,
                                            self->options_.trusted_network);
      c->counted_inbound = true;
      ++self->inbound_;
      c->set_socket_options(self->options_.connection_timeout);
      c->start(self->options_.handshake_timeout);
    }
    self->accept_next();
  });
}

void TcpTransport::Impl::send(WorkerId target, runtime::Bytes payload, uint64_t padding) {
  if (closed_) throw errors::channel_closed("send on the closed transport of " + name(options_.self));
  // A target can come off the wire (an RRef's owner in a fork): an operating error, not an assert.
  if (target >= links_.size()) {
    throw errors::invalid_argument("send to node " + std::to_string(target) + ": the cluster has " +
                                   std::to_string(links_.size()) + " nodes");
  }
  if (payload.size() > options_.limits.max_payload_bytes || padding > options_.limits.max_padding_bytes) {
    throw errors::invalid_argument("a message of " + std::to_string(payload.size()) + " bytes (+" + std::to_string(padding) +
                                   " padding) to " + name(target) + " exceeds the connection's limits");
  }
  ++stats_.sent;
  if (target == options_.self) {
    // Never inline: delivered when the I/O loop next runs, like any other.
    asio::post(io_, [weak = weak_from_this(), padding, payload = std::move(payload)]() mutable {
      auto self = weak.lock();
      if (!self || self->closed_) return;
      ++self->stats_.delivered;
      self->inbox_.offer(Delivery{Delivery::Kind::message, self->options_.self, std::move(payload), {},
                                  self->options_.incarnation, padding});
    });
    return;
  }
  Link& l = links_[target];
  auto due = SteadyClock::now();
  if (options_.shaping) {
    // The simulator's link model (runtime::LinkQueue) on the host's steady time.
    const TimePoint now{std::chrono::duration_cast<runtime::Duration>(due.time_since_epoch())};
    const std::optional<TimePoint> arrival =
        l.queue.admit(now, payload.size() + padding, *options_.shaping, options_.self, target, random_);
    if (!arrival) {
      ++stats_.dropped;
      fail_link(target, "connection to " + name(target) + " broken (injected connection failure)");
      return;
    }
    due = SteadyClock::time_point{std::chrono::duration_cast<SteadyClock::duration>(arrival->since_epoch)};
  }
  l.waiting_bytes += payload.size();
  l.waiting.push_back(Outgoing{std::move(payload), padding, due});
  pump(target);
  enforce_max_queued();
}

size_t TcpTransport::Impl::queued_bytes(WorkerId peer) const {
  const Link& l = links_[peer];
  return l.waiting_bytes + (l.out ? l.out->queued_bytes() : 0);
}

size_t TcpTransport::Impl::queued_bytes() const {
  size_t total = 0;
  for (WorkerId peer = 0; peer < links_.size(); ++peer) total += queued_bytes(peer);
  return total;
}

bool TcpTransport::Impl::has_room(WorkerId peer) const {
  return queued_bytes(peer) < options_.room_per_peer && queued_bytes() < options_.room_total;
}

bool TcpTransport::Impl::wait_for_room(WorkerId target, std::optional<TimePoint> deadline) {
  if (closed_ || target >= links_.size() || target == options_.self || has_room(target)) return true;
  // Only a node's fibers wait: Asio handlers and the dispatcher must never block.
  if (runtime::current_fiber() == nullptr) return false;
  runtime::FiberLock lock(room_mutex_);
  ++room_waiters_;
  struct Leave {
    size_t& waiters;
    ~Leave() { --waiters; }
  } leave{room_waiters_};
  return runtime::block_until(
      room_, lock, [&] { return closed_ || has_room(target); }, deadline, "TcpTransport::wait_for_room");
}

void TcpTransport::Impl::on_written() { wake_room_waiters(); }

void TcpTransport::Impl::wake_room_waiters() {
  if (room_waiters_ == 0) return;
  std::lock_guard<runtime::FiberMutex> lock(room_mutex_);
  room_.notify_all();
}

void TcpTransport::Impl::enforce_max_queued() {
  while (!closed_) {
    const size_t total = queued_bytes();
    if (total <= options_.max_queued) return;
    WorkerId worst = 0;
    for (WorkerId peer = 1; peer < links_.size(); ++peer) {
      if (queued_bytes(peer) > queued_bytes(worst)) worst = peer;
    }
    const size_t held = queued_bytes(worst);
    DAGSIM_ASSERT(held > 0);
    log("failed the link to " + name(worst) + ": " + std::to_string(held) + " bytes wait to be written to it and " +
        std::to_string(total) + " in all, past this node's bound of " + std::to_string(options_.max_queued));
    fail_link(worst, "connection to " + name(worst) + " failed: it does not read (" + std::to_string(held) +
                         " bytes queued to it, and this node's bound of " + std::to_string(options_.max_queued) +
                         " bytes for all its peers was reached)");
  }
}

void TcpTransport::Impl::pump(WorkerId peer) {
  Link& l = links_[peer];
  if (closed_ || l.waiting.empty()) return;
  if (silenced_ || l.blocked) return arm_hold(peer);
  if (!l.out || !l.out->established()) return dial(peer);
  const auto now = SteadyClock::now();
  while (!l.waiting.empty() && l.waiting.front().due <= now) {
    l.waiting_bytes -= l.waiting.front().payload.size();
    l.out->queue_envelope(std::move(l.waiting.front().payload), l.waiting.front().padding);
    l.waiting.pop_front();
  }
  if (!l.waiting.empty() && !l.shaping_armed) {
    l.shaping_armed = true;
    l.shaping->expires_at(l.waiting.front().due);
    l.shaping->async_wait([weak = weak_from_this(), peer](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (!self || ec == asio::error::operation_aborted) return;
      self->links_[peer].shaping_armed = false;
      self->pump(peer);
    });
  }
  l.out->flush(stats_);
}

void TcpTransport::Impl::dial(WorkerId peer) {
  Link& l = links_[peer];
  if (l.dialing) return;
  l.dialing = true;
  l.attempts = 0;
  l.dial_started = SteadyClock::now();
  connect(peer);
}

void TcpTransport::Impl::connect(WorkerId peer) {
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options_.peers[peer].host, ec);
  auto socket = std::make_shared<tcp::socket>(io_);
  const uint64_t attempt = ++links_[peer].attempt_id;
  auto on_connect = [weak = weak_from_this(), peer, socket, attempt](const boost::system::error_code& ec2, const tcp::endpoint&) {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    Link& l = self->links_[peer];
    // The link failed meanwhile, or failed and dialled again: a later attempt owns it now.
    if (!l.dialing || l.attempt_id != attempt) return;
    if (ec2) return self->dial_failed(peer, ec2.message(), ec2 == asio::error::connection_refused);
    auto c = std::make_shared<Connection>(weak, std::move(*socket),
                                          self->dial_opening(peer),
                                          self->options_.connection_timeout, self->options_.limits,
                                          self->options_.trusted_network);
    c->set_socket_options(self->options_.connection_timeout);
    l.out = c;
    c->start(self->options_.handshake_timeout);
  };
  if (!ec) {
    const std::array<tcp::endpoint, 1> endpoints{tcp::endpoint(address, options_.peers[peer].port)};
    asio::async_connect(*socket, endpoints, on_connect);
    return;
  }
  // A host name: resolved each attempt (a host may move between restarts).
  auto resolver = std::make_shared<tcp::resolver>(io_);
  resolver->async_resolve(options_.peers[peer].host, std::to_string(options_.peers[peer].port),
                          [weak = weak_from_this(), peer, socket, resolver, on_connect, attempt](
                              const boost::system::error_code& ec2, const tcp::resolver::results_type& results) {
                            auto self = weak.lock();
                            if (!self || self->closed_) return;
                            const Link& l = self->links_[peer];
                            if (!l.dialing || l.attempt_id != attempt) return;  // as on_connect
                            if (ec2) return self->dial_failed(peer, "cannot resolve: " + ec2.message());
                            asio::async_connect(*socket, results, on_connect);
                          });
}

void TcpTransport::Impl::dial_failed(WorkerId peer, const std::string& why, bool refused) {
  Link& l = links_[peer];
  if (!l.dialing) return;
  l.out = nullptr;
  l.last_dial_error = why;
  // A refusal fails the link, unless the peer has meanwhile connected to us: then our dial raced
  // with the peer's restart (it met the dead life's closed port while the new life was starting),
  // and failing the link would close the new life's connection. Dial again instead.
  if (refused && !(l.in && l.in->established())) {
    return fail_link(peer, "connection refused: " + name(peer) + " at " + where(peer) + " is not running");
  }
  if (SteadyClock::now() - l.dial_started >= options_.connection_timeout) {
    return fail_link(peer, "connection to " + name(peer) + " at " + where(peer) + " could not be opened within the connection timeout: " + why);
  }
  // Back-off: 5 ms, doubling, at most 250 ms between attempts.
  const auto delay = std::chrono::milliseconds(std::min<int64_t>(250, int64_t{5} << std::min(l.attempts, 6u)));
  ++l.attempts;
  l.retry->expires_after(delay);
  l.retry->async_wait([weak = weak_from_this(), peer](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->closed_ || !self->links_[peer].dialing) return;
    self->connect(peer);
  });
}

void TcpTransport::Impl::arm_hold(WorkerId peer) {
  Link& l = links_[peer];
  if (l.hold_armed) return;
  l.hold_armed = true;
  l.hold->expires_after(options_.connection_timeout);
  l.hold->async_wait([weak = weak_from_this(), peer](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec == asio::error::operation_aborted || self->closed_) return;
    Link& link = self->links_[peer];
    link.hold_armed = false;
    if (self->silenced_ || link.blocked) {
      self->fail_link(peer, "connection to " + self->name(peer) + " timed out (no traffic got through for the connection timeout)");
    }
  });
}

void TcpTransport::Impl::fail_link(WorkerId peer, const std::string& why) {
  Link& l = links_[peer];
  uint64_t lost = l.waiting.size();
  for (const auto* c : {&l.out, &l.in}) {
    if (*c) lost += (*c)->queued_messages();
  }
  // Taken out first: closing calls back into on_closed.
  std::shared_ptr<Connection> out = std::move(l.out), in = std::move(l.in);
  if (out) out->close();
  if (in) in->close();
  l.waiting.clear();
  l.waiting_bytes = 0;
  l.queue.reset();
  l.dialing = false;
  l.shaping->cancel();
  l.retry->cancel();
  l.hold->cancel();
  l.shaping_armed = l.hold_armed = false;
  stats_.dropped += lost;
  ++stats_.connection_failures;
  inbox_.offer(Delivery{Delivery::Kind::peer_failed, peer, {}, why, l.incarnation.value_or(0), 0});
  if (options_.on_failure) options_.on_failure(peer, why);
  wake_room_waiters();
}

void TcpTransport::Impl::on_established(const std::shared_ptr<Connection>& c) {
  const PeerIdentity& p = c->peer();
  Link& l = links_[p.worker];
  if (c->role() == Handshake::Role::dialer) {
    if (l.out != c) {
      // Not the link's connection any more (its dial was given up while the handshake ran): a
      // peer's timing decides that, so it is closed, never an assertion.
      c->close();
      return;
    }
    l.dialing = false;
    // Our new connection reached another life of the peer than the one still connected to us.
    if (l.in && l.in->peer().incarnation != p.incarnation) {
      l.out = nullptr;
      fail_link(p.worker, "connection to " + name(p.worker) + " lost: it restarted (incarnation " + std::to_string(p.incarnation) + ")");
      l.out = c;
    }
  } else {
    const bool stale_out = l.out && l.out->established() && l.out->peer().incarnation != p.incarnation;
    if (l.in || stale_out) {
      // The peer dialled again: it saw the old connection fail, or it restarted. Fail ours too, so
      // its notice comes before the new connection's messages.
      const bool restarted = l.incarnation && *l.incarnation != p.incarnation;
      fail_link(p.worker, "connection to " + name(p.worker) + " lost: " +
                              (restarted ? "it restarted (incarnation " + std::to_string(p.incarnation) + ")"
                                         : std::string("it reconnected (its side of the connection failed)")));
    }
    l.in = c;
  }
  l.incarnation = p.incarnation;
  pump(p.worker);
}

void TcpTransport::Impl::on_error(const std::shared_ptr<Connection>& c, const std::string& why) {
  if (closed_) return;
  if (!c->established()) {
    // A connection that never completed its handshake belongs to no link yet.
    if (c->role() == Handshake::Role::dialer && c->claimed_peer() && links_[*c->claimed_peer()].out == c) {
      dial_failed(*c->claimed_peer(), why);
    }
    return;
  }
  const WorkerId peer = c->peer().worker;
  Link& l = links_[peer];
  if (l.out != c && l.in != c) return;  // an old connection, already failed
  fail_link(peer, "connection to " + name(peer) + " lost: " + why);
}

void TcpTransport::Impl::on_refused(const std::shared_ptr<Connection>& c, const std::string& why) {
  ++stats_.refused;
  log("refused a connection (" + std::string(c->role() == Handshake::Role::dialer ? "dialled" : "accepted") + "): " + why);
  if (c->role() == Handshake::Role::dialer && c->claimed_peer() && links_[*c->claimed_peer()].out == c) {
    dial_failed(*c->claimed_peer(), "handshake refused: " + why);
  }
  c->close();
}

void TcpTransport::Impl::on_closed(const Connection& c) {
  if (c.counted_inbound) {
    DAGSIM_ASSERT(inbound_ > 0);
    --inbound_;
  }
}

void TcpTransport::Impl::on_envelope(const std::shared_ptr<Connection>& c, ReceivedEnvelope envelope) {
  const WorkerId peer = c->peer().worker;
  if (c->role() == Handshake::Role::dialer) {
    return on_error(c, "the peer sent an envelope on a connection that carries only ours");
  }
  if (silenced_) {
    // A crashed host hears nothing; the link fails once the traffic was held long enough.
    ++stats_.dropped;
    arm_hold(peer);
    return;
  }
  ++stats_.delivered;
  inbox_.offer(Delivery{Delivery::Kind::message, peer, std::move(envelope.payload), {}, c->peer().incarnation,
                        envelope.padding});
}

void TcpTransport::Impl::close() {
  if (closed_) return;
  closed_ = true;
  inbox_.close();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (Link& l : links_) {
    std::shared_ptr<Connection> out = std::move(l.out), in = std::move(l.in);
    if (out) out->close();
    if (in) in->close();
    l.waiting.clear();
    l.waiting_bytes = 0;
    l.shaping->cancel();
    l.retry->cancel();
    l.hold->cancel();
  }
  wake_room_waiters();
}

void TcpTransport::Impl::block(WorkerId peer, bool blocked) {
  DAGSIM_ASSERT(peer < links_.size());
  Link& l = links_[peer];
  l.blocked = blocked;
  if (!blocked && !silenced_) {
    l.hold->cancel();
    l.hold_armed = false;
    pump(peer);
  }
}

void TcpTransport::Impl::silence() { silenced_ = true; }

bool TcpTransport::Impl::idle() const {
  for (const Link& l : links_) {
    if (!l.waiting.empty() || (l.out && l.out->writing())) return false;
  }
  return true;
}

// TcpTransport ----------------------------------------------------------------------------------

TcpTransport::TcpTransport(asio::io_context& io, tcp::acceptor acceptor, TcpTransportOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(acceptor), std::move(options))) {
  impl_->start();
}

TcpTransport::~TcpTransport() { impl_->close(); }

WorkerId TcpTransport::self() const { return impl_->options_.self; }
bool TcpTransport::authenticated() const { return !impl_->options_.trusted_network; }
void TcpTransport::send(WorkerId target, runtime::Bytes payload, uint64_t padding) {
  impl_->send(target, std::move(payload), padding);
}
runtime::Channel<Delivery>& TcpTransport::inbox() { return impl_->inbox_; }
void TcpTransport::close() { impl_->close(); }
void TcpTransport::block(WorkerId peer, bool blocked) { impl_->block(peer, blocked); }
void TcpTransport::silence() { impl_->silence(); }
bool TcpTransport::idle() const { return impl_->idle(); }
uint16_t TcpTransport::port() const {
  boost::system::error_code ignored;
  return impl_->acceptor_.local_endpoint(ignored).port();
}
TcpTransportStats TcpTransport::stats() const { return impl_->stats_; }
bool TcpTransport::wait_for_room(WorkerId target, std::optional<TimePoint> deadline) {
  return impl_->wait_for_room(target, deadline);
}
size_t TcpTransport::queued_bytes(WorkerId peer) const { return impl_->queued_bytes(peer); }
size_t TcpTransport::queued_bytes() const { return impl_->queued_bytes(); }

}  // namespace dagsim::net
