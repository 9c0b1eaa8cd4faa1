#include "net/handshake.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/rpc/wire.h"

namespace dagsim::net {

namespace {

enum Kind : uint8_t { kHello = 1, kChallenge = 2, kResponse = 3 };

constexpr std::string_view kChallengeLabel = "dagsim challenge";
constexpr std::string_view kResponseLabel = "dagsim response";
constexpr std::string_view kDialerToListener = "dagsim session d->l";
constexpr std::string_view kListenerToDialer = "dagsim session l->d";

void put_prefix(rpc::WireWriter& w, uint16_t version, Kind kind) {
  w.u32(kHandshakeMagic);
  w.u16(version);
  w.u8(kind);
  w.u8(0);
}

// The identity part hello and challenge share, after the 8-byte prefix: cluster id u64, from u32,
// from's incarnation u32, to u32, reserved u32, nonce [32].
struct Identity {
  uint64_t cluster = 0;
  uint32_t from = 0, incarnation = 0, to = 0, reserved = 0;
  Nonce nonce{};
};

Identity read_identity(rpc::WireReader& r) {
  Identity id;
  id.cluster = r.u64("cluster id");
  id.from = r.u32("from");
  id.incarnation = r.u32("incarnation");
  id.to = r.u32("to");
  id.reserved = r.u32("reserved");
  std::ranges::copy(r.bytes(id.nonce.size(), "nonce"), id.nonce.begin());
  return id;
}

void write_identity(rpc::WireWriter& w, uint64_t cluster, uint32_t from, uint32_t incarnation, uint32_t to, const Nonce& nonce) {
  w.u64(cluster);
  w.u32(from);
  w.u32(incarnation);
  w.u32(to);
  w.u32(0);
  w.bytes(nonce);
}

const char* kind_name(uint8_t kind) {
  switch (kind) {
    case kHello: return "hello";
    case kChallenge: return "challenge";
    case kResponse: return "response";
  }
  return "?";
}

}  // namespace

Handshake::Handshake(Role role, HandshakeParams params, const Nonce& nonce)
    : role_(role), params_(std::move(params)), hmac_(params_.secret), nonce_(nonce) {
  DAGSIM_ASSERT(params_.self < params_.num_workers);
}

Handshake Handshake::dial(HandshakeParams params, WorkerId target, const Nonce& nonce) {
  DAGSIM_ASSERT(target < params.num_workers && target != params.self);
  Handshake h(Role::dialer, std::move(params), nonce);
  h.claimed_peer_ = target;
  rpc::WireWriter w(h.hello_);
  put_prefix(w, h.params_.version, kHello);
  write_identity(w, h.params_.cluster_id, h.params_.self, h.params_.incarnation, target, nonce);
  DAGSIM_ASSERT(h.hello_.size() == kHelloBytes);
  h.output_ = h.hello_;
  return h;
}

Handshake Handshake::accept(HandshakeParams params, const Nonce& nonce) {
  return Handshake(Role::listener, std::move(params), nonce);
}

size_t Handshake::expected_bytes() const {
  if (role_ == Role::listener) return hello_.empty() ? kHelloBytes : kResponseBytes;
  return kChallengeBytes;
}

size_t Handshake::feed(std::span<const uint8_t> bytes) {
  size_t used = 0;
  while (status_ == Status::in_progress && used < bytes.size()) {
    const size_t want = expected_bytes() - pending_.size();
    const size_t take = std::min(want, bytes.size() - used);
    pending_.insert(pending_.end(), bytes.begin() + static_cast<std::ptrdiff_t>(used),
                    bytes.begin() + static_cast<std::ptrdiff_t>(used + take));
    used += take;
    if (pending_.size() == expected_bytes()) {
      const std::vector<uint8_t> message = std::move(pending_);
      pending_.clear();
      on_message(message);
    }
  }
  return used;
}

std::vector<uint8_t> Handshake::take_output() { return std::exchange(output_, {}); }

const PeerIdentity& Handshake::peer() const {
  DAGSIM_ASSERT(status_ == Status::established);
  return peer_;
}

const SessionKeys& Handshake::keys() const {
  DAGSIM_ASSERT(status_ == Status::established);
  return keys_;
}

// Neither end can tell which of the two holds the wrong secret: each sees the other fail.
constexpr const char* kSecretMismatch =
    "it and this node hold different secrets, and either may be the wrong one (check DAGSIM_SECRET or "
    "DAGSIM_SECRET_FILE on both)";

std::string Handshake::peer_label() const {
  return claimed_peer_ ? "node " + std::to_string(*claimed_peer_) : std::string("an unidentified peer");
}

void Handshake::refuse(std::string why) {
  status_ = Status::refused;
  error_ = std::move(why);
  output_.clear();
}

void Handshake::on_message(std::span<const uint8_t> m) {
  rpc::WireReader r(m);
  const uint32_t magic = r.u32("magic");
  const uint16_t version = r.u16("version");
  const uint8_t kind = r.u8("kind");
  const uint8_t flags = r.u8("flags");
  if (magic != kHandshakeMagic) return refuse("not a dagsim handshake from " + peer_label() + " (bad magic)");
  if (version != params_.version) {
    return refuse(peer_label() + " speaks protocol version " + std::to_string(version) + ", this process " +
                  std::to_string(params_.version));
  }
  const uint8_t expected = role_ == Role::dialer ? kChallenge : hello_.empty() ? kHello : kResponse;
  if (kind != expected || flags != 0) {
    return refuse("expected a " + std::string(kind_name(expected)) + " from " + peer_label() + ", got kind " +
                  std::to_string(kind) + " flags " + std::to_string(flags));
  }
  switch (kind) {
    case kHello: return on_hello(m);
    case kChallenge: return on_challenge(m);
    case kResponse: return on_response(m);
  }
  DAGSIM_ASSERT_MSG(false, "unreachable handshake kind");
}

std::string Handshake::incarnation_beyond_ids(uint32_t incarnation) const {
  return peer_label() + " claims incarnation " + std::to_string(incarnation) + ", past the " +
         std::to_string(kMaxIncarnation) + " that ids carry (16 bits)";
}

void Handshake::on_hello(std::span<const uint8_t> m) {
  rpc::WireReader r(m.subspan(8));
  const auto [cluster, from, incarnation, to, reserved, peer_nonce] = read_identity(r);
  if (from < params_.num_workers) claimed_peer_ = static_cast<WorkerId>(from);
  if (cluster != params_.cluster_id) return refuse(peer_label() + " belongs to another cluster (another run)");
  if (from >= params_.num_workers || from == params_.self) {
    return refuse("a hello from worker id " + std::to_string(from) + ", which is not a peer in this cluster of " +
                  std::to_string(params_.num_workers));
  }
  if (to != params_.self) return refuse(peer_label() + " meant to reach worker " + std::to_string(to));
  if (reserved != 0) return refuse(peer_label() + " set reserved bits in its hello");
  if (incarnation > kMaxIncarnation) return refuse(incarnation_beyond_ids(incarnation));
  hello_.assign(m.begin(), m.end());
  peer_ = {static_cast<WorkerId>(from), incarnation};
  // The challenge: who this listener is, its nonce, and its proof of the secret.
  rpc::WireWriter w(challenge_);
  put_prefix(w, params_.version, kChallenge);
  write_identity(w, params_.cluster_id, params_.self, params_.incarnation, from, nonce_);
  const Digest mac = hmac_.digest({bytes_of(kChallengeLabel), hello_, challenge_});
  w.bytes(mac);
  DAGSIM_ASSERT(challenge_.size() == kChallengeBytes);
  output_ = challenge_;
  peer_nonce_ = peer_nonce;  // the session keys need it once the response proves the dialer
}

void Handshake::on_challenge(std::span<const uint8_t> m) {
  rpc::WireReader r(m.subspan(8));
  const auto [cluster, from, incarnation, to, reserved, peer_nonce] = read_identity(r);
  const std::span<const uint8_t> mac = r.bytes(32, "mac");
  if (cluster != params_.cluster_id) return refuse(peer_label() + " belongs to another cluster (another run)");
  if (from != *claimed_peer_) {
    return refuse("dialled worker " + std::to_string(*claimed_peer_) + " but worker " + std::to_string(from) + " answered");
  }
  if (to != params_.self || reserved != 0) return refuse(peer_label() + " answered a hello it was not sent");
  if (incarnation > kMaxIncarnation) return refuse(incarnation_beyond_ids(incarnation));
  const Digest expected = hmac_.digest({bytes_of(kChallengeLabel), hello_, m.first(kChallengeBytes - 32)});
  if (!equal_in_constant_time(mac, expected)) {
    return refuse(peer_label() + " could not prove the shared secret (its challenge MAC does not verify): " + kSecretMismatch);
  }
  challenge_.assign(m.begin(), m.end());
  std::vector<uint8_t> response;
  rpc::WireWriter w(response);
  put_prefix(w, params_.version, kResponse);
  w.bytes(hmac_.digest({bytes_of(kResponseLabel), hello_, challenge_}));
  DAGSIM_ASSERT(response.size() == kResponseBytes);
  output_ = std::move(response);
  establish(static_cast<WorkerId>(from), incarnation, peer_nonce);
}

void Handshake::on_response(std::span<const uint8_t> m) {
  const std::span<const uint8_t> mac = m.subspan(8, 32);
  const Digest expected = hmac_.digest({bytes_of(kResponseLabel), hello_, challenge_});
  if (!equal_in_constant_time(mac, expected)) {
    return refuse(peer_label() + " could not prove the shared secret (its response MAC does not verify): " + kSecretMismatch);
  }
  establish(peer_.worker, peer_.incarnation, peer_nonce_);
}

void Handshake::establish(WorkerId worker, uint32_t incarnation, const Nonce& peer_nonce) {
  const Nonce& nonce_a = role_ == Role::dialer ? nonce_ : peer_nonce;
  const Nonce& nonce_b = role_ == Role::dialer ? peer_nonce : nonce_;
  const Digest d_to_l = hmac_.digest({bytes_of(kDialerToListener), nonce_a, nonce_b});
  const Digest l_to_d = hmac_.digest({bytes_of(kListenerToDialer), nonce_a, nonce_b});
  keys_.send = role_ == Role::dialer ? d_to_l : l_to_d;
  keys_.receive = role_ == Role::dialer ? l_to_d : d_to_l;
  peer_ = {worker, incarnation};
  claimed_peer_ = worker;
  status_ = Status::established;
}

}  // namespace dagsim::net
