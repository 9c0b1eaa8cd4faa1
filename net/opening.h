// Opening: how a dagsim connection opens, whichever way the run authenticates: mutual TLS with
// per-node certificates (SecureChannel, the default), or the shared-secret handshake (Handshake)
// when the operator chose a shared secret (DAGSIM_SECRET; docs/tcp.md says what it costs). Both
// are pure state machines of the same shape, so the transport's connections and the control link
// drive either the same way.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "net/handshake.h"
#include "net/secure_channel.h"

namespace dagsim::net {

class Opening {
 public:
  explicit Opening(Handshake h) : v_(std::move(h)) {}
  explicit Opening(SecureChannel c) : v_(std::move(c)) {}
  size_t feed(std::span<const uint8_t> bytes) {
    return std::visit([&](auto& x) { return x.feed(bytes); }, v_);
  }
  std::vector<uint8_t> take_output() {
    return std::visit([](auto& x) { return x.take_output(); }, v_);
  }
  Handshake::Status status() const {
    return std::visit([](const auto& x) { return x.status(); }, v_);
  }
  Handshake::Role role() const {
    return std::visit([](const auto& x) { return x.role(); }, v_);
  }
  const std::string& error() const {
    return std::visit([](const auto& x) -> const std::string& { return x.error(); }, v_);
  }
  const PeerIdentity& peer() const {
    return std::visit([](const auto& x) -> const PeerIdentity& { return x.peer(); }, v_);
  }
  std::optional<WorkerId> claimed_peer() const {
    return std::visit([](const auto& x) { return x.claimed_peer(); }, v_);
  }
  // Non-null for TLS.
  SecureChannel* tls() { return std::get_if<SecureChannel>(&v_); }
  const Handshake* shared_secret() const { return std::get_if<Handshake>(&v_); }

 private:
  std::variant<Handshake, SecureChannel> v_;
};

}  // namespace dagsim::net
