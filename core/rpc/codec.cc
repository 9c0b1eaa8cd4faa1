#include "core/rpc/codec.h"

#include <bit>
#include <cstring>

#include "core/base/hash.h"
#include "core/rpc/wire.h"

namespace dagsim::rpc {

// Tensor data goes on the wire as the host's bytes: that is little-endian only on a
// little-endian host. A big-endian port must swap here (and in decode).
static_assert(std::endian::native == std::endian::little, "the codec writes tensor data in host byte order");

namespace {

constexpr size_t kChecksumOffset = 24;

// The header's fields seed the body's hash, so a flipped bit anywhere but the checksum itself
// is caught.
uint64_t checksum(std::span<const uint8_t> header_prefix, std::span<const uint8_t> body) {
  DAGSIM_ASSERT_EQ(header_prefix.size(), kChecksumOffset);  // every header field but the checksum itself
  return xxh3_64(body, xxh3_64(header_prefix));
}

std::string hex(uint64_t v) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

struct Header {
  MessageType type;
  uint32_t flags;
  uint64_t request_id;
  uint32_t body_length;
  uint64_t checksum;
};

Header read_header(std::span<const uint8_t> bytes, const CodecLimits& limits) {
  DAGSIM_ASSERT(bytes.size() >= kFrameHeaderBytes);  // decode and frame_size check before calling
  WireReader r(bytes.first(kFrameHeaderBytes));
  const uint32_t magic = r.u32("frame.magic");
  if (magic != kFrameMagic) {
    throw errors::protocol_error("frame.magic: " + hex(magic) + " is not a dagsim frame (expected " + hex(kFrameMagic) + ")");
  }
  const uint16_t version = r.u16("frame.version");
  if (version != kProtocolVersion) {
    throw errors::protocol_error("frame.version: protocol version " + std::to_string(version) +
                                 ", this build speaks version " + std::to_string(kProtocolVersion));
  }
  const uint16_t type = r.u16("frame.type");
  if (!is_known_message_type(type)) throw errors::protocol_error("frame.type: unknown message type " + hex(type));
  Header h;
  DAGSIM_ASSERT(message_type_name(static_cast<MessageType>(type)) != nullptr);
  h.type = static_cast<MessageType>(type);
  h.flags = r.u32("frame.flags");
  h.request_id = r.u64("frame.request_id");
  h.body_length = r.u32("frame.body_length");
  h.checksum = r.u64("frame.checksum");
  if (kFrameHeaderBytes + size_t{h.body_length} > limits.max_frame_bytes) {
    throw errors::protocol_error("frame.body_length: " + std::to_string(h.body_length) + " bytes exceeds the limit of " +
                                 std::to_string(limits.max_frame_bytes) + " bytes per frame");
  }
  return h;
}

}  // namespace

Tensor WireReader::tensor_data(const std::string& where, uint32_t max_rank, Device* target) {
  uint8_t dtype = u8("tensor.dtype");
  if ((dtype & kTensorOnDevice) != 0) {
    if (target == nullptr) throw errors::protocol_error(where + ": a tensor for a device where only cpu tensors go");
    dtype &= static_cast<uint8_t>(~kTensorOnDevice);
    *target = Device::cuda(u8("tensor.device"));
  } else if (target != nullptr) {
    *target = Device::cpu();
  }
  if (dtype > static_cast<uint8_t>(Dtype::float64)) {
    throw errors::protocol_error(where + ": unknown dtype " + std::to_string(dtype));
  }
  const uint8_t rank = u8("tensor.rank");
  if (rank > max_rank) {
    throw errors::protocol_error(where + ": rank " + std::to_string(rank) + " exceeds the limit of " +
                                 std::to_string(max_rank));
  }
  Shape shape(rank);
  for (uint8_t d = 0; d < rank; ++d) {
    const int64_t size = i64("tensor.shape");
    if (size < 0) throw errors::protocol_error(where + ": negative size " + std::to_string(size) + " in its shape");
    shape[d] = size;
  }
  // The same checks as every tensor made here (tensor_nbytes): its sizes' product, zeros aside,
  // within int64, and at most kMaxTensorNumel elements. Off the wire, a protocol error.
  uint64_t numel = 0;
  try {
    numel = tensor_nbytes(shape, static_cast<Dtype>(dtype)) / dtype_size(static_cast<Dtype>(dtype));
  } catch (const Error& e) {
    throw errors::protocol_error(where + ": " + e.detail());
  }
  const size_t element = dtype_size(static_cast<Dtype>(dtype));
  // Checked against the bytes present before allocating: a forged shape cannot make us allocate.
  if (numel > remaining() / element) {
    throw errors::protocol_error(where + ": shape " + shape_str(shape) + " needs " + std::to_string(numel) + " elements, " +
                                 "but only " + std::to_string(remaining()) + " bytes remain (truncated or forged)");
  }
  Tensor t = Tensor::empty(shape, static_cast<Dtype>(dtype));
  const std::span<const uint8_t> data = bytes(numel * element, "tensor.data");
  DAGSIM_ASSERT_EQ(data.size(), t.nbytes());
  if (!data.empty()) std::memcpy(t.raw_data(), data.data(), data.size());
  return t;
}

namespace {

// The header of `message` with a body of `body_length` bytes, its checksum field 0, written at the
// start of `frame` (which encode then extends with the body, so the body is written once, in place).
void write_header(Bytes& frame, const Message& message, size_t body_length) {
  DAGSIM_ASSERT(frame.empty() && body_length <= UINT32_MAX);
  WireWriter h(frame);
  h.u32(kFrameMagic);
  h.u16(kProtocolVersion);
  h.u16(static_cast<uint16_t>(message.type));
  h.u32(message.flags);
  h.u64(message.request_id);
  h.u32(static_cast<uint32_t>(body_length));
  h.u64(0);
  DAGSIM_ASSERT_EQ(frame.size(), kFrameHeaderBytes);  // read_header reads exactly this much
}

// Fills in the checksum of a complete frame.
void write_checksum(Bytes& frame) {
  DAGSIM_ASSERT(frame.size() >= kFrameHeaderBytes);
  const uint64_t sum = checksum(std::span(frame).first(kChecksumOffset), std::span(frame).subspan(kFrameHeaderBytes));
  for (size_t i = 0; i < 8; ++i) frame[kChecksumOffset + i] = static_cast<uint8_t>(sum >> (8 * i));
}

}  // namespace

Bytes seal_frame(const Message& message, std::span<const uint8_t> body) {
  Bytes frame;
  frame.reserve(kFrameHeaderBytes + body.size());
  write_header(frame, message, body.size());
  WireWriter(frame).bytes(body);
  write_checksum(frame);
  return frame;
}

Bytes encode(const Message& message, const CodecLimits& limits, FrameIntegrity integrity) {
  // Paired with read_header: nothing is sent that no peer would accept.
  DAGSIM_ASSERT_MSG(is_known_message_type(static_cast<uint16_t>(message.type)), "encoding an unknown message type");
  DAGSIM_ASSERT(limits.max_frame_bytes >= kFrameHeaderBytes);
  if (message.tensors.size() > limits.max_tensors) {
    throw errors::invalid_argument("rpc message: " + std::to_string(message.tensors.size()) +
                                   " tensors exceed the limit of " + std::to_string(limits.max_tensors));
  }
  size_t body_length = 8 + message.payload.size();
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    const Tensor& t = message.tensors[i];
    DAGSIM_ASSERT_MSG(t.defined(), "an undefined tensor in an rpc message");
    if (static_cast<uint32_t>(t.dim()) > limits.max_rank) {
      throw errors::invalid_argument("rpc message: a tensor of rank " + std::to_string(t.dim()) +
                                     " exceeds the limit of " + std::to_string(limits.max_rank));
    }
    const bool to_device = !message.devices.empty() && !message.devices[i].is_cpu();
    body_length += (to_device ? 3 : 2) + 8 * static_cast<size_t>(t.dim()) + t.nbytes();
  }
  if (kFrameHeaderBytes + body_length > limits.max_frame_bytes || body_length > UINT32_MAX) {
    throw errors::invalid_argument("rpc message: " + std::to_string(kFrameHeaderBytes + body_length) +
                                   " bytes exceed the limit of " + std::to_string(limits.max_frame_bytes) +
                                   " bytes per frame");
  }
  Bytes frame;
  frame.reserve(kFrameHeaderBytes + body_length);
  write_header(frame, message, body_length);
  WireWriter w(frame);
  w.u32(static_cast<uint32_t>(message.payload.size()));
  w.bytes(message.payload);
  w.u32(static_cast<uint32_t>(message.tensors.size()));
  DAGSIM_ASSERT(message.devices.empty() || message.devices.size() == message.tensors.size());
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    w.tensor_data(message.tensors[i], message.devices.empty() ? Device::cpu() : message.devices[i]);
  }
  DAGSIM_ASSERT_EQ(frame.size(), kFrameHeaderBytes + body_length);
  if (integrity == FrameIntegrity::checksum) write_checksum(frame);
  return frame;
}

