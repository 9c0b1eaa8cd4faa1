// Tests of the envelope MAC: it is RFC 8439's Poly1305 under a ChaCha20-derived one-time key
// (checked against OpenSSL's own ChaCha20-Poly1305 AEAD, an independent composition of the same
// pieces), tags in pieces equal tags whole, and every nonce and key gives its own tag.
#include "net/crypto.h"

#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <vector>

namespace dagsim::net {
namespace {

Digest key_of(uint8_t first) {
  Digest key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(first + i);
  return key;
}

// ChaCha20-Poly1305 (RFC 8439, 2.8) with no plaintext and `aad` as additional data: its tag is
// Poly1305, under the one-time key of (key, nonce), over aad || zeros to 16 || le64(|aad|) || le64(0).
Tag aead_tag(const Digest& key, uint64_t nonce, const std::vector<uint8_t>& aad) {
  std::array<uint8_t, 12> iv{};
  for (size_t i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(nonce >> (8 * i));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int n = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_chacha20_poly1305(), nullptr, key.data(), iv.data()), 1);
  EXPECT_EQ(EVP_EncryptUpdate(ctx, nullptr, &n, aad.data(), static_cast<int>(aad.size())), 1);
  EXPECT_EQ(EVP_EncryptFinal_ex(ctx, nullptr, &n), 1);
  Tag tag{};
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag.size()), tag.data()), 1);
  EVP_CIPHER_CTX_free(ctx);
  return tag;
}

std::vector<uint8_t> lengths_block(size_t aad_bytes) {
  std::vector<uint8_t> block(16, 0);
  for (size_t i = 0; i < 8; ++i) block[i] = static_cast<uint8_t>(uint64_t{aad_bytes} >> (8 * i));
  return block;
}

TEST(EnvelopeMac, IsPoly1305UnderRfc8439sOneTimeKey) {
  const Digest key = key_of(0x80);
  const EnvelopeMac mac(key);
  for (uint64_t nonce : {uint64_t{0}, uint64_t{1}, uint64_t{0x0706050403020100}, ~uint64_t{0}}) {
    for (size_t size : {size_t{0}, size_t{16}, size_t{35}, size_t{4096}}) {
      std::vector<uint8_t> aad(size);
      for (size_t i = 0; i < size; ++i) aad[i] = static_cast<uint8_t>(i * 7 + nonce);
      const std::vector<uint8_t> pad((16 - size % 16) % 16, 0);
      EXPECT_EQ(mac.tag(nonce, {aad, pad, lengths_block(size)}), aead_tag(key, nonce, aad)) << nonce << " " << size;
    }
  }
}

TEST(EnvelopeMac, PiecesGiveTheTagOfTheWhole) {
  const EnvelopeMac mac(key_of(1));
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31);
  const Tag whole = mac.tag(5, {data});
  mac.begin(5);
  for (size_t at = 0; at < data.size(); at += 4093) {
    mac.update(std::span<const uint8_t>(data).subspan(at, std::min<size_t>(4093, data.size() - at)));
  }
  EXPECT_EQ(mac.finish(), whole);
  EXPECT_NE(mac.tag(6, {data}), whole) << "another nonce, another tag";
  EXPECT_NE(EnvelopeMac(key_of(2)).tag(5, {data}), whole) << "another key, another tag";
  data[99999] ^= 1;
  EXPECT_NE(mac.tag(5, {data}), whole) << "a flipped bit, another tag";
}

}  // namespace
}  // namespace dagsim::net
