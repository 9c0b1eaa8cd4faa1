// net/fuzz/tcpstore_fuzz.cc: the libFuzzer target for net/tcpstore/tcp_store_protocol.{h,cc}, the
// TCPStore decoder that `dagsim store` runs on bytes from any client that connects (PyTorch 1.13's
// protocol has no handshake and no authentication), built and run by scripts/fuzz.sh. It promises
// to report (abort, so libFuzzer saves the input) any of:
//  - decode_query or decode_watch_event throwing, crashing, leaking, or tripping ASan, UBSan or a
//    DAGSIM_ASSERT, on any bytes under any limits;
//  - a complete frame that consumed nothing or more than the buffer held, or that breaks the
//    limits (a key, a value or a key count over them); a malformed one without a reason; an
//    incomplete one whose `needed` is not past the buffer;
//  - the answer depending on how the bytes arrived: every proper prefix of a complete frame is
//    incomplete, and the frame decodes the same from a buffer that holds more after it;
//  - a decoded frame that does not encode back to exactly the bytes it was decoded from (the
//    protocol has one encoding per query and per event).
//
// Input layout: byte 0 flags (bit 0: watch events instead of queries; bits 1-2: limits, 0 the
// production ones, else keys and values of at most 2^(4 x bits) bytes and as many keys per
// CHECK/WAIT); the rest is the byte stream, decoded frame after frame until it ends or a frame is
// malformed or incomplete.
#include <cstring>
#include <string>

#include "net/fuzz/fuzz_util.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::fuzz {
namespace {

using tcpstore::Decoded;

constexpr size_t kMaxFrames = 64;

tcpstore::WireLimits limits_from(uint8_t flags) {
  tcpstore::WireLimits limits;
  const unsigned scale = (flags >> 1) & 3;
  if (scale != 0) {
    limits.max_key_bytes = uint64_t{1} << (4 * scale);
    limits.max_value_bytes = uint64_t{1} << (4 * scale);
    limits.max_keys = uint64_t{1} << (4 * scale);
  }
  return limits;
}

struct QueryCodec {
  using Frame = tcpstore::Query;
  static Decoded decode(std::span<const uint8_t> b, const tcpstore::WireLimits& l, Frame& out) {
    return tcpstore::decode_query(b, l, out);
  }
  static runtime::Bytes encode(const Frame& f) { return tcpstore::encode_query(f); }
  static bool within(const Frame& f, const tcpstore::WireLimits& l) {
    if (f.keys.size() > l.max_keys) return false;
    uint64_t total = 0;  // one key, and the keys of a CHECK or WAIT together
    for (const std::string& k : f.keys) {
      total += k.size();
      if (total > l.max_key_bytes) return false;
    }
    for (const runtime::Bytes& v : f.values) {
      if (v.size() > l.max_value_bytes) return false;
    }
    return true;
  }
};

struct WatchCodec {
  using Frame = tcpstore::WatchEvent;
  static Decoded decode(std::span<const uint8_t> b, const tcpstore::WireLimits& l, Frame& out) {
    return tcpstore::decode_watch_event(b, l, out);
  }
  static runtime::Bytes encode(const Frame& f) { return tcpstore::encode_watch_event(f); }
  static bool within(const Frame& f, const tcpstore::WireLimits& l) {
    return f.key.size() <= l.max_key_bytes && f.old_value.size() <= l.max_value_bytes &&
           f.new_value.size() <= l.max_value_bytes;
  }
};

template <typename Codec>
void check_stream(std::span<const uint8_t> stream, const tcpstore::WireLimits& limits) {
  size_t pos = 0;
  for (size_t frames = 0; frames < kMaxFrames && pos < stream.size(); ++frames) {
    const std::span<const uint8_t> rest = stream.subspan(pos);
    typename Codec::Frame frame;
    const Decoded d = Codec::decode(rest, limits, frame);
    if (tracing()) std::fprintf(stderr, "frame %zu at %zu: status %d consumed %zu needed %zu %s\n", frames, pos,
                                static_cast<int>(d.status), d.consumed, d.needed, d.error.c_str());
    if (d.status == Decoded::Status::malformed) {
      DAGSIM_FUZZ_CHECK(!d.error.empty());
      return;
    }
    if (d.status == Decoded::Status::incomplete) {
      DAGSIM_FUZZ_CHECK(d.needed > rest.size());
      return;
    }
    DAGSIM_FUZZ_CHECK(d.consumed > 0 && d.consumed <= rest.size());
    DAGSIM_FUZZ_CHECK(Codec::within(frame, limits));
    const std::span<const uint8_t> bytes = rest.first(d.consumed);
    // One encoding per frame: it encodes back to the bytes it came from.
    const runtime::Bytes again = Codec::encode(frame);
    DAGSIM_FUZZ_CHECK(again.size() == bytes.size() && std::memcmp(again.data(), bytes.data(), bytes.size()) == 0);
    // How the bytes arrive does not matter: the frame alone decodes the same, and every proper
    // prefix of it (a few, at both ends and in the middle) is incomplete.
    typename Codec::Frame alone;
    const Decoded exact = Codec::decode(bytes, limits, alone);
    DAGSIM_FUZZ_CHECK(exact.status == Decoded::Status::complete && exact.consumed == d.consumed);
    const size_t cuts[] = {0, 1, d.consumed / 2, d.consumed - 1};
    for (size_t cut : cuts) {
      if (cut >= d.consumed) continue;
      typename Codec::Frame part;
      const Decoded p = Codec::decode(bytes.first(cut), limits, part);
      DAGSIM_FUZZ_CHECK(p.status == Decoded::Status::incomplete && p.needed > cut);
    }
    pos += d.consumed;
  }
}

}  // namespace
}  // namespace dagsim::net::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim::net::fuzz;
  FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  const dagsim::net::tcpstore::WireLimits limits = limits_from(flags);
  const std::span<const uint8_t> stream = in.rest();
  if (flags & 1) {
    check_stream<WatchCodec>(stream, limits);
  } else {
    check_stream<QueryCodec>(stream, limits);
  }
  return 0;
}