std::optional<size_t> frame_size(std::span<const uint8_t> prefix, const CodecLimits& limits) {
  if (prefix.size() < kFrameHeaderBytes) return std::nullopt;
  const size_t size = kFrameHeaderBytes + read_header(prefix, limits).body_length;
  DAGSIM_ASSERT(size >= kFrameHeaderBytes && size <= limits.max_frame_bytes);  // read_header bounded it
  return size;
}

Message decode(std::span<const uint8_t> frame, const CodecLimits& limits, FrameIntegrity integrity) {
  DAGSIM_ASSERT(limits.max_frame_bytes >= kFrameHeaderBytes);
  if (frame.size() < kFrameHeaderBytes) {
    throw errors::protocol_error("frame: " + std::to_string(frame.size()) + " bytes is shorter than the " +
                                 std::to_string(kFrameHeaderBytes) + "-byte header (truncated)");
  }
  const Header h = read_header(frame, limits);
  const size_t expected = kFrameHeaderBytes + h.body_length;
  if (frame.size() != expected) {
    throw errors::protocol_error("frame: " + std::to_string(frame.size()) + " bytes, but its header says " +
                                 std::to_string(expected) + (frame.size() < expected ? " (truncated)" : " (trailing bytes)"));
  }
  const std::span<const uint8_t> body = frame.subspan(kFrameHeaderBytes);
  if (integrity == FrameIntegrity::transport_mac) {
    if (h.checksum != 0) {
      throw errors::protocol_error("frame.checksum: " + hex(h.checksum) +
                                   " on a connection whose MACs guard the frame (expected 0: is the peer's "
                                   "trusted-network setting the same as ours?)");
    }
  } else if (const uint64_t actual = checksum(frame.first(kChecksumOffset), body); actual != h.checksum) {
    throw errors::protocol_error("frame: checksum " + hex(actual) + " does not match the header's " + hex(h.checksum) +
                                 " (corrupted in transit)");
  }
  Message m;
  m.type = h.type;
  m.flags = h.flags;
  m.request_id = h.request_id;
  WireReader r(body);
  const uint32_t payload_length = r.u32("frame.payload_length");
  const std::span<const uint8_t> payload = r.bytes(payload_length, "frame.payload");
  m.payload.assign(payload.begin(), payload.end());
  const uint32_t count = r.u32("frame.tensor_count");
  if (count > limits.max_tensors) {
    throw errors::protocol_error("frame.tensor_count: " + std::to_string(count) + " exceeds the limit of " +
                                 std::to_string(limits.max_tensors));
  }
  // Each tensor takes at least 2 bytes: a forged count cannot make us reserve much.
  if (count > r.remaining() / 2) {
    throw errors::protocol_error("frame.tensor_count: " + std::to_string(count) + " tensors cannot fit in " +
                                 std::to_string(r.remaining()) + " bytes");
  }
  m.tensors.reserve(count);
  std::vector<Device> devices(count);
  bool on_devices = false;
  for (uint32_t i = 0; i < count; ++i) {
    m.tensors.push_back(r.tensor_data("tensor " + std::to_string(i), limits.max_rank, &devices[i]));
    on_devices = on_devices || !devices[i].is_cpu();
  }
  if (on_devices) m.devices = std::move(devices);
  r.expect_end("frame body");
  // Paired with encode's limits: what decodes could have been encoded under the same limits.
  DAGSIM_ASSERT(m.tensors.size() == count && m.tensors.size() <= limits.max_tensors);
  return m;
}

