#include "core/rpc/codec.h"

#include <xxhash.h>
#if defined(__x86_64__)
#define XXH_DISPATCH_DISABLE_REPLACE 1  // call the _dispatch functions by name below (as hash.cc)
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "core/base/hash.h"
#include "core/rpc/gathered_frame.h"
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
  uint16_t version;
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
  if (version != kProtocolVersion && version != kAlignedVersion) {
    throw errors::protocol_error("frame.version: protocol version " + std::to_string(version) +
                                 ", this build speaks versions " + std::to_string(kProtocolVersion) + " and " +
                                 std::to_string(kAlignedVersion));
  }
  const uint16_t type = r.u16("frame.type");
  if (!is_known_message_type(type)) throw errors::protocol_error("frame.type: unknown message type " + hex(type));
  Header h;
  h.version = version;
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

namespace {

// A tensor's dtype, shape and size as the wire gives them, every check done (WireReader::tensor_data).
struct TensorMeta {
  Dtype dtype;
  Shape shape;
  size_t nbytes;
};

TensorMeta read_tensor_meta(WireReader& r, const std::string& where, uint32_t max_rank, Device* target) {
  uint8_t dtype = r.u8("tensor.dtype");
  if ((dtype & kTensorOnDevice) != 0) {
    if (target == nullptr) throw errors::protocol_error(where + ": a tensor for a device where only cpu tensors go");
    dtype &= static_cast<uint8_t>(~kTensorOnDevice);
    *target = Device::cuda(r.u8("tensor.device"));
  } else if (target != nullptr) {
    *target = Device::cpu();
  }
  if (dtype > static_cast<uint8_t>(Dtype::float64)) {
    throw errors::protocol_error(where + ": unknown dtype " + std::to_string(dtype));
  }
  const uint8_t rank = r.u8("tensor.rank");
  if (rank > max_rank) {
    throw errors::protocol_error(where + ": rank " + std::to_string(rank) + " exceeds the limit of " +
                                 std::to_string(max_rank));
  }
  Shape shape(rank);
  for (uint8_t d = 0; d < rank; ++d) {
    const int64_t size = r.i64("tensor.shape");
    if (size < 0) throw errors::protocol_error(where + ": negative size " + std::to_string(size) + " in its shape");
    shape[d] = size;
  }
  // The same checks as every tensor made here (tensor_nbytes): its sizes' product, zeros aside,
  // within int64, and at most kMaxTensorNumel elements. Off the wire, a protocol error.
  size_t nbytes = 0;
  try {
    nbytes = tensor_nbytes(shape, static_cast<Dtype>(dtype));
  } catch (const Error& e) {
    throw errors::protocol_error(where + ": " + e.detail());
  }
  return TensorMeta{static_cast<Dtype>(dtype), std::move(shape), nbytes};
}

// The data of `meta`, checked against the bytes present before anything is allocated: a forged
// shape cannot make us allocate.
std::span<const uint8_t> read_tensor_bytes(WireReader& r, const std::string& where, const TensorMeta& meta) {
  if (meta.nbytes > r.remaining()) {
    const size_t element = dtype_size(meta.dtype);
    throw errors::protocol_error(where + ": shape " + shape_str(meta.shape) + " needs " +
                                 std::to_string(meta.nbytes / element) + " elements, " + "but only " +
                                 std::to_string(r.remaining()) + " bytes remain (truncated or forged)");
  }
  const std::span<const uint8_t> data = r.bytes(meta.nbytes, "tensor.data");
  DAGSIM_ASSERT_EQ(data.size(), meta.nbytes);
  return data;
}

Tensor copied_tensor(const TensorMeta& meta, std::span<const uint8_t> data) {
  Tensor t = Tensor::empty(meta.shape, meta.dtype);
  DAGSIM_ASSERT_EQ(data.size(), t.nbytes());
  if (!data.empty()) std::memcpy(t.raw_data(), data.data(), data.size());
  return t;
}

}  // namespace

Tensor WireReader::tensor_data(const std::string& where, uint32_t max_rank, Device* target) {
  const TensorMeta meta = read_tensor_meta(*this, where, max_rank, target);
  return copied_tensor(meta, read_tensor_bytes(*this, where, meta));
}

