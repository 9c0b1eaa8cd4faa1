// Tests of the wire codec: round trips of every message type and tensor shape, byte-exact
// determinism, and a decoder that rejects every kind of bad frame with protocol_error (never a
// crash, never a large allocation), including RapidCheck properties over random corruption.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/rpc/codec.h"
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
  EXPECT_THAT_THROWS_ERROR(decode(bad), ErrorCode::protocol_error, "protocol version 9, this build speaks version 1");
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
