// SecureChannel: mutual TLS 1.3 over memory BIOs, then the identity exchange. See
// secure_channel.h.
#include "net/secure_channel.h"

#include <algorithm>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/rpc/wire.h"

namespace dagsim::net {

namespace {

enum Kind : uint8_t { kHelloKind = 1, kReplyKind = 2 };
constexpr uint8_t kPlainFlag = 1;

std::string openssl_error(const char* fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  const char* reason = ERR_reason_error_string(code);
  return reason ? reason : fallback;
}

// The SSL's index for its channel's state (for the verify callback's message).
int state_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::string common_name(X509* cert) {
  if (cert == nullptr) return "";
  X509_NAME* subject = X509_get_subject_name(cert);
  const int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (i < 0) return "";
  const ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)), static_cast<size_t>(ASN1_STRING_length(cn)));
}

struct Identity {
  uint16_t version = 0;
  uint8_t kind = 0, flags = 0;
  uint64_t cluster = 0;
  uint32_t from = 0, incarnation = 0, to = 0, reserved = 0;
};

std::vector<uint8_t> encode(const Identity& id) {
  std::vector<uint8_t> out;
  rpc::WireWriter w(out);
  w.u32(kIdentityMagic);
  w.u16(id.version);
  w.u8(id.kind);
  w.u8(id.flags);
  w.u64(id.cluster);
  w.u32(id.from);
  w.u32(id.incarnation);
  w.u32(id.to);
  w.u32(0);
  return out;
}

}  // namespace

// TlsContext ------------------------------------------------------------------------------------

TlsContext::TlsContext(const NodeCredential& credential) : name_(credential.name) {
  ctx_ = SSL_CTX_new(TLS_method());
  if (ctx_ == nullptr) throw errors::invalid_argument("cannot make a TLS context: " + openssl_error("out of memory"));
  const auto refuse = [&](const std::string& what) {
    const std::string why = openssl_error("unknown");
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw errors::invalid_argument("the credential of " + quote(name_) + ": " + what + " (" + why + ")");
  };
  SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx_, 0);
  SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET);
  // Each piece of PEM through one reader; `install` takes it (false: refused).
  const auto install = [&](const std::string& pem, auto reader, auto free, auto use, const char* what) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    auto* object = bio == nullptr ? nullptr : reader(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    const bool ok = object != nullptr && use(object);
    free(object);
    if (!ok) refuse(what);
  };
  X509_STORE* store = SSL_CTX_get_cert_store(ctx_);
  install(credential.certificate_pem, PEM_read_bio_X509, X509_free,
          [&](X509* cert) { return SSL_CTX_use_certificate(ctx_, cert) == 1; }, "its certificate does not load");
  install(credential.key_pem, PEM_read_bio_PrivateKey, EVP_PKEY_free,
          [&](EVP_PKEY* key) { return SSL_CTX_use_PrivateKey(ctx_, key) == 1; }, "its key does not load");
  if (SSL_CTX_check_private_key(ctx_) != 1) refuse("its key is not its certificate's");
  install(credential.ca_pem, PEM_read_bio_X509, X509_free,
          [&](X509* ca) { return X509_STORE_add_cert(store, ca) == 1; }, "the CA's certificate does not load");
  if (!credential.crl_pem.empty()) {
    install(credential.crl_pem, PEM_read_bio_X509_CRL, X509_CRL_free,
            [&](X509_CRL* crl) { return X509_STORE_add_crl(store, crl) == 1; }, "the revocation list does not load");
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  }
  SSL_CTX_set_verify_depth(ctx_, 2);
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

// SecureChannel ---------------------------------------------------------------------------------