namespace {

// The header of `message` with a body of `body_length` bytes, its checksum field 0, written at the
// start of `frame` (which encode then extends with the body, so the body is written once, in place).
void write_header(Bytes& frame, const Message& message, size_t body_length, uint16_t version = kProtocolVersion) {
  DAGSIM_ASSERT(frame.empty() && body_length <= UINT32_MAX);
  WireWriter h(frame);
  h.u32(kFrameMagic);
  h.u16(version);
  h.u16(static_cast<uint16_t>(message.type));
  h.u32(message.flags);
  h.u64(message.request_id);
  h.u32(static_cast<uint32_t>(body_length));
  h.u64(0);
  DAGSIM_ASSERT_EQ(frame.size(), kFrameHeaderBytes);  // read_header reads exactly this much
}

void put_checksum(Bytes& frame, uint64_t sum) {
  DAGSIM_ASSERT(frame.size() >= kFrameHeaderBytes);
  for (size_t i = 0; i < 8; ++i) frame[kChecksumOffset + i] = static_cast<uint8_t>(sum >> (8 * i));
}

// Fills in the checksum of a complete frame.
void write_checksum(Bytes& frame) {
  DAGSIM_ASSERT(frame.size() >= kFrameHeaderBytes);
  put_checksum(frame, checksum(std::span(frame).first(kChecksumOffset), std::span(frame).subspan(kFrameHeaderBytes)));
}

bool to_device(const Message& message, size_t i) { return !message.devices.empty() && !message.devices[i].is_cpu(); }

// The bytes of `message`'s tensor metadata (and, contiguous, of their data), refusing what the
// peer would refuse. Paired with read_header and decode: nothing is sent no peer would accept.
void check_encodable(const Message& message, const CodecLimits& limits) {
  DAGSIM_ASSERT_MSG(is_known_message_type(static_cast<uint16_t>(message.type)), "encoding an unknown message type");
  DAGSIM_ASSERT(limits.max_frame_bytes >= kFrameHeaderBytes);
  DAGSIM_ASSERT(message.devices.empty() || message.devices.size() == message.tensors.size());
  if (message.tensors.size() > limits.max_tensors) {
    throw errors::invalid_argument("rpc message: " + std::to_string(message.tensors.size()) +
                                   " tensors exceed the limit of " + std::to_string(limits.max_tensors));
  }
  for (const Tensor& t : message.tensors) {
    DAGSIM_ASSERT_MSG(t.defined(), "an undefined tensor in an rpc message");
    if (static_cast<uint32_t>(t.dim()) > limits.max_rank) {
      throw errors::invalid_argument("rpc message: a tensor of rank " + std::to_string(t.dim()) +
                                     " exceeds the limit of " + std::to_string(limits.max_rank));
    }
  }
}

size_t tensor_meta_bytes(const Message& message, size_t i) {
  return (to_device(message, i) ? 3 : 2) + 8 * static_cast<size_t>(message.tensors[i].dim());
}

void check_frame_size(size_t body_length, const CodecLimits& limits) {
  if (kFrameHeaderBytes + body_length > limits.max_frame_bytes || body_length > UINT32_MAX) {
    throw errors::invalid_argument("rpc message: " + std::to_string(kFrameHeaderBytes + body_length) +
                                   " bytes exceed the limit of " + std::to_string(limits.max_frame_bytes) +
                                   " bytes per frame");
  }
}

size_t align_up(size_t offset) { return (offset + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment; }

// Alignment padding comes from here (less than kTensorAlignment bytes at a time).
constexpr std::array<uint8_t, kTensorAlignment> kZeros{};

// XXH3-64 over pieces, equal to xxh3_64 over their concatenation.
class StreamingChecksum {
 public:
  explicit StreamingChecksum(uint64_t seed) : state_(XXH3_createState()) {
    if (state_ == nullptr) throw std::bad_alloc();
    XXH3_64bits_reset_withSeed(state_, seed);
  }
  ~StreamingChecksum() { XXH3_freeState(state_); }
  StreamingChecksum(const StreamingChecksum&) = delete;
  StreamingChecksum& operator=(const StreamingChecksum&) = delete;
  void update(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
#if defined(__x86_64__)
    XXH3_64bits_update_dispatch(state_, bytes.data(), bytes.size());
#else
    XXH3_64bits_update(state_, bytes.data(), bytes.size());
#endif
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

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
  check_encodable(message, limits);
  size_t body_length = 8 + message.payload.size();
  for (size_t i = 0; i < message.tensors.size(); ++i) body_length += tensor_meta_bytes(message, i) + message.tensors[i].nbytes();
  check_frame_size(body_length, limits);
  Bytes frame;
  frame.reserve(kFrameHeaderBytes + body_length);
  write_header(frame, message, body_length);
  WireWriter w(frame);
  w.u32(static_cast<uint32_t>(message.payload.size()));
  w.bytes(message.payload);
  w.u32(static_cast<uint32_t>(message.tensors.size()));
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    w.tensor_data(message.tensors[i], message.devices.empty() ? Device::cpu() : message.devices[i]);
  }
  DAGSIM_ASSERT_EQ(frame.size(), kFrameHeaderBytes + body_length);
  if (integrity == FrameIntegrity::checksum) write_checksum(frame);
  return frame;
}

GatheredFrame encode_gathered(const Message& message, const CodecLimits& limits, FrameIntegrity integrity) {
  check_encodable(message, limits);
  // The layout first: metadata, then each tensor's data at the next aligned offset of the frame.
  size_t head_length = kFrameHeaderBytes + 8 + message.payload.size();
  for (size_t i = 0; i < message.tensors.size(); ++i) head_length += tensor_meta_bytes(message, i);
  size_t end = head_length;
  for (const Tensor& t : message.tensors) end = align_up(end) + t.nbytes();
  check_frame_size(end - kFrameHeaderBytes, limits);

  GatheredFrame out;
  out.size = end;
  Bytes& head = out.head;
  // Small tensors before the first large one ride in the head.
  size_t in_head = 0, head_bytes = head_length;
  for (; in_head < message.tensors.size() && message.tensors[in_head].nbytes() < kAliasBytes; ++in_head) {
    head_bytes = align_up(head_bytes) + message.tensors[in_head].nbytes();
  }
  head.reserve(head_bytes);
  write_header(head, message, end - kFrameHeaderBytes, kAlignedVersion);
  WireWriter w(head);
  w.u32(static_cast<uint32_t>(message.payload.size()));
  w.bytes(message.payload);
  w.u32(static_cast<uint32_t>(message.tensors.size()));
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    const Tensor& t = message.tensors[i];
    DAGSIM_ASSERT_MSG(t.device().is_cpu(), "a device tensor is staged to the host before it is encoded");
    DAGSIM_ASSERT(t.dim() <= UINT8_MAX);
    if (to_device(message, i)) {
      DAGSIM_ASSERT(message.devices[i].index >= 0 && message.devices[i].index <= UINT8_MAX);
      w.u8(static_cast<uint8_t>(t.dtype()) | kTensorOnDevice);
      w.u8(static_cast<uint8_t>(message.devices[i].index));
    } else {
      w.u8(static_cast<uint8_t>(t.dtype()));
    }
    w.u8(static_cast<uint8_t>(t.dim()));
    for (int64_t size : t.shape()) w.i64(size);
  }
  DAGSIM_ASSERT_EQ(head.size(), head_length);
  size_t at = head_length;
  for (size_t i = 0; i < in_head; ++i) {
    const Tensor& t = message.tensors[i];
    head.resize(align_up(at), 0);
    w.bytes(std::span(static_cast<const uint8_t*>(t.raw_data()), t.nbytes()));
    at = head.size();
  }
  DAGSIM_ASSERT_EQ(head.size(), head_bytes);
  if (in_head < message.tensors.size()) {
    // The rest go from their own storage, kept alive with the frame.
    auto kept = std::make_shared<std::vector<Tensor>>(message.tensors.begin() + static_cast<std::ptrdiff_t>(in_head),
                                                      message.tensors.end());
    out.tail.reserve(2 * kept->size());
    for (const Tensor& t : *kept) {
      if (const size_t pad = align_up(at) - at; pad > 0) out.tail.emplace_back(kZeros.data(), pad);
      if (t.nbytes() > 0) out.tail.emplace_back(static_cast<const uint8_t*>(t.raw_data()), t.nbytes());
      at = align_up(at) + t.nbytes();
    }
    out.keep = std::move(kept);
  }
  DAGSIM_ASSERT_EQ(at, end);  // the pieces are the layout computed above
  if (integrity == FrameIntegrity::checksum) {
    StreamingChecksum sum(xxh3_64(std::span(head).first(kChecksumOffset)));
    sum.update(std::span(head).subspan(kFrameHeaderBytes));
    for (std::span<const uint8_t> piece : out.tail) sum.update(piece);
    put_checksum(head, sum.digest());
  }
  return out;
}

std::optional<size_t> frame_size(std::span<const uint8_t> prefix, const CodecLimits& limits) {
  if (prefix.size() < kFrameHeaderBytes) return std::nullopt;
  const size_t size = kFrameHeaderBytes + read_header(prefix, limits).body_length;
  DAGSIM_ASSERT(size >= kFrameHeaderBytes && size <= limits.max_frame_bytes);  // read_header bounded it
  return size;
}

namespace {

// Storage's way to hold bytes it did not allocate: a cpu "backend" whose one allocation is a
// slice of a received frame, which it keeps alive. Only Storage's constructor and destructor call
// it (every op routes on the storage's device, the cpu, never on its backend). It spares a change
// to Storage itself, which every file of the tree includes; a Storage constructor for borrowed
// bytes is the cleaner form once core/tensor takes one.
class FrameSlice final : public DeviceBackend {
 public:
  FrameSlice(std::shared_ptr<Bytes> frame, size_t offset, size_t nbytes)
      : frame_(std::move(frame)), offset_(offset), nbytes_(nbytes) {
    DAGSIM_ASSERT(nbytes_ > 0 && offset_ + nbytes_ <= frame_->size());
  }
  Device device() const override { return Device::cpu(); }
  const char* kind() const override { return "cpu (a received frame)"; }
  std::byte* allocate(size_t nbytes) override {
    DAGSIM_ASSERT_MSG(nbytes == nbytes_ && !allocated_, "a frame slice backs exactly one storage of its size");
    allocated_ = true;
    // The storage is writable like any tensor's: the frame is this slice's alone once decoded.
    return reinterpret_cast<std::byte*>(frame_->data()) + offset_;
  }
  void release(std::byte*, size_t) override {}
  [[noreturn]] static void unreachable() { DAGSIM_ASSERT_MSG(false, "a cpu frame slice has no streams or events"); std::abort(); }
  void launch(std::span<Storage* const>, std::span<Storage* const>, bool) override { unreachable(); }
  int new_stream() override { unreachable(); }
  int current_stream() const override { unreachable(); }
  void set_current_stream(int) override { unreachable(); }
  DeviceEvent record(int) override { unreachable(); }
  void wait(int, const DeviceEvent&) override { unreachable(); }
  bool query(const DeviceEvent&) const override { unreachable(); }
  void synchronize(const DeviceEvent&) override { unreachable(); }
  void read_to_host(const Storage&, std::byte*, size_t) override { unreachable(); }
  void write_from_host(Storage&, const std::byte*, size_t) override { unreachable(); }

