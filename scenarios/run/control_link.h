// ControlLink: the TCP launcher's line to one of its node processes (and the node's line back),
// carrying one message of control_messages.h (its one definition and codec) per envelope. Locally
// it is a Unix socket pair the launcher makes and
// the child inherits (no peer can reach it); for a node on another host it is a TCP connection the
// node opens to the launcher's control port, opened as the data plane's connections are
// (net/opening.h: mutual TLS, each end checked against the name in its certificate, the launcher
// being "launcher" and taking the worker id after the last node's; or the shared secret's
// handshake), and every message is then encrypted by TLS (or carries a MAC under the session key). Messages travel as envelopes (net/envelope.h)
// whose payload is the message's JSON text. Nothing on it is ever executed.
//
// Promises: messages arrive whole and in order; one larger than kMaxControlMessage, one that is not
// a JSON object (control::parse_message: nested too deep included), or one whose MAC does not
// verify closes the link (reported through on_closed, as is EOF). The receiver decodes the object
// (control::decode_command or decode_event); one that does not decode is the receiver's to refuse. Callbacks run as Asio handlers on the io_context's thread.
#pragma once

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "net/envelope.h"
#include "net/handshake.h"
#include "net/opening.h"
#include "scenarios/run/control_messages.h"

namespace dagsim::scenarios {

inline constexpr uint32_t kMaxControlMessage = 64 << 20;  // a record with tensors in it

class ControlLink : public std::enable_shared_from_this<ControlLink> {
 public:
  using OnMessage = std::function<void(const nlohmann::json&)>;
  using OnClosed = std::function<void(const std::string& why)>;

  // Takes ownership of `fd`, a connected stream socket of `family` (AF_UNIX, AF_INET, AF_INET6).
  // `opening`: how it was opened, established (nullopt: a socket pair, nothing to authenticate).
  ControlLink(boost::asio::io_context& io, int fd, int family, std::optional<net::Opening> opening);

  // Starts reading; callbacks until on_closed, which is called once. `already_read`: bytes that
  // came in the same read as the handshake's last message (the peer's first messages).
  void start(OnMessage on_message, OnClosed on_closed, std::span<const uint8_t> already_read = {});
  // Queues one message; never blocks.
  void send(const control::Command& command) { send_json(control::encode(command)); }
  void send(const control::Event& event) { send_json(control::encode(event)); }
  // True when everything sent has been written (a process about to exit waits for it).
  bool drained() const { return output_.empty() && !writing_; }
  void close();

 private:
  struct Outgoing {
    net::SealedEnvelope sealed;
    std::string text;
    std::vector<uint8_t> records;  // TLS: the envelope, encrypted (header and text then unused)
  };
  void send_json(const nlohmann::json& message);
  void read();
  // Hands every whole message decoded so far to on_message; false once the link closed.
  bool deliver();
  void write();
  void closed(const std::string& why);

  // TLS: decrypts what was fed into the decoder; false (after closed()) on a bad record.
  bool decrypt();

  boost::asio::generic::stream_protocol::socket socket_;
  std::optional<net::Opening> opening_;
  std::vector<uint8_t> cipher_in_;  // TLS: the socket's bytes before decryption
  net::EnvelopeSealer sealer_;
  net::EnvelopeDecoder decoder_;
  std::deque<Outgoing> output_;
  bool writing_ = false;
  bool closed_ = false;
  OnMessage on_message_;
  OnClosed on_closed_;
};

// The control link's handshake parameters: the cluster's, with the launcher as worker `nodes`.
net::HandshakeParams control_handshake_params(uint64_t cluster_id, uint32_t nodes, WorkerId self,
                                              std::vector<uint8_t> secret);
// The same for TLS: `names` are the nodes', the launcher's ("launcher") is added after them.
net::ChannelParams control_channel_params(uint64_t cluster_id, std::vector<std::string> names, WorkerId self);
// How a control connection opens: TLS when `tls` is set, else the shared secret.
net::Opening control_dial(uint64_t cluster_id, const std::vector<std::string>& names, WorkerId self,
                          const std::shared_ptr<const net::TlsContext>& tls, const std::vector<uint8_t>& secret);
net::Opening control_accept(uint64_t cluster_id, const std::vector<std::string>& names,
                            const std::shared_ptr<const net::TlsContext>& tls, const std::vector<uint8_t>& secret);

}  // namespace dagsim::scenarios
