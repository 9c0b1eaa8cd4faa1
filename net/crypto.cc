#include "net/crypto.h"

#include <sys/stat.h>

#include <cstdio>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim::net {

namespace {
constexpr size_t kMinSecretBytes = 16;
}  // namespace

Secret secret_from_environment() {
  Secret secret;
  if (const char* value = std::getenv("DAGSIM_SECRET"); value != nullptr && *value != '\0') {
    const std::string text(value);
    secret.bytes.assign(text.begin(), text.end());
    secret.source = "DAGSIM_SECRET";
  } else if (const char* path = std::getenv("DAGSIM_SECRET_FILE"); path != nullptr && *path != '\0') {
    // As ssh does for a private key: a secret others may read is no secret.
    struct stat st {};
    if (::stat(path, &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      throw errors::invalid_argument(std::string("DAGSIM_SECRET_FILE: ") + path + " has mode " + mode +
                                     ": others can read it; make it the owner's alone (chmod 600 " + path + ")");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw errors::invalid_argument(std::string("DAGSIM_SECRET_FILE: cannot read ") + path);
    secret.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!secret.bytes.empty() && secret.bytes.back() == '\n') secret.bytes.pop_back();
    secret.source = std::string("file ") + path;
  } else {
    throw errors::invalid_argument(
        "no shared secret: set DAGSIM_SECRET or DAGSIM_SECRET_FILE (the same on every node; never on the command line)");
  }
  if (secret.bytes.size() < kMinSecretBytes) {
    throw errors::invalid_argument("the shared secret from " + secret.source + " is " + std::to_string(secret.bytes.size()) +
                                   " bytes; at least " + std::to_string(kMinSecretBytes) + " are needed");
  }
  return secret;
}

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> out(n);
  if (n > 0 && RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
    throw errors::internal_error("RAND_bytes failed: the OS random generator is unavailable");
  }
  return out;
}

std::string sha256_hex(std::span<const uint8_t> data) {
  std::array<uint8_t, 32> digest{};
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 || length != digest.size()) {
    throw errors::internal_error("SHA-256 failed (OpenSSL)");
  }
  return hex_of(digest);
}

std::string hex_of(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

bool equal_in_constant_time(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

struct Hmac::State {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;  // keyed once; digest() works on a copy
  ~State() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }
};

Hmac::Hmac(std::span<const uint8_t> key) : state_(std::make_unique<State>()) {
  state_->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  DAGSIM_ASSERT_MSG(state_->mac != nullptr, "OpenSSL has no HMAC");
  state_->keyed = EVP_MAC_CTX_new(state_->mac);
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                               OSSL_PARAM_construct_end()};
  const int ok = EVP_MAC_init(state_->keyed, key.data(), key.size(), params);
  DAGSIM_ASSERT_MSG(ok == 1, "HMAC-SHA256 init failed");
}

Hmac::~Hmac() = default;
Hmac::Hmac(Hmac&&) noexcept = default;
Hmac& Hmac::operator=(Hmac&&) noexcept = default;

Digest Hmac::digest(std::initializer_list<std::span<const uint8_t>> parts) const {
  DAGSIM_ASSERT(state_ != nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(state_->keyed);
  DAGSIM_ASSERT_MSG(ctx != nullptr, "HMAC context copy failed");
  for (std::span<const uint8_t> part : parts) {
    if (!part.empty()) DAGSIM_ASSERT(EVP_MAC_update(ctx, part.data(), part.size()) == 1);
  }
  Digest out{};
  size_t written = 0;
  const int ok = EVP_MAC_final(ctx, out.data(), &written, out.size());
  EVP_MAC_CTX_free(ctx);
  DAGSIM_ASSERT(ok == 1 && written == out.size());
  return out;
}

struct EnvelopeMac::State {
  EVP_CIPHER_CTX* chacha = nullptr;  // keyed once with the session key; each tag sets its nonce
  EVP_MAC* poly1305 = nullptr;
  EVP_MAC_CTX* mac = nullptr;  // keyed afresh per tag with its one-time key
  ~State() {
    EVP_MAC_CTX_free(mac);
    EVP_MAC_free(poly1305);
    EVP_CIPHER_CTX_free(chacha);
  }
};

EnvelopeMac::EnvelopeMac(const Digest& key) : state_(std::make_unique<State>()) {
  state_->chacha = EVP_CIPHER_CTX_new();
  DAGSIM_ASSERT_MSG(state_->chacha != nullptr, "OpenSSL: no cipher context");
  const std::array<uint8_t, 16> iv{};
  DAGSIM_ASSERT(EVP_EncryptInit_ex(state_->chacha, EVP_chacha20(), nullptr, key.data(), iv.data()) == 1);
  state_->poly1305 = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
  DAGSIM_ASSERT_MSG(state_->poly1305 != nullptr, "OpenSSL has no Poly1305");
  state_->mac = EVP_MAC_CTX_new(state_->poly1305);
  DAGSIM_ASSERT_MSG(state_->mac != nullptr, "OpenSSL: no Poly1305 context");
}

EnvelopeMac::~EnvelopeMac() = default;
EnvelopeMac::EnvelopeMac(EnvelopeMac&&) noexcept = default;
EnvelopeMac& EnvelopeMac::operator=(EnvelopeMac&&) noexcept = default;

Tag EnvelopeMac::tag(uint64_t nonce, std::initializer_list<std::span<const uint8_t>> parts) const {
  begin(nonce);
  for (std::span<const uint8_t> part : parts) update(part);
  return finish();
}

void EnvelopeMac::begin(uint64_t nonce) const {
  DAGSIM_ASSERT(state_ != nullptr);
  // OpenSSL's ChaCha20 IV: a 32-bit block counter (0 here), then RFC 8439's 96-bit nonce, whose
  // first 4 bytes are 0 and the rest the envelope's sequence number, little-endian. The one-time
  // key is the first 32 bytes of that block's keystream (RFC 8439, 2.6).
  std::array<uint8_t, 16> iv{};
  for (size_t i = 0; i < 8; ++i) iv[8 + i] = static_cast<uint8_t>(nonce >> (8 * i));
  DAGSIM_ASSERT(EVP_EncryptInit_ex(state_->chacha, nullptr, nullptr, nullptr, iv.data()) == 1);
  static constexpr std::array<uint8_t, 32> kZeros{};
  std::array<uint8_t, 32> one_time_key{};
  int n = 0;
  DAGSIM_ASSERT(EVP_EncryptUpdate(state_->chacha, one_time_key.data(), &n, kZeros.data(), kZeros.size()) == 1 &&
                n == static_cast<int>(kZeros.size()));
  DAGSIM_ASSERT(EVP_MAC_init(state_->mac, one_time_key.data(), one_time_key.size(), nullptr) == 1);
  OPENSSL_cleanse(one_time_key.data(), one_time_key.size());
}

void EnvelopeMac::update(std::span<const uint8_t> bytes) const {
  if (!bytes.empty()) DAGSIM_ASSERT(EVP_MAC_update(state_->mac, bytes.data(), bytes.size()) == 1);
}

Tag EnvelopeMac::finish() const {
  Tag out{};
  size_t written = 0;
  DAGSIM_ASSERT(EVP_MAC_final(state_->mac, out.data(), &written, out.size()) == 1 && written == out.size());
  return out;
}

}  // namespace dagsim::net