 private:
  std::shared_ptr<Bytes> frame_;
  size_t offset_, nbytes_;
  bool allocated_ = false;
};

// decode's body: `owner`, when given, holds `frame`, and a version-2 frame's large tensors alias it.
Message decode_frame(std::span<const uint8_t> frame, const CodecLimits& limits, FrameIntegrity integrity,
                     const std::shared_ptr<Bytes>& owner) {
  DAGSIM_ASSERT(limits.max_frame_bytes >= kFrameHeaderBytes);
  DAGSIM_ASSERT(owner == nullptr || (owner->data() == frame.data() && owner->size() == frame.size()));
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
  if (h.version == kProtocolVersion) {
    for (uint32_t i = 0; i < count; ++i) {
      m.tensors.push_back(r.tensor_data("tensor " + std::to_string(i), limits.max_rank, &devices[i]));
      on_devices = on_devices || !devices[i].is_cpu();
    }
  } else {
    DAGSIM_ASSERT_EQ(h.version, kAlignedVersion);  // read_header's promise
    std::vector<TensorMeta> metas;
    metas.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      metas.push_back(read_tensor_meta(r, "tensor " + std::to_string(i), limits.max_rank, &devices[i]));
      on_devices = on_devices || !devices[i].is_cpu();
    }
    for (uint32_t i = 0; i < count; ++i) {
      const std::string where = "tensor " + std::to_string(i);
      const size_t at = kFrameHeaderBytes + r.position();
      const std::span<const uint8_t> pad = r.bytes(align_up(at) - at, "tensor.padding");
      if (std::any_of(pad.begin(), pad.end(), [](uint8_t b) { return b != 0; })) {
        throw errors::protocol_error(where + ": its alignment padding is not zero");
      }
      const std::span<const uint8_t> data = read_tensor_bytes(r, where, metas[i]);
      const size_t offset = static_cast<size_t>(data.data() - frame.data());
      DAGSIM_ASSERT(offset % kTensorAlignment == 0 && offset + data.size() <= frame.size());
      const bool aligned = reinterpret_cast<uintptr_t>(data.data()) % dtype_size(metas[i].dtype) == 0;
      if (owner != nullptr && data.size() >= kAliasBytes && aligned) {
        auto storage = std::make_shared<Storage>(data.size(), std::make_shared<FrameSlice>(owner, offset, data.size()));
        m.tensors.emplace_back(std::make_shared<TensorImpl>(std::move(storage), metas[i].shape, metas[i].dtype));
      } else {
        m.tensors.push_back(copied_tensor(metas[i], data));
      }
    }
  }
  if (on_devices) m.devices = std::move(devices);
  r.expect_end("frame body");
  // Paired with encode's limits: what decodes could have been encoded under the same limits.
  DAGSIM_ASSERT(m.tensors.size() == count && m.tensors.size() <= limits.max_tensors);
  return m;
}

}  // namespace

Message decode(std::span<const uint8_t> frame, const CodecLimits& limits, FrameIntegrity integrity) {
  return decode_frame(frame, limits, integrity, nullptr);
}

Message decode(Bytes&& frame, const CodecLimits& limits, FrameIntegrity integrity) {
  auto owner = std::make_shared<Bytes>(std::move(frame));
  return decode_frame(*owner, limits, integrity, owner);
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
