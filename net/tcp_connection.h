// One TCP connection of TcpTransport: its handshake (handshake.h, or TLS: secure_channel.h), then
// envelopes (envelope.h) both ways. Reads and writes run as Asio handlers that hold the
// connection alive and call back into the transport only while it exists.
//
// Its life is one ConnectionState (tcp_link_state.h): handshaking, open, failed (telling the
// transport why), closed. Every move goes through set_state(), which asserts it.
//
// Writing: small frames queued while a write is in progress leave together in one gathered
// write; payloads are never copied on the way out (scatter-gather), padding is written from one
// shared page of zeros, and an envelope's MAC (or TLS encryption) runs at most a bounded amount
// ahead of the socket (Note [MAC as it goes] in tcp_connection.cc).
// Threading: everything runs on the io_context's thread, which is the node's.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/transport.h"
#include "net/envelope.h"
#include "net/handshake.h"
#include "net/opening.h"
#include "net/tcp_link_state.h"
#include "net/tcp_transport.h"

namespace dagsim::net {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::weak_ptr<TcpTransport::Impl> owner, boost::asio::ip::tcp::socket socket, Opening opening,
             runtime::Duration timeout, EnvelopeLimits limits, bool trusted);

  // Starts the handshake: what it has to say, then reads, within `handshake_timeout`.
  // REQUIRES: called once, right after construction.
  void start(runtime::Duration handshake_timeout);

  ConnectionState state() const { return state_; }
  bool established() const { return handshake_.status() == Handshake::Status::established; }
  // The name in the peer's certificate ("" before TLS saw it, or with a shared secret).
  std::string certificate_name() {
    return handshake_.tls() ? handshake_.tls()->peer_certificate_name() : std::string();
  }
  bool closed() const { return state_ == ConnectionState::closed; }
  Handshake::Role role() const { return handshake_.role(); }
  const PeerIdentity& peer() const { return handshake_.peer(); }
  std::optional<WorkerId> claimed_peer() const { return handshake_.claimed_peer(); }
  bool writing() const { return writing_ || !queue_.empty(); }
  // Payload bytes queued or being written.
  size_t queued_bytes() const { return queued_bytes_; }
  // Messages queued or being written: lost if the connection fails now.
  size_t queued_messages() const;

  // REQUIRES: open.
  void queue_envelope(rpc::GatheredFrame payload, uint64_t padding);
  // Writes everything queued in gathered writes (small frames batch up while one is in flight).
  void flush(TcpTransportStats& stats);
  // Closes the socket; pending handlers run with operation_aborted and do nothing.
  void close();
  void set_socket_options(runtime::Duration timeout);

  bool counted_inbound = false;

 private:
  struct Writing {
    std::vector<uint8_t> head;  // handshake bytes, or an envelope's header (once begun)
    rpc::GatheredFrame payload;  // its pieces leave from where they lie
    uint64_t padding = 0;
    std::array<uint8_t, kEnvelopeMacBytes> mac{};
    size_t mac_bytes = 0;
    bool envelope = false;  // a message (counted when lost), not handshake bytes
    size_t maced = 0;       // payload bytes MACed (or encrypted) and handed on (Note [MAC as it goes])
    uint64_t padded = 0;    // padding bytes encrypted and handed on (TLS)
    size_t piece = 0;       // where `maced` is: payload.head (0) or payload.tail[piece - 1] ...
    size_t piece_at = 0;    // ... and how far into it

    // Calls each(span) on the next `n` payload bytes, piece by piece, and moves past them.
    template <typename Each>
    void take(size_t n, Each each) {
      DAGSIM_ASSERT(n <= payload.size - maced);
      maced += n;
      while (n > 0) {
        DAGSIM_ASSERT(piece <= payload.tail.size());
        const std::span<const uint8_t> p = piece == 0 ? std::span<const uint8_t>(payload.head) : payload.tail[piece - 1];
        const size_t k = std::min(n, p.size() - piece_at);
        if (k > 0) each(p.subspan(piece_at, k));
        piece_at += k;
        n -= k;
        if (piece_at == p.size()) ++piece, piece_at = 0;
      }
    }
  };

  // The one place state_ changes: asserts the move (tcp_link_state.h).
  void set_state(ConnectionState to);
  // Makes buffers_ the next bytes of in_flight_ to write. REQUIRES: all of buffers_ written.
  void gather();
  void gather_encrypted();
  bool encrypted();
  void write_some();
  void on_write(const boost::system::error_code& ec, size_t n);
  bool consume_written(size_t n);
  void queue_raw(std::vector<uint8_t> bytes);
  void read();
  void on_read(size_t n);
  // The handshake just finished: framing on, the transport told.
  void on_handshake_done(TcpTransport::Impl& owner, std::span<const uint8_t> got, size_t used);
  void arm_read_timeout();
  void fail(const std::string& why);

  std::weak_ptr<TcpTransport::Impl> owner_;
  boost::asio::ip::tcp::socket socket_;
  Opening handshake_;
  boost::asio::steady_timer timer_;
  runtime::Duration timeout_;
  EnvelopeLimits limits_;
  bool trusted_;
  ConnectionState state_ = ConnectionState::handshaking;
  std::optional<EnvelopeSealer> sealer_;
  std::optional<EnvelopeDecoder> decoder_;
  std::array<uint8_t, 256> handshake_buffer_{};
  std::vector<uint8_t> cipher_in_;   // TLS: what the socket read, before decryption
  std::vector<uint8_t> cipher_out_;  // TLS: encrypted records being written
  std::deque<Writing> queue_;
  std::vector<Writing> in_flight_;
  size_t next_ = 0;  // in_flight_[next_] is the first not wholly in buffers_ yet
  std::vector<boost::asio::const_buffer> buffers_;
  size_t written_buffers_ = 0;  // buffers_[0, written_buffers_) are on the wire
  size_t queued_bytes_ = 0;  // payloads in queue_ and in_flight_
  bool writing_ = false;
  bool read_timer_armed_ = false;
};

}  // namespace dagsim::net
