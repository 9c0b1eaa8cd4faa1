// TcpTransport's links: dialling a peer, the back-off, a link's failure, and what its connections
// report (established, failed, refused, an envelope). See tcp_transport_impl.h and the link's
// state machine in tcp_link_state.h.
#include <boost/asio/connect.hpp>

#include <algorithm>
#include <array>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "net/tcp_connection.h"
#include "net/tcp_transport_impl.h"

namespace dagsim::net {

namespace asio = boost::asio;
using asio::ip::tcp;
using runtime::Delivery;

void TcpTransport::Impl::set_link_state(WorkerId peer, LinkState to) {
  DAGSIM_ASSERT(peer < links_.size());
  DAGSIM_ASSERT(peer != options_.self);  // a node sends to itself without a link
  Link& l = links_[peer];
  transition(l.state, to, LinkFacts{l.out != nullptr, l.out && l.out->established(), l.in != nullptr, l.waiting.size()});
}

void TcpTransport::Impl::pump(WorkerId peer) {
  DAGSIM_ASSERT(peer < links_.size());
  Link& l = links_[peer];
  if (closed_ || l.waiting.empty()) return;
  DAGSIM_ASSERT(l.state != LinkState::closed);
  if (silenced_ || l.blocked) return arm_hold(peer);
  if (l.state != LinkState::open) return dial(peer);
  DAGSIM_ASSERT(l.out && l.out->established());
  const auto now = SteadyClock::now();
  while (!l.waiting.empty() && l.waiting.front().due <= now) {
    DAGSIM_ASSERT(l.waiting_bytes >= l.waiting.front().payload.size);
    l.waiting_bytes -= l.waiting.front().payload.size;
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
  if (link_dialing(l.state)) return;
  DAGSIM_ASSERT(!l.out);
  if (l.state == LinkState::failed) DAGSIM_PROBE("net.link_reconnect_after_failure");
  set_link_state(peer, LinkState::dialing);
  l.attempts = 0;
  l.dial_started = SteadyClock::now();
  connect(peer);
}

void TcpTransport::Impl::connect(WorkerId peer) {
  DAGSIM_ASSERT(links_[peer].state == LinkState::dialing);
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options_.peers[peer].host, ec);
  auto socket = std::make_shared<tcp::socket>(io_);
  const uint64_t before = links_[peer].attempt_id;
  const uint64_t attempt = ++links_[peer].attempt_id;
  DAGSIM_ASSERT(attempt > before);  // attempts only grow: a stale completion must never match
  auto connected = [weak = weak_from_this(), peer, socket, attempt](const boost::system::error_code& ec2, const tcp::endpoint&) {
    if (auto self = weak.lock()) self->on_connect(peer, attempt, ec2, std::move(*socket));
  };
  if (!ec) {
    const std::array<tcp::endpoint, 1> endpoints{tcp::endpoint(address, options_.peers[peer].port)};
    asio::async_connect(*socket, endpoints, connected);
    return;
  }
  // A host name: resolved each attempt (a host may move between restarts).
  auto resolver = std::make_shared<tcp::resolver>(io_);
  resolver->async_resolve(options_.peers[peer].host, std::to_string(options_.peers[peer].port),
                          [weak = weak_from_this(), peer, socket, resolver, connected, attempt](
                              const boost::system::error_code& ec2, const tcp::resolver::results_type& results) {
                            auto self = weak.lock();
                            if (!self || self->closed_) return;
                            const Link& l = self->links_[peer];
                            if (l.state != LinkState::dialing || l.attempt_id != attempt) return;  // as on_connect
                            if (ec2) return self->dial_failed(peer, "cannot resolve: " + ec2.message());
                            asio::async_connect(*socket, results, connected);
                          });
}

void TcpTransport::Impl::on_connect(WorkerId peer, uint64_t attempt, const boost::system::error_code& ec,
                                    tcp::socket socket) {
  if (closed_) return;
  Link& l = links_[peer];
  DAGSIM_ASSERT(attempt <= l.attempt_id);  // read back: no completion is from the future
  // The link failed meanwhile, or failed and dialled again: a later attempt owns it now.
  if (l.state != LinkState::dialing || l.attempt_id != attempt) {
    DAGSIM_PROBE("net.stale_dial_completion_ignored");
    return;
  }
  if (ec) return dial_failed(peer, ec.message(), ec == asio::error::connection_refused);
  auto c = std::make_shared<Connection>(weak_from_this(), std::move(socket), dial_opening(peer),
                                        options_.connection_timeout, options_.limits, options_.trusted_network);
  c->set_socket_options(options_.connection_timeout);
  l.out = c;
  set_link_state(peer, LinkState::handshaking);
  c->start(options_.handshake_timeout);
}

void TcpTransport::Impl::dial_failed(WorkerId peer, const std::string& why, bool refused) {
  Link& l = links_[peer];
  if (!link_dialing(l.state)) return;
  l.out = nullptr;
  l.last_dial_error = why;
  // A refusal fails the link, unless the peer has meanwhile connected to us: then our dial raced
  // with the peer's restart (it met the dead life's closed port while the new life was starting),
  // and failing the link would close the new life's connection. Dial again instead.
  if (refused && l.in && l.in->established()) DAGSIM_PROBE("net.dial_refused_but_peer_connected_redial");
  if (refused && !(l.in && l.in->established())) {
    DAGSIM_PROBE("net.dial_refused_link_failed");
    return fail_link(peer, "connection refused: " + name(peer) + " at " + where(peer) + " is not running");
  }
  if (SteadyClock::now() - l.dial_started >= options_.connection_timeout) {
    DAGSIM_PROBE("net.dial_gave_up_at_connection_timeout");
    return fail_link(peer, "connection to " + name(peer) + " at " + where(peer) + " could not be opened within the connection timeout: " + why);
  }
  if (l.state == LinkState::handshaking) DAGSIM_PROBE("net.link_redial_after_handshake_failure");
  set_link_state(peer, LinkState::dialing);  // from handshaking, when its handshake failed
  // Back-off: 5 ms, doubling, at most 250 ms between attempts.
  const auto delay = std::chrono::milliseconds(std::min<int64_t>(250, int64_t{5} << std::min(l.attempts, 6u)));
  ++l.attempts;
  l.retry->expires_after(delay);
  l.retry->async_wait([weak = weak_from_this(), peer](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->closed_ || self->links_[peer].state != LinkState::dialing) return;
    self->connect(peer);
  });
}

