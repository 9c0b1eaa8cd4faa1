// TcpTransport's inside, shared by its files: tcp_transport.cc (sending, room, the delay/drop
// layer's queues, close), tcp_link.cc (dialling, a link's failure, what its connections report),
// tcp_connection.cc (one connection). See tcp_transport.h for the promises.
//
// A link is this node's side of its pair of connections to one peer: the connection it dials
// (`out`), the peer's connection to it (`in`), and the messages it holds for the peer. Its life is
// one LinkState (tcp_link_state.h); every move goes through set_link_state(), which asserts it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/prng.h"
#include "core/runtime/fiber_context.h"
#include "core/runtime/link_queue.h"
#include "net/opening.h"
#include "net/tcp_link_state.h"
#include "net/tcp_transport.h"

namespace dagsim::net {

class Connection;

class TcpTransport::Impl : public std::enable_shared_from_this<TcpTransport::Impl> {
 public:
  using SteadyClock = std::chrono::steady_clock;

  Impl(boost::asio::io_context& io, boost::asio::ip::tcp::acceptor acceptor, TcpTransportOptions options);

  void start();
  void send(WorkerId target, rpc::GatheredFrame payload, uint64_t padding);
  void close();
  void block(WorkerId peer, bool blocked);
  void silence();
  bool idle() const;
  bool wait_for_room(WorkerId target, std::optional<runtime::TimePoint> deadline);
  size_t queued_bytes(WorkerId peer) const;
  size_t queued_bytes() const;

  // Called by connections.
  void on_written();
  void on_established(const std::shared_ptr<Connection>& c);
  void on_error(const std::shared_ptr<Connection>& c, const std::string& why);
  void on_envelope(const std::shared_ptr<Connection>& c, ReceivedEnvelope envelope);
  void on_refused(const std::shared_ptr<Connection>& c, const std::string& why);
  void on_closed(const Connection& c);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  TcpTransportOptions options_;
  runtime::Channel<runtime::Delivery> inbox_;
  TcpTransportStats stats_;
  bool closed_ = false;
  bool silenced_ = false;
  size_t inbound_ = 0;
  // Senders waiting for room (wait_for_room) sleep here; whatever shrinks a queue wakes them.
  runtime::FiberMutex room_mutex_;
  runtime::FiberCondition room_;
  size_t room_waiters_ = 0;

 private:
  struct Outgoing {
    rpc::GatheredFrame payload;
    uint64_t padding = 0;
    SteadyClock::time_point due;
  };

  struct Link {
    LinkState state = LinkState::idle;  // changed only by set_link_state
    std::shared_ptr<Connection> out;    // ours to the peer (handshaking or open)
    std::shared_ptr<Connection> in;     // the peer's to us, once established
    std::optional<uint32_t> incarnation;
    std::deque<Outgoing> waiting;       // not yet due, not yet connected, or held
    size_t waiting_bytes = 0;           // their payloads
    runtime::LinkQueue queue;           // the delay/drop layer: the simulator's link model
    bool blocked = false;
    SteadyClock::time_point dial_started{};
    unsigned attempts = 0;
    // Counts connect() calls: an attempt's completion acts only if no later attempt started (a
    // link that failed and dialled again while an earlier connect was still in flight). Only grows.
    uint64_t attempt_id = 0;
    std::string last_dial_error;
    std::unique_ptr<boost::asio::steady_timer> shaping, retry, hold;
    bool shaping_armed = false, hold_armed = false;
  };

  // The one place a link's state changes: asserts the move and what the link holds after it.
  void set_link_state(WorkerId peer, LinkState to);
  void accept_next();
  void on_accept(const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket);
  void pump(WorkerId peer);
  void dial(WorkerId peer);
  void connect(WorkerId peer);
  void on_connect(WorkerId peer, uint64_t attempt, const boost::system::error_code& ec,
                  boost::asio::ip::tcp::socket socket);
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

}  // namespace dagsim::net
