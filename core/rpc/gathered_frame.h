// GatheredFrame: a codec frame for a transport that writes from scattered buffers (TCP), so that
// a message's tensors go to the socket from their own storage and arrive where they can stay
// (issue 53, item 1). The simulator and the loopback keep the contiguous frames of codec.h,
// version 1, byte for byte (trace digests hash them).
//
// Version 2 ("aligned") frames: the same 32-byte header as version 1 (codec.h) with version 2;
// the body is
//   payload_length u32, payload | tensor_count u32 | per tensor: dtype u8 (top bit: a device u8
//   follows), rank u8, rank x dim i64 | then, per tensor in order: zero bytes up to the next
//   offset (from the frame's first byte) that is a multiple of kTensorAlignment, and its data.
// So every tensor's data starts at a 64-byte offset of the frame: a receiver holding the frame in
// one buffer hands out tensors that alias it (no copy), at addresses as aligned as the buffer's
// (malloc's 16 bytes at least, more than any element needs). The checksum is version 1's (XXH3-64
// of the body seeded with the header's first 24 bytes; 0 under FrameIntegrity::transport_mac).
//
// Promises: encode_gathered's pieces, concatenated, are a version-2 frame, and a pure function of
// the message; decode (any overload) reads both versions with every check of codec.h (and the
// padding must be zero: one message, one encoding). decode(Bytes&&) aliases the frame's tensors of
// at least kAliasBytes; smaller ones, and everything decode(span) reads, are copied.
//
// Lifetime: a GatheredFrame keeps its tensors alive (keep), and its pieces point into them: a
// sender must not modify a sent tensor in place until the transport wrote it (rpc_sync and the
// agent's replies never do: a reply's tensors are the handler's results).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/base/ids.h"
#include "core/rpc/codec.h"

namespace dagsim::rpc {

inline constexpr uint16_t kAlignedVersion = 2;
inline constexpr size_t kTensorAlignment = 64;
// Tensors at least this large travel as their own pieces and are aliased on receipt; smaller ones
// are copied (an iovec and an owner cost more than copying a few KiB).
inline constexpr size_t kAliasBytes = 4096;

struct GatheredFrame {
  // The header, payload, tensor metadata and any small tensors' data.
  Bytes head;
  // Then these, in order (tensor data, zero padding); they point into `keep` or static zeros.
  std::vector<std::span<const uint8_t>> tail;
  std::shared_ptr<const void> keep;
  size_t size = 0;  // head + tail

  static GatheredFrame of(Bytes bytes) {
    GatheredFrame f;
    f.size = bytes.size();
    f.head = std::move(bytes);
    return f;
  }
};

// A version-2 frame of `message`, as pieces. Throws as encode().
GatheredFrame encode_gathered(const Message& message, const CodecLimits& limits = {},
                              FrameIntegrity integrity = FrameIntegrity::checksum);

// Decodes a version-1 or version-2 frame it takes ownership of: a version-2 frame's tensors of at
// least kAliasBytes alias it. Throws as decode(span).
Message decode(Bytes&& frame, const CodecLimits& limits = {}, FrameIntegrity integrity = FrameIntegrity::checksum);

// A transport that writes a GatheredFrame's pieces where they lie (TcpTransport). The RPC agent
// sends through it when its Env's transport is one; its frames then arrive as Bytes, as any other.
class GatheringTransport {
 public:
  virtual ~GatheringTransport() = default;
  // As Transport::send, for a frame in pieces.
  virtual void send_gathered(WorkerId target, GatheredFrame frame) = 0;
};

}  // namespace dagsim::rpc
