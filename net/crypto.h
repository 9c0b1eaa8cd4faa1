// Crypto: the security material of a real dagsim process (issue 10), all of it through OpenSSL.
//  - Secret: the cluster's shared secret, read from DAGSIM_SECRET or the file DAGSIM_SECRET_FILE
//    names (never from the command line, where `ps` shows it to every user of the host).
//  - random_bytes: nonces from the OS (RAND_bytes). The only randomness not drawn from the
//    scenario seed: workload data must match the simulator's, security material must not be
//    predictable.
//  - Hmac: HMAC-SHA256 under one key, keyed once and copied per message (keying costs more than a
//    small frame's digest).
//  - EnvelopeMac: the per-envelope MAC, Poly1305 under a one-time key that ChaCha20 derives from the
//    session key and the nonce (RFC 8439's construction, as in ChaCha20-Poly1305, with nothing
//    encrypted). OpenSSL's vectorised Poly1305 ran 12.7 GB/s over 1 MiB here where AES-256-GCM's
//    tag (GMAC, the MAC before it) ran 8.2 and HMAC-SHA256 about 1 (bench/bm_net.cc, BM_EnvelopeMac
//    beside BM_Memcpy); the MAC is most of what a large message costs over the raw socket. Each tag
//    needs a nonce never used before under its key: envelopes use their sequence number, with one
//    key per direction.
//  - sha256_hex: a file's digest as sha256sum prints it (scenario copies compared across hosts).
//  - equal_in_constant_time: MAC comparison that does not leak where the first difference is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dagsim::net {

using Digest = std::array<uint8_t, 32>;

struct Secret {
  std::vector<uint8_t> bytes;
  std::string source;  // where it came from, for messages ("DAGSIM_SECRET", "file /etc/dagsim/key")
};

// The secret from the environment: DAGSIM_SECRET (its bytes), else DAGSIM_SECRET_FILE (the file's
// bytes, a trailing newline dropped). Throws Error(invalid_argument) naming the variable or file
// when neither is set, the file cannot be read, or the secret is shorter than 16 bytes.
Secret secret_from_environment();

// `n` bytes from the OS's generator. Throws Error(internal_error) if it fails.
std::vector<uint8_t> random_bytes(size_t n);

// SHA-256 of `data` as 64 lowercase hex digits, what `sha256sum` prints for a file of those bytes
// (the digest a launcher and its nodes compare their scenario copies by).
std::string sha256_hex(std::span<const uint8_t> data);
// `bytes` as lowercase hex digits, two per byte.
std::string hex_of(std::span<const uint8_t> bytes);

// Constant-time comparison of two equally long byte strings (false if the lengths differ).
bool equal_in_constant_time(std::span<const uint8_t> a, std::span<const uint8_t> b);

class Hmac {
 public:
  explicit Hmac(std::span<const uint8_t> key);
  ~Hmac();
  Hmac(Hmac&&) noexcept;
  Hmac& operator=(Hmac&&) noexcept;

  // HMAC-SHA256(key, part0 || part1 || ...).
  Digest digest(std::initializer_list<std::span<const uint8_t>> parts) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

using Tag = std::array<uint8_t, 16>;

class EnvelopeMac {
 public:
  explicit EnvelopeMac(const Digest& key);
  ~EnvelopeMac();
  EnvelopeMac(EnvelopeMac&&) noexcept;
  EnvelopeMac& operator=(EnvelopeMac&&) noexcept;

  // The 128-bit tag of part0 || part1 || ... under nonce `nonce`.
  // REQUIRES: no nonce is used twice under one key.
  Tag tag(uint64_t nonce, std::initializer_list<std::span<const uint8_t>> parts) const;

  // The same tag computed as the bytes arrive: begin(nonce), update() with each piece in order,
  // then finish(). A receiver so MACs a payload while the rest of it is still on the wire.
  // tag() in between restarts the computation. REQUIRES: as tag().
  void begin(uint64_t nonce) const;
  void update(std::span<const uint8_t> bytes) const;
  Tag finish() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A span over a string's bytes (labels in MACs).
inline std::span<const uint8_t> bytes_of(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

}  // namespace dagsim::net
