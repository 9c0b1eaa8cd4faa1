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

struct Gmac::State {
  EVP_CIPHER_CTX* ctx = nullptr;  // keyed once; each tag sets only its nonce
  ~State() { EVP_CIPHER_CTX_free(ctx); }
};

Gmac::Gmac(const Digest& key) : state_(std::make_unique<State>()) {
  state_->ctx = EVP_CIPHER_CTX_new();
  DAGSIM_ASSERT_MSG(state_->ctx != nullptr, "OpenSSL: no cipher context");
  DAGSIM_ASSERT(EVP_EncryptInit_ex(state_->ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1);
  DAGSIM_ASSERT(EVP_CIPHER_CTX_ctrl(state_->ctx, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr) == 1);
  DAGSIM_ASSERT(EVP_EncryptInit_ex(state_->ctx, nullptr, nullptr, key.data(), nullptr) == 1);
}

Gmac::~Gmac() = default;
Gmac::Gmac(Gmac&&) noexcept = default;
Gmac& Gmac::operator=(Gmac&&) noexcept = default;

Tag Gmac::tag(uint64_t nonce, std::initializer_list<std::span<const uint8_t>> parts) const {
  begin(nonce);
  for (std::span<const uint8_t> part : parts) update(part);
  return finish();
}

void Gmac::begin(uint64_t nonce) const {
  DAGSIM_ASSERT(state_ != nullptr);
  std::array<uint8_t, 12> iv{};
  for (size_t i = 0; i < 8; ++i) iv[i] = static_cast<uint8_t>(nonce >> (8 * i));
  DAGSIM_ASSERT(EVP_EncryptInit_ex(state_->ctx, nullptr, nullptr, nullptr, iv.data()) == 1);
}

void Gmac::update(std::span<const uint8_t> bytes) const {
  // Additional authenticated data, in any number of pieces (OpenSSL carries a partial block over).
  // OpenSSL takes int lengths: a longer piece goes in parts.
  int n = 0;
  for (size_t done = 0; done < bytes.size();) {
    const size_t piece = std::min<size_t>(bytes.size() - done, size_t{1} << 30);
    DAGSIM_ASSERT(EVP_EncryptUpdate(state_->ctx, nullptr, &n, bytes.data() + done, static_cast<int>(piece)) == 1);
    done += piece;
  }
}

Tag Gmac::finish() const {
  int n = 0;
  DAGSIM_ASSERT(EVP_EncryptFinal_ex(state_->ctx, nullptr, &n) == 1);
  Tag out{};
  DAGSIM_ASSERT(EVP_CIPHER_CTX_ctrl(state_->ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(out.size()), out.data()) == 1);
  return out;
}

}  // namespace dagsim::net
