// net/fuzz/envelope_fuzz.cc: the libFuzzer target for net/envelope.{h,cc} (EnvelopeDecoder,
// EnvelopeSealer), built and run by scripts/fuzz.sh. It promises to report (abort, so libFuzzer
// saves the input) any of:
//  - the decoder throwing anything but dagsim::Error(protocol_error), or crashing, leaking, or
//    tripping ASan, UBSan or a DAGSIM_ASSERT, on any byte stream read in any chunking;
//  - next_buffer() handing out an empty buffer, an envelope over the limits, or envelopes that
//    add up to more bytes than arrived; mid_envelope() disagreeing with what was consumed;
//  - sealed envelopes that do not decode to exactly what was sealed (payload and padding), or,
//    under a key, a tampered stream decoding to anything but a prefix of what was sealed.
//
// Input layout (net/fuzz/make_corpus.py writes seeds in it):
//   byte 0  flags: bits 0-1 mode (0 decode trusted, 1 decode authenticated, 2 round trip trusted,
//           3 round trip authenticated), bit 2 hand a prefix to push() first, bit 3 tamper
//           (round trips), bit 4 mix in zero-byte commits
//   byte 1  chunk schedule (fuzz_util.h)
//   byte 2  limits: max_payload_bytes = 2^min(bits 0-4, 20), minus 1 if bit 5; bit 7 caps
//           max_padding_bytes at 64 KiB (otherwise the production 64 GiB)
//   decode modes: the rest is the byte stream.
//   round trips, tamper set: a count byte (bits 0-2: up to 7 flips), then per flip a u32 position
//           in the sealed stream (modulo its length) and a u8 xor mask (0 counts as 1);
//           then records until the input ends (at most 32 envelopes, about 1 MiB of stream):
//           ctl u8; bit 0 set: a u16 n, payload of 2n + (ctl >> 7) pattern bytes (up to 128 KiB,
//           past the 64 KiB staging buffer and the 16 KiB direct-read threshold), else a u8 n
//           and up to n literal bytes; padding: bit 1 a u16, else bit 2 a u8, else 0.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "net/envelope.h"
#include "net/fuzz/fuzz_util.h"

