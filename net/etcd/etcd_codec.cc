#include "net/etcd/etcd_codec.h"

#include <array>

#include "core/base/error.h"

namespace dagsim::net::etcd {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for an alphabet character, -1 otherwise.
constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr std::array<int8_t, 256> kDecode = decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = uint32_t{static_cast<uint8_t>(bytes[i])} << 16 | uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    if (rest == 2) n |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_encode(const Bytes& bytes) {
  return base64_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) throw errors::protocol_error("etcd reply: base64 of a length that is not a multiple of 4");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t padding = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    uint32_t n = 0;
    for (size_t j = 0; j < 4; ++j) {
      const int8_t v = j >= 4 - padding ? 0 : kDecode[static_cast<uint8_t>(text[i + j])];
      if (v < 0) throw errors::protocol_error("etcd reply: a character that is not base64");
      n = n << 6 | static_cast<uint32_t>(v);
    }
    out += static_cast<char>(n >> 16);
    if (padding < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (padding < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

Bytes base64_decode_bytes(std::string_view text) {
  const std::string s = base64_decode(text);
  return Bytes(s.begin(), s.end());
}

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<uint8_t>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

Json range_request(const std::string& key, bool count_only) {
  Json r = {{"key", base64_encode(key)}};
  if (count_only) r["count_only"] = true;
  return r;
}

Json put_request(const std::string& key, const Bytes& value) {
  return {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
}

Json mod_revision_equals(const std::string& key, uint64_t mod_revision) {
  return {{"key", base64_encode(key)}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(mod_revision)}};
}

Json value_equals(const std::string& key, const Bytes& value) {
  return {{"key", base64_encode(key)}, {"target", "VALUE"}, {"result", "EQUAL"}, {"value", base64_encode(value)}};
}

}  // namespace dagsim::net::etcd