void TcpTransport::Impl::arm_hold(WorkerId peer) {
  Link& l = links_[peer];
  DAGSIM_ASSERT(l.state != LinkState::closed);
  DAGSIM_ASSERT(silenced_ || l.blocked);  // only held traffic waits for the hold to expire
  if (l.hold_armed) return;
  l.hold_armed = true;
  l.hold->expires_after(options_.connection_timeout);
  l.hold->async_wait([weak = weak_from_this(), peer](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec == asio::error::operation_aborted || self->closed_) return;
    Link& link = self->links_[peer];
    link.hold_armed = false;
    if (self->silenced_ || link.blocked) {
      DAGSIM_PROBE("net.held_link_timed_out");
      self->fail_link(peer, "connection to " + self->name(peer) + " timed out (no traffic got through for the connection timeout)");
    }
  });
}

void TcpTransport::Impl::fail_link(WorkerId peer, const std::string& why) {
  DAGSIM_ASSERT(!closed_);
  DAGSIM_ASSERT(!why.empty());  // every failure is told to the inbox with its reason
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
  set_link_state(peer, LinkState::failed);
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
  DAGSIM_ASSERT(c->established());
  const PeerIdentity& p = c->peer();
  DAGSIM_ASSERT(p.worker < links_.size());  // the handshake refuses a worker id out of range
  Link& l = links_[p.worker];
  if (c->role() == Handshake::Role::dialer) {
    if (l.out != c) {
      // Not the link's connection any more (its dial was given up while the handshake ran): a
      // peer's timing decides that, so it is closed, never an assertion.
      DAGSIM_PROBE("net.dialled_connection_orphaned");
      c->close();
      return;
    }
    // Our new connection reached another life of the peer than the one still connected to us.
    if (l.in && l.in->peer().incarnation != p.incarnation) {
      DAGSIM_PROBE("net.link_open_after_failing_stale_inbound");
      l.out = nullptr;
      fail_link(p.worker, "connection to " + name(p.worker) + " lost: it restarted (incarnation " + std::to_string(p.incarnation) + ")");
      l.out = c;
    }
    set_link_state(p.worker, LinkState::open);
  } else {
    const bool stale_out = l.out && l.out->established() && l.out->peer().incarnation != p.incarnation;
    if (l.in || stale_out) {
      // The peer dialled again: it saw the old connection fail, or it restarted. Fail ours too, so
      // its notice comes before the new connection's messages.
      const bool restarted = l.incarnation && *l.incarnation != p.incarnation;
      if (restarted) {
        DAGSIM_PROBE("net.link_failed_peer_restarted");
      } else {
        DAGSIM_PROBE("net.link_failed_peer_reconnected");
      }
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
  // From the connection as it fails, or from on_envelope on a connection still open.
  DAGSIM_ASSERT(c->state() == ConnectionState::failed || c->state() == ConnectionState::open);
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
  DAGSIM_ASSERT(l.out != c && l.in != c);
}

void TcpTransport::Impl::on_refused(const std::shared_ptr<Connection>& c, const std::string& why) {
  DAGSIM_ASSERT(!c->established());
  DAGSIM_ASSERT(!c->closed());
  ++stats_.refused;
  DAGSIM_PROBE("net.handshake_refused");
  log("refused a connection (" + std::string(c->role() == Handshake::Role::dialer ? "dialled" : "accepted") + "): " + why);
  if (c->role() == Handshake::Role::dialer && c->claimed_peer() && links_[*c->claimed_peer()].out == c) {
    dial_failed(*c->claimed_peer(), "handshake refused: " + why);
  }
  c->close();
}

void TcpTransport::Impl::on_closed(const Connection& c) {
  DAGSIM_ASSERT(c.closed());
  if (c.counted_inbound) {
    DAGSIM_ASSERT(inbound_ > 0);
    --inbound_;
  }
}

void TcpTransport::Impl::on_envelope(const std::shared_ptr<Connection>& c, ReceivedEnvelope envelope) {
  DAGSIM_ASSERT(c->state() == ConnectionState::open);
  const WorkerId peer = c->peer().worker;
  DAGSIM_ASSERT(peer < links_.size());
  if (c->role() == Handshake::Role::dialer) {
    return on_error(c, "the peer sent an envelope on a connection that carries only ours");
  }
  if (silenced_) {
    // A crashed host hears nothing; the link fails once the traffic was held long enough.
    DAGSIM_PROBE("net.envelope_dropped_by_silenced_node");
    ++stats_.dropped;
    arm_hold(peer);
    return;
  }
  ++stats_.delivered;
  inbox_.offer(Delivery{Delivery::Kind::message, peer, std::move(envelope.payload), {}, c->peer().incarnation,
                        envelope.padding});
}

}  // namespace dagsim::net
