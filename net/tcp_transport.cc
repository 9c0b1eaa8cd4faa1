// TcpTransport: construction, accepting, sending (the delay/drop layer's queues), room to send,
// close, and the public facade. Links and dialling are in tcp_link.cc, one connection in
// tcp_connection.cc, the link and connection state machines in tcp_link_state.cc. See
// tcp_transport.h for the promises.
#include "net/tcp_transport.h"

#include <boost/asio/post.hpp>

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "net/handshake.h"
#include "net/secure_channel.h"
#include "net/tcp_connection.h"
#include "net/tcp_transport_impl.h"

namespace dagsim::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using runtime::Delivery;
using runtime::TimePoint;

namespace {

Nonce fresh_nonce() {
  const std::vector<uint8_t> bytes = random_bytes(sizeof(Nonce));
  Nonce n{};
  std::ranges::copy(bytes, n.begin());
  return n;
}

}  // namespace

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
  DAGSIM_ASSERT(p.self < p.num_workers);
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
  DAGSIM_ASSERT(peer < links_.size());
  DAGSIM_ASSERT(peer != options_.self);  // a node reaches itself through its inbox, never a socket
  if (options_.tls) return Opening(SecureChannel::dial(options_.tls, channel_params(), peer));
  return Opening(Handshake::dial(handshake_params(), peer, fresh_nonce()));
}

Opening TcpTransport::Impl::accept_opening() const {
  if (options_.tls) return Opening(SecureChannel::accept(options_.tls, channel_params()));
  return Opening(Handshake::accept(handshake_params(), fresh_nonce()));
}

void TcpTransport::Impl::start() { accept_next(); }

void TcpTransport::Impl::accept_next() {
  DAGSIM_ASSERT(!closed_);
  acceptor_.async_accept([weak = weak_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
    auto self = weak.lock();
    if (!self || self->closed_) return;
    self->on_accept(ec, std::move(socket));
  });
}

void TcpTransport::Impl::on_accept(const boost::system::error_code& ec, tcp::socket socket) {
  DAGSIM_ASSERT(!closed_);
  const size_t inbound_before = inbound_;
  if (ec) {
    if (ec != asio::error::operation_aborted) log("accept failed: " + ec.message());
    if (ec == asio::error::bad_descriptor) return;
  } else if (inbound_ >= options_.max_inbound) {
    DAGSIM_PROBE("net.shed_connection");
    boost::system::error_code ignored;
    log("refused a connection from " + socket.remote_endpoint(ignored).address().to_string() + ": already " +
        std::to_string(inbound_) + " inbound connections (the limit)");
    socket.close(ignored);
  } else {
    auto c = std::make_shared<Connection>(weak_from_this(), std::move(socket), accept_opening(),
                                          options_.connection_timeout, options_.limits, options_.trusted_network);
    c->counted_inbound = true;
    ++inbound_;
    c->set_socket_options(options_.connection_timeout);
    c->start(options_.handshake_timeout);
  }
  // The bound holds: a connection is counted only below it.
  DAGSIM_ASSERT(inbound_ <= std::max(inbound_before, options_.max_inbound));
  accept_next();
}

void TcpTransport::Impl::send(WorkerId target, rpc::GatheredFrame payload, uint64_t padding) {
  if (closed_) throw errors::channel_closed("send on the closed transport of " + name(options_.self));
  // A target can come off the wire (an RRef's owner in a fork): an operating error, not an assert.
  if (target >= links_.size()) {
    throw errors::invalid_argument("send to node " + std::to_string(target) + ": the cluster has " +
                                   std::to_string(links_.size()) + " nodes");
  }
  if (payload.size > options_.limits.max_payload_bytes || padding > options_.limits.max_padding_bytes) {
    throw errors::invalid_argument("a message of " + std::to_string(payload.size) + " bytes (+" + std::to_string(padding) +
                                   " padding) to " + name(target) + " exceeds the connection's limits");
  }
  ++stats_.sent;
  if (target == options_.self) {
    // Never inline: delivered when the I/O loop next runs, like any other.
    // One buffer, as any received message (a gathered frame's pieces joined).
    runtime::Bytes bytes = std::move(payload.head);
    bytes.reserve(payload.size);
    for (std::span<const uint8_t> piece : payload.tail) bytes.insert(bytes.end(), piece.begin(), piece.end());
    DAGSIM_ASSERT_EQ(bytes.size(), payload.size);
    asio::post(io_, [weak = weak_from_this(), padding, payload = std::move(bytes)]() mutable {
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
        l.queue.admit(now, payload.size + padding, *options_.shaping, options_.self, target, random_);
    if (!arrival) {
      DAGSIM_PROBE("net.injected_connection_failure");
      ++stats_.dropped;
      fail_link(target, "connection to " + name(target) + " broken (injected connection failure)");
      return;
    }
    due = SteadyClock::time_point{std::chrono::duration_cast<SteadyClock::duration>(arrival->since_epoch)};
  }
  DAGSIM_ASSERT(l.state != LinkState::closed);  // closed only with the transport, refused above
  const size_t size = payload.size;
  l.waiting_bytes += size;
  l.waiting.push_back(Outgoing{std::move(payload), padding, due});
  DAGSIM_ASSERT(l.waiting_bytes >= size);
  pump(target);
  enforce_max_queued();
}

size_t TcpTransport::Impl::queued_bytes(WorkerId peer) const {
  DAGSIM_ASSERT(peer < links_.size());
  const Link& l = links_[peer];
  if (l.waiting.empty()) DAGSIM_ASSERT_EQ(l.waiting_bytes, size_t{0});  // the count follows the queue
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
    DAGSIM_PROBE("net.link_failed_over_max_queued");
    log("failed the link to " + name(worst) + ": " + std::to_string(held) + " bytes wait to be written to it and " +
        std::to_string(total) + " in all, past this node's bound of " + std::to_string(options_.max_queued));
    fail_link(worst, "connection to " + name(worst) + " failed: it does not read (" + std::to_string(held) +
                         " bytes queued to it, and this node's bound of " + std::to_string(options_.max_queued) +
                         " bytes for all its peers was reached)");
  }
}

void TcpTransport::Impl::close() {
  if (closed_) return;
  closed_ = true;
  inbox_.close();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (WorkerId peer = 0; peer < links_.size(); ++peer) {
    Link& l = links_[peer];
    std::shared_ptr<Connection> out = std::move(l.out), in = std::move(l.in);
    if (out) out->close();
    if (in) in->close();
    l.waiting.clear();
    l.waiting_bytes = 0;
    l.shaping->cancel();
    l.retry->cancel();
    l.hold->cancel();
    if (peer != options_.self) set_link_state(peer, LinkState::closed);
  }
  DAGSIM_ASSERT(queued_bytes() == 0);
  wake_room_waiters();
}

void TcpTransport::Impl::block(WorkerId peer, bool blocked) {
  DAGSIM_ASSERT(peer < links_.size());
  DAGSIM_ASSERT(peer != options_.self);  // the node checks the control message's peer first
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
  impl_->send(target, rpc::GatheredFrame::of(std::move(payload)), padding);
}
void TcpTransport::send_gathered(WorkerId target, rpc::GatheredFrame frame) {
  DAGSIM_ASSERT_EQ(frame.head.size() + [&] {
    size_t n = 0;
    for (std::span<const uint8_t> piece : frame.tail) n += piece.size();
    return n;
  }(), frame.size);
  impl_->send(target, std::move(frame), 0);
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