const char* message_type_name(MessageType type) {
  switch (type) {
    case MessageType::call: return "call";
    case MessageType::ret: return "ret";
    case MessageType::remote_call: return "remote_call";
    case MessageType::remote_ret: return "remote_ret";
    case MessageType::rref_fetch_call: return "rref_fetch_call";
    case MessageType::rref_fetch_ret: return "rref_fetch_ret";
    case MessageType::rref_user_delete: return "rref_user_delete";
    case MessageType::rref_fork_request: return "rref_fork_request";
    case MessageType::rref_child_accept: return "rref_child_accept";
    case MessageType::rref_ack: return "rref_ack";
    case MessageType::forward_autograd_req: return "forward_autograd_req";
    case MessageType::forward_autograd_resp: return "forward_autograd_resp";
    case MessageType::backward_autograd_req: return "backward_autograd_req";
    case MessageType::backward_autograd_resp: return "backward_autograd_resp";
    case MessageType::cleanup_autograd_context_req: return "cleanup_autograd_context_req";
    case MessageType::cleanup_autograd_context_resp: return "cleanup_autograd_context_resp";
    case MessageType::rref_backward_req: return "rref_backward_req";
    case MessageType::rref_backward_resp: return "rref_backward_resp";
    case MessageType::termination_probe_req: return "termination_probe_req";
    case MessageType::termination_probe_resp: return "termination_probe_resp";
    case MessageType::heartbeat: return "heartbeat";
    case MessageType::backward_abort_req: return "backward_abort_req";
    case MessageType::backward_abort_resp: return "backward_abort_resp";
    case MessageType::exception: return "exception";
  }
  if (is_service_type(static_cast<uint16_t>(type))) return is_request(type) ? "service_req" : "service_resp";
  return nullptr;
}

