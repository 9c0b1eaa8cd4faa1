// Tests of the wire codec: round trips of every message type and tensor shape, byte-exact
// determinism, and a decoder that rejects every kind of bad frame with protocol_error (never a
// crash, never a large allocation), including RapidCheck properties over random corruption.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/rpc/codec.h"
#include "core/rpc/gathered_frame.h"
#include "core/rpc/wire.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

#define EXPECT_THAT_THROWS_ERROR(expr, code, text) EXPECT_TRUE(throws_error([&] { (void)(expr); }, code, {text}))

Tensor filled(Shape shape, Dtype dtype, double start) {
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == Dtype::float64) {
      t.data<double>()[i] = start + 0.5 * static_cast<double>(i);
    } else {
      t.data<float>()[i] = static_cast<float>(start) + 0.25f * static_cast<float>(i);
    }
  }
  return t;
}

Message sample() {
  Message m;
  m.type = MessageType::forward_autograd_req;
  m.flags = 0xdeadbeef;
  m.request_id = (uint64_t{7} << 48) | 42;
  WireWriter w(m.payload);
  w.string("add");
  w.u64(123);
  m.tensors = {filled({3, 3}, Dtype::float64, 1.0), filled({}, Dtype::float32, -2.0), filled({0, 4}, Dtype::float64, 0),
               filled({2, 1, 2}, Dtype::float32, 9.0)};
  return m;
}

void expect_same(const Message& a, const Message& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.payload, b.payload);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].dtype(), b.tensors[i].dtype());
    EXPECT_EQ(a.tensors[i].shape(), b.tensors[i].shape());
    EXPECT_EQ(a.tensors[i].to_vector(), b.tensors[i].to_vector());
  }
}

TEST(Codec, RoundTripsEveryFieldAndTensor) {
  const Message m = sample();
  const Bytes frame = encode(m);
  expect_same(m, decode(frame));
  EXPECT_EQ(frame_size(frame), frame.size());
  EXPECT_EQ(frame_size(std::span(frame).first(kFrameHeaderBytes - 1)), std::nullopt);
}

TEST(Codec, EveryMessageTypeRoundTripsAndUnknownTypesAreRejected) {
  int known = 0;
  for (uint32_t v = 0; v <= 0xffff; ++v) {
    if (!is_known_message_type(static_cast<uint16_t>(v))) continue;
    ++known;
    Message m;
    m.type = static_cast<MessageType>(v);
    EXPECT_EQ(decode(encode(m)).type, m.type) << message_type_name(m.type);
  }
  EXPECT_EQ(known, 24 + 2 * kServiceCount);  // PyTorch's table and ours (heartbeat included), and the service range
  EXPECT_EQ(message_type_name(service_request(0)), std::string("service_req"));
  EXPECT_EQ(response_type_of(service_request(kTestServices + 1)), static_cast<MessageType>(kResponse | 0xb1));
  Bytes frame = encode(Message{});
  frame[6] = 0x70;  // type 0x0170: not a type, nor a service's
  EXPECT_THAT_THROWS_ERROR(decode(frame), ErrorCode::protocol_error, "frame.type: unknown message type 0x170");
  frame[6] = 0xc0;  // type 0x01c0: just past the service range
  EXPECT_THAT_THROWS_ERROR(decode(frame), ErrorCode::protocol_error, "frame.type: unknown message type 0x1c0");
}

TEST(Codec, EncodingIsAPureFunctionOfTheMessage) {
  EXPECT_EQ(encode(sample()), encode(sample()));
  // The header is little-endian, field by field.
  const Bytes frame = encode(sample());
  EXPECT_EQ(frame[0], 'D');
  EXPECT_EQ(frame[1], 'A');
  EXPECT_EQ(frame[2], 'G');
  EXPECT_EQ(frame[3], 'S');
  EXPECT_EQ(frame[4], kProtocolVersion);
  EXPECT_EQ(frame[6] | (frame[7] << 8), static_cast<int>(MessageType::forward_autograd_req));
}

TEST(Codec, BadHeadersAreRejectedWithWhatIsWrong) {
  const Bytes good = encode(sample());
  Bytes bad = good;
  bad[0] = 'X';
  EXPECT_THAT_THROWS_ERROR(decode(bad), ErrorCode::protocol_error, "is not a dagsim frame");
  EXPECT_THAT_THROWS_ERROR(frame_size(bad), ErrorCode::protocol_error, "is not a dagsim frame");
  bad = good;
  bad[4] = 9;
  EXPECT_THAT_THROWS_ERROR(decode(bad), ErrorCode::protocol_error, "protocol version 9, this build speaks versions 1 and 2");
  bad = good;
  bad[good.size() - 1] ^= 0x01;
  EXPECT_THAT_THROWS_ERROR(decode(bad), ErrorCode::protocol_error, "checksum");
  EXPECT_THAT_THROWS_ERROR(decode(std::span(good).first(10)), ErrorCode::protocol_error, "shorter than the 32-byte header");
  EXPECT_THAT_THROWS_ERROR(decode(std::span(good).first(good.size() - 1)), ErrorCode::protocol_error, "(truncated)");
  Bytes longer = good;
  longer.push_back(0);
  EXPECT_THAT_THROWS_ERROR(decode(longer), ErrorCode::protocol_error, "(trailing bytes)");
}

