#include "scenarios/run/control_link.h"

#include <sys/socket.h>

#include <boost/asio/write.hpp>

#include <array>

#include "core/base/error.h"

namespace dagsim::scenarios {

namespace asio = boost::asio;

namespace {
net::EnvelopeLimits control_limits() {
  net::EnvelopeLimits l;
  l.max_payload_bytes = kMaxControlMessage;
  l.max_padding_bytes = 0;
  return l;
}
}  // namespace

net::HandshakeParams control_handshake_params(uint64_t cluster_id, uint32_t nodes, WorkerId self,
                                              std::vector<uint8_t> secret) {
  net::HandshakeParams p;
  p.cluster_id = cluster_id ^ 0xc0de'c0de'c0de'c0deULL;  // never confused with a data connection
  p.self = self;
  p.incarnation = 0;
  p.num_workers = nodes + 1;
  p.secret = std::move(secret);
  return p;
}

net::ChannelParams control_channel_params(uint64_t cluster_id, std::vector<std::string> names, WorkerId self) {
  net::ChannelParams p;
  p.cluster_id = cluster_id ^ 0xc0de'c0de'c0de'c0deULL;  // never confused with a data connection
  p.self = self;
  names.push_back(net::kLauncherName);
  p.names = std::move(names);
  return p;
}

namespace {
std::optional<net::Digest> mac_key(const std::optional<net::Opening>& opening, bool send) {
  if (!opening || opening->shared_secret() == nullptr) return std::nullopt;  // a socket pair, or TLS
  const net::SessionKeys& keys = opening->shared_secret()->keys();
  return send ? keys.send : keys.receive;
}
}  // namespace

net::Opening control_dial(uint64_t cluster_id, const std::vector<std::string>& names, WorkerId self,
                          const std::shared_ptr<const net::TlsContext>& tls, const std::vector<uint8_t>& secret) {
  const auto launcher = static_cast<WorkerId>(names.size());
  if (tls) return net::Opening(net::SecureChannel::dial(tls, control_channel_params(cluster_id, names, self), launcher));
  net::Nonce nonce{};
  const std::vector<uint8_t> random = net::random_bytes(nonce.size());
  std::copy(random.begin(), random.end(), nonce.begin());
  return net::Opening(net::Handshake::dial(control_handshake_params(cluster_id, static_cast<uint32_t>(names.size()), self, secret),
                                           launcher, nonce));
}

net::Opening control_accept(uint64_t cluster_id, const std::vector<std::string>& names,
                            const std::shared_ptr<const net::TlsContext>& tls, const std::vector<uint8_t>& secret) {
  const auto launcher = static_cast<WorkerId>(names.size());
  if (tls) return net::Opening(net::SecureChannel::accept(tls, control_channel_params(cluster_id, names, launcher)));
  net::Nonce nonce{};
  const std::vector<uint8_t> random = net::random_bytes(nonce.size());
  std::copy(random.begin(), random.end(), nonce.begin());
  return net::Opening(net::Handshake::accept(
      control_handshake_params(cluster_id, static_cast<uint32_t>(names.size()), launcher, secret), nonce));
}

ControlLink::ControlLink(asio::io_context& io, int fd, int family, std::optional<net::Opening> opening)
    : socket_(io), opening_(std::move(opening)), sealer_(mac_key(opening_, true)),
      decoder_(mac_key(opening_, false), control_limits()) {
  socket_.assign(asio::generic::stream_protocol(family, family == AF_UNIX ? 0 : IPPROTO_TCP), fd);
  if (opening_ && opening_->tls()) cipher_in_.resize(64 * 1024);
}

bool ControlLink::decrypt() {
  if (!opening_ || !opening_->tls()) return true;
  try {
    while (size_t n = opening_->tls()->read(decoder_.next_buffer())) decoder_.commit(n);
  } catch (const Error& e) {
    closed(e.detail());
    return false;
  }
  return true;
}

void ControlLink::start(OnMessage on_message, OnClosed on_closed, std::span<const uint8_t> already_read) {
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
  if (!already_read.empty()) {
    try {
      decoder_.push(already_read);
    } catch (const Error& e) {
      return closed(e.detail());
    }
  }
  // TLS: the peer's first messages may already wait, decrypted or not, inside the channel.
  if (!decrypt() || !deliver()) return;
  read();
}

bool ControlLink::deliver() {
  while (std::optional<net::ReceivedEnvelope> e = decoder_.pop()) {
    nlohmann::json message;
    try {
      message = control::parse_message(
          std::string_view(reinterpret_cast<const char*>(e->payload.data()), e->payload.size()));
    } catch (const Error& error) {
      closed(error.detail());
      return false;
    }
    if (on_message_) on_message_(message);
    if (closed_) return false;
  }
  return true;
}

void ControlLink::closed(const std::string& why) {
  if (closed_) return;
  close();
  if (on_closed_) on_closed_(why);
}

void ControlLink::read() {
  const bool tls = !cipher_in_.empty();
  const std::span<uint8_t> into = tls ? std::span<uint8_t>(cipher_in_) : decoder_.next_buffer();
  socket_.async_read_some(asio::buffer(into.data(), into.size()),
                          [self = shared_from_this(), tls](const boost::system::error_code& ec, size_t n) {
                            if (self->closed_) return;
                            if (ec) return self->closed(ec == asio::error::eof ? "closed" : ec.message());
                            try {
                              if (tls) {
                                self->opening_->tls()->feed({self->cipher_in_.data(), n});
                              } else {
                                self->decoder_.commit(n);
                              }
                            } catch (const Error& e) {
                              return self->closed(e.detail());
                            }
                            if (self->decrypt() && self->deliver()) self->read();
                          });
}

void ControlLink::send_json(const nlohmann::json& message) {
  if (closed_) return;
  Outgoing out;
  out.text = message.dump();
  if (out.text.size() > kMaxControlMessage) return closed("a control message over the limit (a bug)");
  out.sealed = sealer_.seal({reinterpret_cast<const uint8_t*>(out.text.data()), out.text.size()}, 0);
  if (opening_ && opening_->tls()) {
    net::SecureChannel& tls = *opening_->tls();
    tls.write(out.sealed.header);
    tls.write({reinterpret_cast<const uint8_t*>(out.text.data()), out.text.size()});
    tls.take_output(out.records);
    out.text = std::string();  // its bytes are in the records now
  }
  output_.push_back(std::move(out));
  write();
}

void ControlLink::write() {
  if (writing_ || output_.empty() || closed_) return;
  writing_ = true;
  const Outgoing& out = output_.front();
  std::array<asio::const_buffer, 3> buffers = {asio::buffer(out.sealed.header), asio::buffer(out.text),
                                               asio::buffer(out.sealed.mac.data(), out.sealed.mac_bytes)};
  if (!out.records.empty()) buffers = {asio::buffer(out.records), asio::const_buffer(), asio::const_buffer()};
  asio::async_write(socket_, buffers, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    self->output_.pop_front();
    if (ec) return self->closed(ec.message());
    self->write();
  });
}

void ControlLink::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

}  // namespace dagsim::scenarios