bool is_known_message_type(uint16_t value) { return message_type_name(static_cast<MessageType>(value)) != nullptr; }

std::optional<MessageType> request_type_named(std::string_view name) {
  // Every request type has the request bit and a low byte below the service range.
  for (uint16_t low = 0; low < kServiceFirst; ++low) {
    const auto type = static_cast<MessageType>(kRequest | low);
    const char* known = message_type_name(type);
    if (known != nullptr && name == known) return type;
  }
  return std::nullopt;
}

MessageType response_type_of(MessageType request) {
  DAGSIM_ASSERT_MSG(is_request(request), "response_type_of a response type");
  switch (request) {
    case MessageType::call: return MessageType::ret;
    case MessageType::remote_call: return MessageType::remote_ret;
    case MessageType::rref_fetch_call: return MessageType::rref_fetch_ret;
    case MessageType::rref_user_delete:
    case MessageType::rref_fork_request:
    case MessageType::rref_child_accept: return MessageType::rref_ack;
    case MessageType::forward_autograd_req: return MessageType::forward_autograd_resp;
    case MessageType::backward_autograd_req: return MessageType::backward_autograd_resp;
    case MessageType::cleanup_autograd_context_req: return MessageType::cleanup_autograd_context_resp;
    case MessageType::rref_backward_req: return MessageType::rref_backward_resp;
    case MessageType::termination_probe_req: return MessageType::termination_probe_resp;
    case MessageType::backward_abort_req: return MessageType::backward_abort_resp;
    default: break;
  }
  const uint16_t value = static_cast<uint16_t>(request);
  DAGSIM_ASSERT_MSG(is_service_type(value), "no response type for request type " + std::to_string(value));
  const auto response = static_cast<MessageType>(kResponse | (value & 0xff));
  DAGSIM_ASSERT(is_service_type(static_cast<uint16_t>(response)) && !is_request(response));
  return response;
}

}  // namespace dagsim::rpc
