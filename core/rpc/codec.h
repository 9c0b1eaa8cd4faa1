// Codec: Message <-> frame bytes, the one wire format of both transports (DESIGN.md, "Wire
// protocol"). The simulator carries exactly these bytes, so sim runs exercise the decoder TCP uses.
//
// A frame is a 32-byte header and a body, all little-endian:
//   magic u32 "DAGS" | version u16 | type u16 | flags u32 | request_id u64 | body_length u32 |
//   checksum u64 (XXH3-64 of the body, seeded with XXH3-64 of the header's first 24 bytes; 0 on a
//                 transport that MACs every byte, see FrameIntegrity)
//   body: payload_length u32, payload | tensor_count u32, then per tensor:
//         dtype u8, rank u8, rank × dim i64, numel × dtype-size bytes of data (row-major)
// That is version 1, the contiguous frame encode() writes (the simulator and loopback carry it).
// TCP carries version 2, whose tensors' data sit at aligned offsets and go to the socket from their
// own storage (gathered_frame.h); decode() reads both.
//
// Promises: decode(encode(m)) reproduces m's type, flags, request id, payload and tensor values;
// encoding is a pure function of the message (same message, same bytes). Decoding trusts nothing:
// every length is checked against the bytes present and against CodecLimits before anything is
// allocated, and any bad frame (wrong magic or version, unknown type, bad checksum, truncation,
// trailing bytes, an impossible shape) throws protocol_error with a message naming what is wrong.
// A decoder never crashes and never allocates more than the frame's own size.
#pragma once

#include <optional>
#include <span>

#include "core/rpc/message.h"

namespace dagsim::rpc {

inline constexpr uint32_t kFrameMagic = 0x53474144;  // "DAGS" in little-endian byte order
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 32;

// What guards a frame against corruption in transit. The checksum is for transports that carry
// bytes without a MAC (the simulator's network, trusted-network TCP). Over a connection whose
// envelopes carry a MAC (net/envelope.h) the MAC covers every byte of the frame, and hashing it again
// cost a round trip of 1 MiB about 300 us (XXH3 on both sides, both ways, in the SSE2 loop
// core/base/hash.h now avoids; it would still be a third of that). Both ends of a
// connection agree on MACs (the whole cluster has them on or off), so the field needs no flag: under
// transport_mac the sender writes 0 there and the receiver requires 0 (a peer that checksums where
// it should not is misconfigured, not to be half-trusted).
enum class FrameIntegrity : uint8_t { checksum, transport_mac };

struct CodecLimits {
  size_t max_frame_bytes = size_t{256} << 20;
  uint32_t max_tensors = 65536;
  uint32_t max_rank = 16;
};

// Throws invalid_argument if the message would exceed `limits` (the peer would refuse it).
Bytes encode(const Message& message, const CodecLimits& limits = {},
             FrameIntegrity integrity = FrameIntegrity::checksum);

Message decode(std::span<const uint8_t> frame, const CodecLimits& limits = {},
               FrameIntegrity integrity = FrameIntegrity::checksum);

// Wraps an encoded body in a header with `message`'s type, flags and request id, and the checksum
// (encode's last step; its payload and tensors are ignored). Tests use it to forge bodies.
Bytes seal_frame(const Message& message, std::span<const uint8_t> body);

// For byte streams: the total size of the frame that `prefix` starts with, once its header is
// complete (nullopt before). Throws protocol_error for a header that can never be valid, so a
// stream reader drops a bad connection without waiting for a body that may never come.
std::optional<size_t> frame_size(std::span<const uint8_t> prefix, const CodecLimits& limits = {});

}  // namespace dagsim::rpc