struct SecureChannel::State {
  std::shared_ptr<const TlsContext> tls;
  SSL* ssl = nullptr;
  BIO* in = nullptr;   // owned by ssl: what the peer sent
  BIO* out = nullptr;  // owned by ssl: what to send
  Role role = Role::dialer;
  ChannelParams params;
  std::optional<WorkerId> target;
  Status status = Status::in_progress;
  std::string error;
  PeerIdentity peer;
  std::optional<WorkerId> claimed;
  std::string peer_name;
  std::string verify_error;  // the verify callback's word on the peer's certificate
  bool handshaken = false;
  bool sent_identity = false;
  std::vector<uint8_t> identity;  // the peer's, as it arrives

  ~State() { SSL_free(ssl); }

  std::string peer_label() const {
    std::string label = peer_name.empty() ? std::string("a peer") : "the node whose certificate names " + quote(peer_name);
    if (claimed && *claimed < params.names.size()) label += " (" + quote(params.names[*claimed]) + ")";
    return label;
  }

  void refuse(std::string why) {
    if (status != Status::in_progress) return;
    status = Status::refused;
    error = std::move(why);
    ERR_clear_error();
  }

  void write_plain(std::span<const uint8_t> bytes) {
    size_t written = 0;
    if (!bytes.empty() && SSL_write_ex(ssl, bytes.data(), bytes.size(), &written) != 1) {
      throw errors::protocol_error("TLS write failed: " + openssl_error("unknown"));
    }
    DAGSIM_ASSERT(written == bytes.size());  // a memory BIO takes everything
  }

