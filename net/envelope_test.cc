// Tests of envelopes: what is sealed is decoded whatever the read sizes, large payloads go
// straight to their buffer, and a tampered, replayed, oversized or malformed envelope is refused
// with a message that says what is wrong.
#include "net/envelope.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/base/error.h"
#include "core/base/prng.h"

namespace dagsim::net {
namespace {

Digest key(uint8_t fill) {
  Digest d;
  d.fill(fill);
  return d;
}

std::vector<uint8_t> wire(EnvelopeSealer& sealer, const std::vector<uint8_t>& payload, uint64_t padding) {
  const SealedEnvelope s = sealer.seal(payload, padding);
  std::vector<uint8_t> out(s.header.begin(), s.header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  out.insert(out.end(), padding, 0);
  out.insert(out.end(), s.mac.begin(), s.mac.begin() + static_cast<std::ptrdiff_t>(s.mac_bytes));
  return out;
}

// Feeds `bytes` through next_buffer/commit in reads of at most `chunk` bytes.
std::vector<ReceivedEnvelope> decode_all(EnvelopeDecoder& d, const std::vector<uint8_t>& bytes, size_t chunk) {
  std::vector<ReceivedEnvelope> out;
  for (size_t i = 0; i < bytes.size();) {
    std::span<uint8_t> into = d.next_buffer();
    EXPECT_FALSE(into.empty());
    const size_t n = std::min({chunk, into.size(), bytes.size() - i});
    std::memcpy(into.data(), bytes.data() + i, n);
    d.commit(n);
    i += n;
    while (auto e = d.pop()) out.push_back(std::move(*e));
  }
  return out;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31);
  return v;
}

// A sender MACs a payload piece by piece as it writes (Note [MAC as it goes] in tcp_transport.cc):
// the steps give the bytes seal() gives, whatever the pieces.
TEST(Envelope, SealingInStepsGivesTheSameEnvelope) {
  const std::vector<uint8_t> payload = pattern(300000, 9);
  EnvelopeSealer whole(key(4)), stepwise(key(4));
  for (size_t piece : {size_t{1} << 17, size_t{7}, payload.size()}) {
    const SealedEnvelope expected = whole.seal(payload, 5);
    const auto header = stepwise.begin(payload.size(), 5);
    for (size_t at = 0; at < payload.size(); at += piece) {
      stepwise.update(std::span(payload).subspan(at, std::min(piece, payload.size() - at)));
    }
    const SealedEnvelope got = stepwise.finish();
    EXPECT_EQ(header, expected.header);
    EXPECT_EQ(got.header, expected.header);
    EXPECT_EQ(got.mac, expected.mac);
    EXPECT_EQ(got.mac_bytes, kEnvelopeMacBytes);
  }
}

TEST(Envelope, DecodesWhatWasSealedWhateverTheReadSizes) {
  for (bool authenticated : {true, false}) {
    for (size_t chunk : {size_t{1}, size_t{5}, size_t{4096}, size_t{1} << 22}) {
      const std::optional<Digest> k = authenticated ? std::optional(key(3)) : std::nullopt;
      EnvelopeSealer sealer(k);
      EnvelopeDecoder decoder(k, {});
      std::vector<uint8_t> bytes;
      const std::vector<std::pair<size_t, uint64_t>> shapes = {{0, 0}, {64, 0}, {10, 100000}, {1 << 20, 7}, {3, 0}};
      for (size_t i = 0; i < shapes.size(); ++i) {
        const std::vector<uint8_t> w = wire(sealer, pattern(shapes[i].first, static_cast<uint8_t>(i)), shapes[i].second);
        bytes.insert(bytes.end(), w.begin(), w.end());
      }
      const std::vector<ReceivedEnvelope> got = decode_all(decoder, bytes, chunk);
      ASSERT_EQ(got.size(), shapes.size()) << "chunk " << chunk;
      for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_EQ(got[i].payload, pattern(shapes[i].first, static_cast<uint8_t>(i)));
        EXPECT_EQ(got[i].padding, shapes[i].second);
      }
      EXPECT_FALSE(decoder.mid_envelope());
    }
  }
}

TEST(Envelope, ALargePayloadIsReadStraightIntoItsBuffer) {
  EnvelopeSealer sealer(key(1));
  EnvelopeDecoder decoder(key(1), {});
  const std::vector<uint8_t> bytes = wire(sealer, pattern(1 << 20, 9), 0);
  // The header arrives alone; the next buffer is then the payload's own memory, all of it.
  std::span<uint8_t> into = decoder.next_buffer();
  std::memcpy(into.data(), bytes.data(), kEnvelopeHeaderBytes);
  decoder.commit(kEnvelopeHeaderBytes);
  into = decoder.next_buffer();
  EXPECT_EQ(into.size(), size_t{1} << 20);
  EXPECT_TRUE(decoder.mid_envelope());
}

// Payloads of 8 MiB and more are allocated apart and advised onto huge pages before they are
// filled: on either side of that size, and at odd lengths that end mid huge page, every byte
// arrives in order and the MAC verifies.
TEST(Envelope, PayloadsOnEitherSideOfTheHugePageSizeArriveWhole) {
  EnvelopeSealer sealer(key(2));
  EnvelopeDecoder decoder(key(2), {});
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t n : {(size_t{8} << 20) - 1, size_t{8} << 20, (size_t{9} << 20) + 12345, size_t{100}}) {
    payloads.push_back(pattern(n, static_cast<uint8_t>(n)));
  }
  std::vector<uint8_t> bytes;
  for (const auto& p : payloads) {
    const std::vector<uint8_t> one = wire(sealer, p, 3);
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  const std::vector<ReceivedEnvelope> got = decode_all(decoder, bytes, 1 << 20);
  ASSERT_EQ(got.size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_TRUE(got[i].payload == payloads[i]) << "envelope " << i;
    EXPECT_EQ(got[i].padding, 3u);
  }
}

TEST(Envelope, RefusesATamperedByteAnywhereInTheHeaderPayloadOrMac) {
  EnvelopeSealer sealer(key(1));
  const std::vector<uint8_t> good = wire(sealer, pattern(100, 1), 0);
  // Byte 4 is payload_length's lowest: 100 becomes 96, so the MAC is read from the wrong place.
  for (size_t at : {size_t{4}, size_t{20}, good.size() - 1}) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x04;
    EnvelopeDecoder decoder(key(1), {});
    try {
      decode_all(decoder, bad, 1 << 20);
      ADD_FAILURE() << "byte " << at << " changed, still accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::protocol_error);
    }
  }
}