// Under a transport's MACs (FrameIntegrity::transport_mac) the frame carries no checksum: the same
// bytes but the checksum field, which is 0, and each end refuses the other mode's frames (the
// peers' trusted-network settings differ).
TEST(Codec, FramesUnderATransportMacCarryNoChecksum) {
  const Message m = sample();
  const Bytes checked = encode(m);
  const Bytes maced = encode(m, {}, FrameIntegrity::transport_mac);
  ASSERT_EQ(maced.size(), checked.size());
  EXPECT_TRUE(std::equal(maced.begin() + 24, maced.begin() + 32, Bytes(8, 0).begin()));
  EXPECT_TRUE(std::equal(maced.begin(), maced.begin() + 24, checked.begin()));
  EXPECT_TRUE(std::equal(maced.begin() + 32, maced.end(), checked.begin() + 32));
  expect_same(m, decode(maced, {}, FrameIntegrity::transport_mac));
  EXPECT_THAT_THROWS_ERROR(decode(maced), ErrorCode::protocol_error, "does not match the header's 0x0 (corrupted in transit)");
  EXPECT_THAT_THROWS_ERROR(decode(checked, {}, FrameIntegrity::transport_mac), ErrorCode::protocol_error,
                           "on a connection whose MACs guard the frame (expected 0");
}

TEST(Codec, LimitsBoundWhatADecoderAccepts) {
  const Bytes frame = encode(sample());
  EXPECT_THAT_THROWS_ERROR(decode(frame, CodecLimits{.max_frame_bytes = 64}), ErrorCode::protocol_error,
                           "exceeds the limit of 64 bytes per frame");
  EXPECT_THAT_THROWS_ERROR(decode(frame, CodecLimits{.max_tensors = 2}), ErrorCode::protocol_error,
                           "frame.tensor_count: 4 exceeds the limit of 2");
  EXPECT_THAT_THROWS_ERROR(decode(frame, CodecLimits{.max_rank = 2}), ErrorCode::protocol_error,
                           "tensor 3: rank 3 exceeds the limit of 2");
  EXPECT_THAT_THROWS_ERROR(encode(sample(), CodecLimits{.max_frame_bytes = 64}), ErrorCode::invalid_argument,
                           "bytes per frame");
}

// A frame with a valid header and checksum around a hand-written body: what a buggy or hostile
// peer could send.
Bytes forged(const std::function<void(WireWriter&)>& write_body) {
  Bytes body;
  WireWriter w(body);
  write_body(w);
  return seal_frame(Message{}, body);
}

TEST(Codec, ForgedBodiesAreRejectedBeforeAnyLargeAllocation) {
  // A tensor claiming 2^40 float64 elements in a tiny frame.
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) {
                             w.u32(0);
                             w.u32(1);
                             w.u8(1);
                             w.u8(1);
                             w.i64(int64_t{1} << 40);
                           })),
                           ErrorCode::protocol_error, "tensor 0: shape [1099511627776] needs 1099511627776 elements");
  // A shape whose element count overflows 64 bits.
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) {
                             w.u32(0);
                             w.u32(1);
                             w.u8(0);
                             w.u8(2);
                             w.i64(int64_t{1} << 40);
                             w.i64(int64_t{1} << 40);
                           })),
                           ErrorCode::protocol_error, "the product of its sizes passes 2^63");
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) {
                             w.u32(0);
                             w.u32(1);
                             w.u8(1);
                             w.u8(1);
                             w.i64(-3);
                           })),
                           ErrorCode::protocol_error, "tensor 0: negative size -3");
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) {
                             w.u32(0);
                             w.u32(1);
                             w.u8(7);
                             w.u8(0);
                           })),
                           ErrorCode::protocol_error, "tensor 0: unknown dtype 7");
  // A tensor count that cannot fit: refused before reserving.
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) {
                             w.u32(0);
                             w.u32(60000);
                           })),
                           ErrorCode::protocol_error, "60000 tensors cannot fit in 0 bytes");
  // A payload length beyond the body.
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) { w.u32(1000); })), ErrorCode::protocol_error,
                           "frame.payload: needs 1000 bytes, 0 left (truncated)");
  // Bytes after the last tensor.
  EXPECT_THAT_THROWS_ERROR(decode(forged([](WireWriter& w) {
                             w.u32(0);
                             w.u32(0);
                             w.u8(0);
                           })),
                           ErrorCode::protocol_error, "frame body: 1 unexpected trailing bytes");
}