  void advance() {
    if (status != Status::in_progress) return;
    if (!handshaken) {
      const int r = SSL_do_handshake(ssl);
      if (r != 1) {
        const int e = SSL_get_error(ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
        std::string why = "the TLS handshake with " + peer_label() + " failed: " + openssl_error("the connection closed");
        if (!verify_error.empty()) why = verify_error;
        return refuse(why);
      }
      handshaken = true;
      X509* cert = SSL_get0_peer_certificate(ssl);
      if (cert == nullptr) return refuse("refused a peer without a certificate");  // FAIL_IF_NO_PEER_CERT holds this
      peer_name = common_name(cert);
      // A certificate of the run's CA that names no process of the run: refused at once, by name,
      // before it may say anything.
      if (std::find(params.names.begin(), params.names.end(), peer_name) == params.names.end()) {
        return refuse("refused the node whose certificate names " + quote(peer_name) + ": no process of this run has that name");
      }
    }
    if (role == Role::dialer && !sent_identity) {
      if (peer_name != params.names[*target]) {
        return refuse("refused " + peer_label() + ": dialled " + quote(params.names[*target]) +
                      ", and a node speaks only as the name in its certificate");
      }
      write_plain(encode(own_identity(kHelloKind, *target)));
      sent_identity = true;
    }
    while (identity.size() < kIdentityBytes) {
      uint8_t buffer[kIdentityBytes];
      size_t n = 0;
      if (SSL_read_ex(ssl, buffer, kIdentityBytes - identity.size(), &n) != 1) {
        const int e = SSL_get_error(ssl, 0);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
        std::string why = verify_error.empty() ? openssl_error("the connection closed") : verify_error;
        return refuse(peer_label() + " refused us or closed: " + why);
      }
      identity.insert(identity.end(), buffer, buffer + n);
    }
    on_identity();
  }

  Identity own_identity(uint8_t kind, WorkerId to) const {
    Identity id;
    id.version = params.version;
    id.kind = kind;
    id.flags = params.plain_after_handshake ? kPlainFlag : 0;
    id.cluster = params.cluster_id;
    id.from = params.self;
    id.incarnation = params.incarnation;
    id.to = to;
    return id;
  }

  void on_identity() {
    rpc::WireReader r(identity);
    Identity id;
    const uint32_t magic = r.u32("magic");
    id.version = r.u16("version");
    id.kind = r.u8("kind");
    id.flags = r.u8("flags");
    id.cluster = r.u64("cluster id");
    id.from = r.u32("from");
    id.incarnation = r.u32("incarnation");
    id.to = r.u32("to");
    id.reserved = r.u32("reserved");
    const uint32_t num = static_cast<uint32_t>(params.names.size());
    if (id.from < num) claimed = static_cast<WorkerId>(id.from);
    if (magic != kIdentityMagic) return refuse(peer_label() + " does not speak dagsim's channel (wrong magic)");
    if (id.version != params.version) {
      return refuse(peer_label() + " speaks channel version " + std::to_string(id.version) + ", this node " +
                    std::to_string(params.version));
    }
    const uint8_t expected_kind = role == Role::listener ? kHelloKind : kReplyKind;
    if (id.kind != expected_kind || id.reserved != 0 || (id.flags & ~kPlainFlag) != 0) {
      return refuse(peer_label() + " sent a malformed identity");
    }
    if (id.cluster != params.cluster_id) return refuse(peer_label() + " belongs to another cluster (another run)");
    if (id.from >= num || id.from == params.self) {
      return refuse("refused " + peer_label() + ": it claims worker id " + std::to_string(id.from) +
                    ", which is not a peer in this cluster of " + std::to_string(num));
    }
    if (params.names[id.from] != peer_name) {
      return refuse("refused the node whose certificate names " + quote(peer_name) + ": it claims to be " +
                    quote(params.names[id.from]) + ", and a node speaks only as the name in its certificate");
    }
    if (role == Role::dialer && id.from != *target) return refuse(peer_label() + " answered for another node");
    if (id.to != params.self) return refuse(peer_label() + " meant to reach worker " + std::to_string(id.to));
    if (id.incarnation > kMaxIncarnation) {
      return refuse(peer_label() + " claims incarnation " + std::to_string(id.incarnation) + ", past the " +
                    std::to_string(kMaxIncarnation) + " that ids carry (16 bits)");
    }
    if (((id.flags & kPlainFlag) != 0) != params.plain_after_handshake) {
      return refuse(peer_label() + (params.plain_after_handshake ? " is not in --trusted-network mode, and this node is"
                                                                 : " is in --trusted-network mode, and this node is not"));
    }
    if (role == Role::listener) write_plain(encode(own_identity(kReplyKind, static_cast<WorkerId>(id.from))));
    peer = {static_cast<WorkerId>(id.from), id.incarnation};
    status = Status::established;
  }
};

namespace {

int verify_callback(int ok, X509_STORE_CTX* store) {
  if (ok == 1) return 1;
  SSL* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* state = static_cast<SecureChannel::State*>(SSL_get_ex_data(ssl, state_index()));
  if (state != nullptr && state->verify_error.empty()) {
    X509* cert = X509_STORE_CTX_get_current_cert(store);
    const int depth = X509_STORE_CTX_get_error_depth(store);
    const std::string who = depth == 0 ? "the certificate of " + quote(common_name(cert))
                                       : "the issuer of the peer's certificate (" + quote(common_name(cert)) + ")";
    state->verify_error = "refused " + who + ": " + X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)) +
                          " (this run's CA did not sign it, or it was revoked)";
  }
  return 0;
}

}  // namespace

SecureChannel::SecureChannel(std::unique_ptr<State> state) : state_(std::move(state)) {}
SecureChannel::~SecureChannel() = default;
SecureChannel::SecureChannel(SecureChannel&&) noexcept = default;
SecureChannel& SecureChannel::operator=(SecureChannel&&) noexcept = default;

namespace {

std::unique_ptr<SecureChannel::State> new_state(std::shared_ptr<const TlsContext> tls, ChannelParams params,
                                                SecureChannel::Role role) {
  DAGSIM_ASSERT(tls && params.self < params.names.size());
  auto s = std::make_unique<SecureChannel::State>();
  s->tls = std::move(tls);
  s->params = std::move(params);
  s->role = role;
  s->ssl = SSL_new(s->tls->native());
  s->in = BIO_new(BIO_s_mem());
  s->out = BIO_new(BIO_s_mem());
  if (s->ssl == nullptr || s->in == nullptr || s->out == nullptr) throw errors::internal_error("cannot make a TLS connection");
  BIO_set_mem_eof_return(s->in, -1);  // an empty buffer means "wait", not end of stream
  SSL_set_bio(s->ssl, s->in, s->out);
  SSL_set_ex_data(s->ssl, state_index(), s.get());
  SSL_set_verify(s->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_callback);
  if (role == SecureChannel::Role::dialer) {
    SSL_set_connect_state(s->ssl);
  } else {
    SSL_set_accept_state(s->ssl);
  }
  return s;
}

}  // namespace