TEST(Envelope, RefusesAReplayedOrReorderedEnvelope) {
  EnvelopeSealer sealer(key(1));
  const std::vector<uint8_t> first = wire(sealer, pattern(10, 1), 0);
  const std::vector<uint8_t> second = wire(sealer, pattern(10, 2), 0);
  for (const auto& order : {std::vector{first, first}, std::vector{second, first}}) {
    EnvelopeDecoder decoder(key(1), {});
    std::vector<uint8_t> bytes;
    for (const auto& e : order) bytes.insert(bytes.end(), e.begin(), e.end());
    try {
      decode_all(decoder, bytes, 1 << 20);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MAC does not verify"), std::string::npos) << e.what();
    }
  }
}

TEST(Envelope, RefusesAnOversizedLengthBeforeAllocatingIt) {
  EnvelopeSealer sealer(std::nullopt);
  std::vector<uint8_t> bytes = wire(sealer, pattern(10, 1), 0);
  bytes[4] = bytes[5] = bytes[6] = bytes[7] = 0xff;  // payload_length 4 GiB - 1
  EnvelopeDecoder decoder(std::nullopt, EnvelopeLimits{.max_payload_bytes = 1 << 20, .max_padding_bytes = 1 << 20});
  try {
    decode_all(decoder, bytes, 1 << 20);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("payload_length 4294967295 exceeds the limit of 1048576"), std::string::npos)
        << e.what();
  }
}

TEST(Envelope, RefusesAnUnknownKindOrReservedBits) {
  for (size_t at : {size_t{0}, size_t{1}, size_t{2}}) {
    EnvelopeSealer sealer(std::nullopt);
    std::vector<uint8_t> bytes = wire(sealer, pattern(10, 1), 0);
    bytes[at] = 0x77;
    EnvelopeDecoder decoder(std::nullopt, {});
    EXPECT_THROW(decode_all(decoder, bytes, 3), Error) << "byte " << at;
  }
}

}  // namespace
}  // namespace dagsim::net