// Version 2 (gathered_frame.h) -------------------------------------------------------------------

// The pieces of a gathered frame, joined: what the receiver holds.
Bytes joined(const GatheredFrame& f) {
  Bytes out = f.head;
  for (std::span<const uint8_t> piece : f.tail) out.insert(out.end(), piece.begin(), piece.end());
  EXPECT_EQ(out.size(), f.size);
  return out;
}

// Small tensors around two large ones (one float32, one float64), so the frame has head-borne
// data, tail pieces and padding between them.
Message large_sample() {
  Message m = sample();
  m.tensors.insert(m.tensors.begin() + 1, filled({1000, 3}, Dtype::float32, 4.0));
  m.tensors.push_back(filled({700}, Dtype::float64, -1.0));
  m.tensors.push_back(filled({5}, Dtype::float32, 3.0));
  return m;
}

TEST(GatheredFrame, RoundTripsUnderBothIntegritiesAndLargeTensorsLeaveFromTheirOwnStorage) {
  const Message m = large_sample();
  for (FrameIntegrity integrity : {FrameIntegrity::checksum, FrameIntegrity::transport_mac}) {
    const GatheredFrame f = encode_gathered(m, {}, integrity);
    EXPECT_EQ(f.head[4], kAlignedVersion);
    // The large tensors' bytes are pieces pointing into the message's own tensors: no copy.
    bool found = false;
    for (std::span<const uint8_t> piece : f.tail) found = found || piece.data() == m.tensors[1].raw_data();
    EXPECT_TRUE(found);
    Bytes frame = joined(f);
    expect_same(m, decode(std::span<const uint8_t>(frame), {}, integrity));
    expect_same(m, decode(std::move(frame), {}, integrity));
  }
  // Pure: the same message, the same bytes.
  EXPECT_EQ(joined(encode_gathered(m)), joined(encode_gathered(m)));
}

TEST(GatheredFrame, ReceivedLargeTensorsAliasTheFrameAtAlignedOffsets) {
  const Message m = large_sample();
  Bytes frame = joined(encode_gathered(m));
  const uint8_t* base = frame.data();
  const size_t size = frame.size();
  const Message got = decode(std::move(frame));
  expect_same(m, got);
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    const auto* data = static_cast<const uint8_t*>(got.tensors[i].raw_data());
    const bool inside = data >= base && data < base + size;
    EXPECT_EQ(inside, got.tensors[i].nbytes() >= kAliasBytes) << "tensor " << i;
    if (inside) {
      EXPECT_EQ(static_cast<size_t>(data - base) % kTensorAlignment, 0u) << "tensor " << i;
    }
  }
  // An aliased tensor is an ordinary cpu tensor: ops and in-place updates work on it.
  Tensor t = got.tensors[1];
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_EQ(sum(t).item(), sum(m.tensors[1]).item());
  t.data<float>()[0] = 123.0f;
  EXPECT_EQ(got.tensors[1].data<float>()[0], 123.0f);
}

TEST(GatheredFrame, CorruptFramesAreRejectedWithWhatIsWrong) {
  const Message m = large_sample();
  const Bytes good = joined(encode_gathered(m));
  Bytes bad = good;
  bad[good.size() - 1] ^= 0x01;
  EXPECT_THAT_THROWS_ERROR(decode(Bytes(bad)), ErrorCode::protocol_error, "checksum");
  // Non-zero alignment padding (under MACs, so no checksum stands in front of the layout check).
  Bytes maced = joined(encode_gathered(m, {}, FrameIntegrity::transport_mac));
  // The end of the metadata, where tensor 0's alignment padding starts.
  size_t pad = kFrameHeaderBytes + 8 + m.payload.size();
  for (const Tensor& t : m.tensors) pad += 2 + 8 * static_cast<size_t>(t.dim());
  ASSERT_NE(pad % kTensorAlignment, 0u);
  Bytes padded = maced;
  padded[pad] = 1;
  EXPECT_THAT_THROWS_ERROR(decode(Bytes(padded), {}, FrameIntegrity::transport_mac), ErrorCode::protocol_error,
                           "tensor 0: its alignment padding is not zero");
  EXPECT_THAT_THROWS_ERROR(decode(Bytes(maced.begin(), maced.end() - 1), {}, FrameIntegrity::transport_mac),
                           ErrorCode::protocol_error, "(truncated)");
  // A frame cut short and re-sealed: the last tensor's data is missing.
  Bytes cut(maced.begin(), maced.end() - 8);
  const uint32_t body = static_cast<uint32_t>(cut.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) cut[20 + i] = static_cast<uint8_t>(body >> (8 * i));
  EXPECT_THAT_THROWS_ERROR(decode(Bytes(cut), {}, FrameIntegrity::transport_mac), ErrorCode::protocol_error,
                           "but only 12 bytes remain (truncated or forged)");
  // Versions other than 1 and 2 are refused by name.
  Bytes other = good;
  other[4] = 3;
  EXPECT_THAT_THROWS_ERROR(decode(Bytes(other)), ErrorCode::protocol_error, "protocol version 3, this build speaks versions 1 and 2");
}