namespace dagsim::net::fuzz {
namespace {

// The fixed key of authenticated modes (make_corpus.py seals its seeds under the same bytes).
constexpr Digest kKey = [] {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(0x11 + 7 * i);
  return d;
}();

constexpr size_t kMaxEnvelopes = 32;
constexpr size_t kMaxStreamBytes = size_t{1} << 20;  // keeps one execution in milliseconds
// After this many reads the rest of a stream arrives in reads as large as next_buffer() allows:
// 1-byte reads of a 100 KiB payload would cost 100 000 commits an execution and learn nothing new
// after the first few thousand.
constexpr size_t kScheduledReads = 2048;

enum Flags : uint8_t { kAuthenticated = 1, kRoundTrip = 2, kPushPrefix = 4, kTamper = 8, kZeroCommits = 16 };

// Small limits: a forged header allocates its payload_length up front (checked against the limit
// first, see envelope.h), and the production 256 MiB would only make executions slow.
EnvelopeLimits limits_from(uint8_t b) {
  EnvelopeLimits limits;
  limits.max_payload_bytes = uint32_t{1} << std::min(b & 0x1f, 20);
  if (b & 0x20) limits.max_payload_bytes -= 1;  // limits that are not powers of two
  if (b & 0x80) limits.max_padding_bytes = 64 * 1024;
  return limits;
}

size_t wire_bytes(const ReceivedEnvelope& e, size_t mac_bytes) {
  return kEnvelopeHeaderBytes + e.payload.size() + static_cast<size_t>(e.padding) + mac_bytes;
}

struct Decoded {
  std::vector<ReceivedEnvelope> envelopes;
  std::optional<std::string> error;  // the protocol_error's message, if one was thrown
  bool mid_envelope = false;         // after the whole stream, when nothing was thrown
};

// Feeds `stream` the way TcpTransport does (read into next_buffer(), commit, pop everything),
// in the chunks the schedule picks; stops at the first protocol_error, as the connection would.
Decoded decode(EnvelopeDecoder& decoder, std::span<const uint8_t> stream, const EnvelopeLimits& limits,
               uint8_t flags, ChunkSchedule& chunks) {
  Decoded out;
  auto drain = [&] {
    while (std::optional<ReceivedEnvelope> e = decoder.pop()) {
      DAGSIM_FUZZ_CHECK(e->payload.size() <= limits.max_payload_bytes);
      DAGSIM_FUZZ_CHECK(e->padding <= limits.max_padding_bytes);
      out.envelopes.push_back(std::move(*e));
    }
  };
  try {
    if (flags & kPushPrefix) {
      const size_t k = chunks.draw() % (stream.size() + 1);
      decoder.push(stream.first(k));
      stream = stream.subspan(k);
      drain();
    }
    for (size_t reads = 0; !stream.empty(); ++reads) {
      const std::span<uint8_t> into = decoder.next_buffer();
      if (into.empty()) fail("next_buffer() handed out an empty buffer");
      size_t n = std::min(into.size(), stream.size());
      if (reads < kScheduledReads) n = std::min(n, chunks.next());
      if ((flags & kZeroCommits) && chunks.draw() % 8 == 0) n = 0;
      std::memcpy(into.data(), stream.data(), n);
      stream = stream.subspan(n);
      decoder.commit(n);
      drain();
    }
    out.mid_envelope = decoder.mid_envelope();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::protocol_error) fail("the decoder threw an Error that is not protocol_error", e.what());
    out.error = e.what();
  }
  return out;
}

// What holds for any stream: nothing decoded that did not arrive, and mid_envelope() true exactly
// when bytes are left over past the last whole envelope.
void check_accounting(const Decoded& d, size_t stream_bytes, size_t mac_bytes) {
  size_t used = 0;
  for (const ReceivedEnvelope& e : d.envelopes) used += wire_bytes(e, mac_bytes);
  DAGSIM_FUZZ_CHECK(used <= stream_bytes);
  if (!d.error) DAGSIM_FUZZ_CHECK(d.mid_envelope == (used < stream_bytes));
}

void fuzz_decode(uint8_t flags, const EnvelopeLimits& limits, ChunkSchedule& chunks, std::span<const uint8_t> stream) {
  const bool authenticated = (flags & kAuthenticated) != 0;
  EnvelopeDecoder decoder(authenticated ? std::optional<Digest>(kKey) : std::nullopt, limits);
  const Decoded d = decode(decoder, stream, limits, flags, chunks);
  check_accounting(d, stream.size(), authenticated ? kEnvelopeMacBytes : 0);
  if (tracing()) {
    std::fprintf(stderr, "decode %s: %zu bytes, %zu envelopes, %s\n", authenticated ? "authenticated" : "trusted",
                 stream.size(), d.envelopes.size(), d.error ? d.error->c_str() : "no error");
  }
}

struct Original {
  std::vector<uint8_t> payload;
  uint64_t padding = 0;
};

// `n` bytes that differ between envelopes (a payload delivered in another's place shows), built by
// doubling a 251-byte block: a byte loop here, instrumented, was most of an execution's time.
std::vector<uint8_t> pattern(size_t n, uint8_t salt) {
  std::vector<uint8_t> out(n);
  const size_t block = std::min<size_t>(n, 251);
  for (size_t i = 0; i < block; ++i) out[i] = static_cast<uint8_t>(i * 131 + salt);
  for (size_t have = block; have < n; have *= 2) std::memcpy(out.data() + have, out.data(), std::min(have, n - have));
  return out;
}

std::vector<Original> read_records(FuzzInput& in) {
  std::vector<Original> originals;
  size_t total = 0;
  while (!in.empty() && originals.size() < kMaxEnvelopes && total < kMaxStreamBytes) {
    const uint8_t ctl = in.u8();
    Original o;
    if (ctl & 1) {
      o.payload = pattern(size_t{in.u16()} * 2 + (ctl >> 7), static_cast<uint8_t>(ctl + originals.size() * 17));
    } else {
      const std::span<const uint8_t> literal = in.take(in.u8());
      o.payload.assign(literal.begin(), literal.end());
    }
    o.padding = (ctl & 2) ? in.u16() : (ctl & 4) ? in.u8() : 0;
    total += kEnvelopeHeaderBytes + o.payload.size() + o.padding + kEnvelopeMacBytes;
    originals.push_back(std::move(o));
  }
  return originals;
}

bool same(const ReceivedEnvelope& got, const Original& want) {
  return got.payload == want.payload && got.padding == want.padding;
}

void fuzz_round_trip(uint8_t flags, const EnvelopeLimits& limits, ChunkSchedule& chunks, FuzzInput& in) {
  const bool authenticated = (flags & kAuthenticated) != 0;
  const std::optional<Digest> key = authenticated ? std::optional<Digest>(kKey) : std::nullopt;
  struct Flip {
    uint32_t position;
    uint8_t mask;
  };
  std::vector<Flip> flips;
  if (flags & kTamper) {
    const size_t count = in.u8() & 7;
    for (size_t i = 0; i < count; ++i) {
      const uint32_t position = in.u32();
      const uint8_t mask = in.u8();
      flips.push_back({position, mask == 0 ? uint8_t{1} : mask});
    }
  }
  const std::vector<Original> originals = read_records(in);

  // Seal them as the sender writes them: header, payload, zero padding, MAC.
  EnvelopeSealer sealer(key);
  // Reused between executions (cleared, capacity kept): a fresh vector of hundreds of KiB is a
  // fresh mapping under ASan every time, and page faults were most of an execution's time.
  static std::vector<uint8_t> stream;
  stream.clear();
  std::vector<std::pair<size_t, size_t>> padding_ranges;  // [begin, end): bytes no MAC covers
  for (const Original& o : originals) {
    const SealedEnvelope sealed = sealer.seal(o.payload, o.padding);
    DAGSIM_FUZZ_CHECK(sealed.mac_bytes == (authenticated ? kEnvelopeMacBytes : 0));
    stream.insert(stream.end(), sealed.header.begin(), sealed.header.end());
    stream.insert(stream.end(), o.payload.begin(), o.payload.end());
    padding_ranges.emplace_back(stream.size(), stream.size() + o.padding);
    stream.resize(stream.size() + o.padding, 0);
    stream.insert(stream.end(), sealed.mac.begin(), sealed.mac.begin() + static_cast<std::ptrdiff_t>(sealed.mac_bytes));
  }

  // Flips inside padding change nothing the receiver keeps (padding is read and discarded, outside
  // the MAC by design: see envelope.h); any other flip is tampering.
  bool tampered = false;
  for (const Flip& f : flips) {
    if (stream.empty()) break;
    const size_t at = f.position % stream.size();
    stream[at] ^= f.mask;
    const bool in_padding = std::ranges::any_of(padding_ranges, [&](auto r) { return at >= r.first && at < r.second; });
    tampered = tampered || !in_padding;
  }

  // The first envelope over the limits must be refused; everything before it decodes.
  size_t within_limits = 0;
  while (within_limits < originals.size() && originals[within_limits].payload.size() <= limits.max_payload_bytes &&
         originals[within_limits].padding <= limits.max_padding_bytes) {
    ++within_limits;
  }

  EnvelopeDecoder decoder(key, limits);
  const Decoded d = decode(decoder, stream, limits, flags, chunks);
  check_accounting(d, stream.size(), authenticated ? kEnvelopeMacBytes : 0);
  if (tracing()) {
    std::fprintf(stderr, "round trip %s: %zu envelopes sealed (%zu within limits), %zu bytes, %s; %zu decoded, %s\n",
                 authenticated ? "authenticated" : "trusted", originals.size(), within_limits, stream.size(),
                 tampered ? "tampered" : "intact", d.envelopes.size(), d.error ? d.error->c_str() : "no error");
  }

  if (!tampered) {
    if (within_limits == originals.size()) {
      if (d.error) fail("an intact sealed stream was refused", d.error->c_str());
      DAGSIM_FUZZ_CHECK(d.envelopes.size() == originals.size());
      DAGSIM_FUZZ_CHECK(!d.mid_envelope);
    } else {
      if (!d.error) fail("an envelope over the limits was not refused");
      // Envelopes completed in the same commit as the refusal may be lost with the connection.
      DAGSIM_FUZZ_CHECK(d.envelopes.size() <= within_limits);
    }
    for (size_t i = 0; i < d.envelopes.size(); ++i) {
      if (!same(d.envelopes[i], originals[i])) fail("a decoded envelope differs from the sealed one");
    }
  } else if (authenticated) {
    // Under a key, tampering may cut the stream short but never changes what is delivered.
    DAGSIM_FUZZ_CHECK(d.envelopes.size() <= originals.size());
    for (size_t i = 0; i < d.envelopes.size(); ++i) {
      if (!same(d.envelopes[i], originals[i])) fail("a tampered envelope was delivered under a key");
    }
  }
}

}  // namespace
}  // namespace dagsim::net::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim::net::fuzz;
  FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  ChunkSchedule chunks(in.u8());
  const dagsim::net::EnvelopeLimits limits = limits_from(in.u8());
  if (flags & kRoundTrip) {
    fuzz_round_trip(flags, limits, chunks, in);
  } else {
    fuzz_decode(flags, limits, chunks, in.rest());
  }
  return 0;
}
