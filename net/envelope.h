// Envelope: how codec frames travel on an established TCP connection (issue 10), as pure code (no
// sockets), so a fuzzer and tests drive it directly.
//
// Each message is an envelope, little-endian:
//   header 16 bytes: kind u8 (1 = message), flags u8 (0), reserved u16 (0), payload_length u32,
//                    padding u64
//   payload_length bytes of payload (a codec frame, opaque here)
//   padding zero bytes (Transport::send's padding: written from one shared page of zeros, read
//                    and discarded, never held; see Note [padding on the wire] in transport.h)
//   mac 16 bytes: Poly1305 under the one-time key ChaCha20 derives from the session key of this
//                 direction and nonce seq (net/crypto.h, EnvelopeMac), over header || payload;
//                 absent in trusted-network mode.
// seq counts the envelopes of one direction of one connection from 0, and is not sent: a replayed,
// dropped or reordered envelope fails its MAC, and no nonce repeats under a key (each connection
// has fresh keys from its handshake). Padding is outside the MAC: it carries nothing.
//
// The decoder trusts nothing: every field is checked before anything is allocated, the payload is
// allocated only after its length is checked against the limit (on a connection whose peer proved
// the secret, or that the operator declared trusted), and any bad envelope throws protocol_error
// naming what is wrong; the connection is then closed. It hands out the buffer the socket should
// read into next (next_buffer/commit), so a large payload is read straight into its final place
// (no copy) while small envelopes arrive many per read.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "net/crypto.h"

namespace dagsim::net {

inline constexpr size_t kEnvelopeHeaderBytes = 16;
inline constexpr size_t kEnvelopeMacBytes = 16;

struct EnvelopeLimits {
  uint32_t max_payload_bytes = uint32_t{256} << 20;  // CodecLimits::max_frame_bytes
  uint64_t max_padding_bytes = uint64_t{1} << 36;    // 64 GiB: padding costs the receiver no memory
};

// The parts of one outgoing envelope around its payload; the payload itself is never copied.
struct SealedEnvelope {
  std::array<uint8_t, kEnvelopeHeaderBytes> header{};
  std::array<uint8_t, kEnvelopeMacBytes> mac{};
  size_t mac_bytes = 0;  // 0 in trusted-network mode
};

// The sending half of one direction of one connection.
class EnvelopeSealer {
 public:
  // `key`: the direction's session key; nullopt for trusted-network mode (no MACs).
  explicit EnvelopeSealer(std::optional<Digest> key);
  // REQUIRES: payload.size() fits the peer's limits (the sender checks before it queues).
  SealedEnvelope seal(std::span<const uint8_t> payload, uint64_t padding);

  // The same in steps, so that a sender MACs a large payload piece by piece, each just before it
  // goes to the socket: the receiver then reads and verifies the first pieces while the sender
  // still MACs the rest, where a tag over the whole payload first kept both waiting. begin() gives
  // the header (in SealedEnvelope::header), update() takes the payload's bytes in order, finish()
  // fills in the MAC. One envelope at a time. REQUIRES: as seal(); update()s add up to payload_size.
  std::array<uint8_t, kEnvelopeHeaderBytes> begin(size_t payload_size, uint64_t padding);
  void update(std::span<const uint8_t> piece);
  SealedEnvelope finish();
  // False in trusted-network mode (update() is then free).
  bool macs() const { return mac_.has_value(); }

 private:
  std::optional<EnvelopeMac> mac_;
  uint64_t seq_ = 0;
  bool open_ = false;
  size_t left_ = 0;  // payload bytes update() has still to see
  SealedEnvelope sealing_;
};

struct ReceivedEnvelope {
  std::vector<uint8_t> payload;
  uint64_t padding = 0;
};

// The receiving half of one direction of one connection.
class EnvelopeDecoder {
 public:
  EnvelopeDecoder(std::optional<Digest> key, EnvelopeLimits limits);

  // Where the next bytes read from the socket go (never empty).
  std::span<uint8_t> next_buffer();
  // `n` bytes were written at the start of the last next_buffer(). Throws protocol_error for a bad
  // envelope; the decoder is then unusable.
  void commit(size_t n);
  // Bytes that arrived before the decoder existed (after the handshake, in the same read).
  void push(std::span<const uint8_t> bytes);
  // Decoded envelopes, in order.
  std::optional<ReceivedEnvelope> pop();
  // True while an envelope is partly received (a connection idle mid-envelope is timed out).
  bool mid_envelope() const;

 private:
  enum class State : uint8_t { header, payload, padding, mac };
  void process();
  void finish_payload();
  void verify();

  std::optional<EnvelopeMac> mac_state_;
  size_t mac_bytes_;
  EnvelopeLimits limits_;
  uint64_t seq_ = 0;
  std::vector<uint8_t> staging_;
  size_t begin_ = 0, end_ = 0;
  bool direct_ = false;  // the last next_buffer() pointed into payload_
  State state_ = State::header;
  std::array<uint8_t, kEnvelopeHeaderBytes> header_{};
  std::vector<uint8_t> payload_;
  size_t filled_ = 0;
  uint64_t padding_ = 0, padding_left_ = 0;
  std::array<uint8_t, kEnvelopeMacBytes> mac_{};
  size_t mac_filled_ = 0;
  std::deque<ReceivedEnvelope> ready_;
};

}  // namespace dagsim::net