TEST(GatheredFrame, LimitsHoldAsForContiguousFrames) {
  const Message m = large_sample();
  CodecLimits small;
  small.max_frame_bytes = 4096;
  EXPECT_THAT_THROWS_ERROR(encode_gathered(m, small), ErrorCode::invalid_argument, "bytes per frame");
  EXPECT_THAT_THROWS_ERROR(decode(joined(encode_gathered(m)), small), ErrorCode::protocol_error, "bytes per frame");
  small = {};
  small.max_tensors = 2;
  EXPECT_THAT_THROWS_ERROR(encode_gathered(m, small), ErrorCode::invalid_argument, "tensors exceed the limit of 2");
  EXPECT_THAT_THROWS_ERROR(decode(joined(encode_gathered(m)), small), ErrorCode::protocol_error,
                           "frame.tensor_count: 7 exceeds the limit of 2");
}

TEST(WireReader, NamesTheFieldThatRanOut) {
  Bytes b;
  WireWriter w(b);
  w.u32(100);  // a string length with no bytes behind it
  WireReader r(b);
  EXPECT_THAT_THROWS_ERROR(r.string("call.function", 1000), ErrorCode::protocol_error,
                           "call.function: needs 100 bytes, 0 left (truncated)");
  WireReader r2(b);
  EXPECT_THAT_THROWS_ERROR(r2.string("call.function", 10), ErrorCode::protocol_error,
                           "call.function: length 100 exceeds the limit of 10");
  WireReader r3(b);
  r3.u16("x");
  EXPECT_THAT_THROWS_ERROR(r3.expect_end("call"), ErrorCode::protocol_error, "call: 2 unexpected trailing bytes");
}

rc::Gen<Message> gen_message() {
  return rc::gen::exec([] {
    Message m;
    m.type = *rc::gen::element(MessageType::call, MessageType::ret, MessageType::backward_autograd_req,
                               MessageType::exception, MessageType::rref_fetch_ret);
    m.flags = *rc::gen::arbitrary<uint32_t>();
    m.request_id = *rc::gen::arbitrary<uint64_t>();
    m.payload = *rc::gen::container<Bytes>(*rc::gen::inRange<size_t>(0, 64), rc::gen::arbitrary<uint8_t>());
    const int count = *rc::gen::inRange(0, 4);
    for (int i = 0; i < count; ++i) {
      Shape shape = *rc::gen::container<Shape>(*rc::gen::inRange<size_t>(0, 4), rc::gen::inRange<int64_t>(0, 4));
      m.tensors.push_back(filled(shape, *rc::gen::element(Dtype::float32, Dtype::float64), *rc::gen::inRange(-100, 100)));
    }
    return m;
  });
}

RC_GTEST_PROP(CodecProperties, RoundTrip, ()) {
  const Message m = *gen_message();
  const Message back = decode(encode(m));
  RC_ASSERT(back.type == m.type);
  RC_ASSERT(back.request_id == m.request_id);
  RC_ASSERT(back.payload == m.payload);
  RC_ASSERT(back.tensors.size() == m.tensors.size());
  for (size_t i = 0; i < m.tensors.size(); ++i) RC_ASSERT(back.tensors[i].to_vector() == m.tensors[i].to_vector());
}

RC_GTEST_PROP(CodecProperties, EveryCorruptionIsAProtocolErrorNeverACrash, ()) {
  Bytes frame = encode(*gen_message());
  const int edits = *rc::gen::inRange(1, 4);
  for (int e = 0; e < edits; ++e) {
    switch (*rc::gen::inRange(0, 3)) {
      case 0: {  // flip a byte
        const size_t at = *rc::gen::inRange<size_t>(0, frame.size());
        frame[at] ^= static_cast<uint8_t>(*rc::gen::inRange(1, 256));
        break;
      }
      case 1:  // truncate
        frame.resize(*rc::gen::inRange<size_t>(0, frame.size()));
        break;
      default:  // append junk
        frame.push_back(*rc::gen::arbitrary<uint8_t>());
        break;
    }
    if (frame.empty()) break;
  }
  try {
    decode(frame);
    RC_FAIL("a corrupted frame decoded");
  } catch (const Error& e) {
    RC_ASSERT(e.code() == ErrorCode::protocol_error);
  }
}

}  // namespace
}  // namespace dagsim::rpc