SecureChannel SecureChannel::dial(std::shared_ptr<const TlsContext> tls, ChannelParams params, WorkerId target) {
  DAGSIM_ASSERT(target < params.names.size() && target != params.self);
  auto s = new_state(std::move(tls), std::move(params), Role::dialer);
  s->target = target;
  s->claimed = target;
  s->advance();  // the ClientHello
  return SecureChannel(std::move(s));
}

SecureChannel SecureChannel::accept(std::shared_ptr<const TlsContext> tls, ChannelParams params) {
  return SecureChannel(new_state(std::move(tls), std::move(params), Role::listener));
}

size_t SecureChannel::feed(std::span<const uint8_t> bytes) {
  State& s = *state_;
  if (s.status == Status::refused || (s.status == Status::established && s.params.plain_after_handshake)) return 0;
  if (!bytes.empty() && BIO_write(s.in, bytes.data(), static_cast<int>(bytes.size())) != static_cast<int>(bytes.size())) {
    throw errors::internal_error("cannot buffer received TLS bytes");
  }
  s.advance();
  return bytes.size();
}

void SecureChannel::take_output(std::vector<uint8_t>& out) {
  const size_t n = BIO_ctrl_pending(state_->out);
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  const int got = BIO_read(state_->out, out.data() + at, static_cast<int>(n));
  DAGSIM_ASSERT(got == static_cast<int>(n));
}

std::vector<uint8_t> SecureChannel::take_output() {
  std::vector<uint8_t> out;
  take_output(out);
  return out;
}

bool SecureChannel::has_output() const { return BIO_ctrl_pending(state_->out) > 0; }
SecureChannel::Status SecureChannel::status() const { return state_->status; }
SecureChannel::Role SecureChannel::role() const { return state_->role; }
const std::string& SecureChannel::error() const { return state_->error; }
std::optional<WorkerId> SecureChannel::claimed_peer() const { return state_->claimed; }
const std::string& SecureChannel::peer_certificate_name() const { return state_->peer_name; }
bool SecureChannel::plain() const { return state_->params.plain_after_handshake; }
bool SecureChannel::peer_authenticated() const { return state_->handshaken; }

const PeerIdentity& SecureChannel::peer() const {
  DAGSIM_ASSERT(state_->status == Status::established);
  return state_->peer;
}

void SecureChannel::write(std::span<const uint8_t> bytes) {
  DAGSIM_ASSERT(state_->status == Status::established && !plain());
  state_->write_plain(bytes);
}

size_t SecureChannel::read(std::span<uint8_t> into) {
  State& s = *state_;
  DAGSIM_ASSERT(s.status == Status::established && !plain());
  size_t n = 0;
  if (into.empty()) return 0;
  if (SSL_read_ex(s.ssl, into.data(), into.size(), &n) == 1) return n;
  const int e = SSL_get_error(s.ssl, 0);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  if (e == SSL_ERROR_ZERO_RETURN) throw errors::protocol_error("closed by " + s.peer_label() + " (TLS close)");
  throw errors::protocol_error("a TLS record from " + s.peer_label() + " does not authenticate or is malformed: " +
                               openssl_error("unknown"));
}

std::vector<uint8_t> SecureChannel::take_unread() {
  DAGSIM_ASSERT(state_->status == Status::established && plain());
  std::vector<uint8_t> rest(BIO_ctrl_pending(state_->in));
  if (!rest.empty()) BIO_read(state_->in, rest.data(), static_cast<int>(rest.size()));
  return rest;
}

}  // namespace dagsim::net
