// Tests of distributed autograd's wire payloads: every payload struct (autograd_messages.h,
// termination.h) through the one round-trip template, the forward wrapping through the codec, and
// what the wrapper refuses beyond the layout (wrong direction, a wrapper in a wrapper, flags that
// do not match the tensors).
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/autograd_messages.h"
#include "core/dist_autograd/termination.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/codec.h"
#include "core/rpc/payload_test_template.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {

using namespace dagsim::dist_autograd;

template <>
struct PayloadSamples<ForwardHeader> {
  static std::vector<ForwardHeader> make() {
    return {ForwardHeader{},
            ForwardHeader{0x100, 0xdeadbeef, (int64_t{1} << 48) | 5, -17, 65535, {true, false, true}, Bytes{1, 2, 3}}};
  }
};

template <>
struct PayloadSamples<BackwardRequest> {
  static std::vector<BackwardRequest> make() {
    return {BackwardRequest{},
            BackwardRequest{42, 7, true, {from_values({2}, {0.5, -1}), zeros({0, 3}), from_values({}, {3})}}};
  }
};

template <>
struct PayloadSamples<CleanupRequest> {
  static std::vector<CleanupRequest> make() { return {CleanupRequest{0}, CleanupRequest{-1234}}; }
};

template <>
struct PayloadSamples<ProbeRequest> {
  static std::vector<ProbeRequest> make() { return {ProbeRequest{}, ProbeRequest{-42, 7}}; }
};

template <>
struct PayloadSamples<ProbeReport> {
  static std::vector<ProbeReport> make() {
    ProbeReport full{99, 4, true, true, 3, 5, {0, 2, 65535}, {"'unused' (autograd message id 2) on node 0", ""}};
    return {ProbeReport{}, full};
  }
};

template <>
struct PayloadSamples<AbortRequest> {
  static std::vector<AbortRequest> make() { return {AbortRequest{}, AbortRequest{5, "because"}}; }
};

template <>
struct PayloadSamples<IncarnationReply> {
  static std::vector<IncarnationReply> make() { return {IncarnationReply{0}, IncarnationReply{65535}}; }
};

template <>
struct PayloadSamples<AttachRequest> {
  static std::vector<AttachRequest> make() { return {AttachRequest{0}, AttachRequest{int64_t{3} << 48}}; }
};

template <>
struct PayloadSamples<AttachReply> {
  static std::vector<AttachReply> make() { return {AttachReply{false}, AttachReply{true}}; }
};

using AutogradPayloads = ::testing::Types<ForwardHeader, BackwardRequest, CleanupRequest, ProbeRequest, ProbeReport,
                                          AbortRequest, IncarnationReply, AttachRequest, AttachReply>;
INSTANTIATE_TYPED_TEST_SUITE_P(DistAutograd, PayloadRoundTrip, AutogradPayloads);

}  // namespace dagsim::rpc

namespace dagsim::dist_autograd {
namespace {

using rpc::Message;
using rpc::MessageType;

Message through_the_wire(const Message& m) { return rpc::decode(rpc::encode(m)); }

TEST(AutogradMessages, ForwardWrappingRoundTripsTheInnerMessageAndMetadata) {
  Tensor a = from_values({2}, {1, 2});
  a.set_requires_grad(true);
  Tensor b = from_values({1}, {3});
  const Message call = rpc::make_call(99, "add", {{a, b}, {{"alpha", 2}}});
  const Message wrapped = wrap_with_autograd(MessageType::forward_autograd_req, call, {(int64_t{1} << 48) | 5, 17, 1});
  const WithAutograd back = unwrap_autograd(through_the_wire(wrapped));
  EXPECT_EQ(back.inner.type, MessageType::call);
  EXPECT_EQ(back.inner.request_id, 99u);
  EXPECT_EQ(back.meta.context, (int64_t{1} << 48) | 5);
  EXPECT_EQ(back.meta.message, 17);
  EXPECT_EQ(back.meta.from, 1);
  EXPECT_EQ(back.requires_grad, (std::vector<bool>{true, false}));
  const rpc::Call inner = rpc::read_call(back.inner);
  EXPECT_EQ(inner.function, "add");
  EXPECT_EQ(inner.args.attributes.at("alpha"), 2);
  EXPECT_EQ(inner.args.tensors[0].to_vector(), (std::vector<double>{1, 2}));
  EXPECT_FALSE(inner.args.tensors[0].requires_grad()) << "received tensors get history from record_recv, not the wire";
}

TEST(AutogradMessages, MalformedWrappersAreProtocolErrors) {
  Message m = wrap_with_autograd(MessageType::forward_autograd_resp, rpc::make_ret(1, {from_values({1}, {1})}), {1, 2, 3});
  m.tensors.clear();
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(m); }, ErrorCode::protocol_error, {"autograd.requires_grad: 1 flags for 0 tensors"}));
  m = wrap_with_autograd(MessageType::forward_autograd_req, rpc::make_call(1, "f", {}), {1, 2, 3});
  m.payload[0] = 0x0f;  // wrapping a wrapper
  m.payload[1] = 0x01;
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(m); }, ErrorCode::protocol_error, {"cannot wrap message type 271"}));
  m.payload[0] = 0x01;  // a ret inside a request wrapper
  m.payload[1] = 0x02;
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(m); }, ErrorCode::protocol_error, {"cannot wrap message type 513"}));
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(rpc::make_call(1, "f", {})); }, ErrorCode::protocol_error,
                           {"a call message carries no autograd metadata"}));
}

TEST(AutogradMessages, FlagsOtherThanZeroOrOneAndHugeCountsAreRejectedByName) {
  ProbeReport report{1, 1, true, false, 1, 1, {1}, {}};
  rpc::Bytes bad_flag = rpc::to_bytes(report);
  bad_flag[16] = 7;  // has_context, after context id and wave
  EXPECT_TRUE(throws_error([&] { rpc::from_bytes<ProbeReport>(bad_flag); }, ErrorCode::protocol_error,
                           {"probe_report.has_context: 7 is not 0 or 1"}));
  rpc::Bytes huge = rpc::to_bytes(report);
  for (size_t i = 0; i < 4; ++i) huge[34 + i] = 0xff;  // the worker count
  EXPECT_TRUE(throws_error([&] { rpc::from_bytes<ProbeReport>(huge); }, ErrorCode::protocol_error,
                           {"probe_report.known_workers", "limit"}));
  // The writer refuses what the reader would: a reason beyond its bound.
  EXPECT_TRUE(throws_error([&] { rpc::to_bytes(AbortRequest{1, std::string(kMaxReason + 1, 'r')}); },
                           ErrorCode::invalid_argument, {"abort.reason: length"}));
  EXPECT_EQ(clip(std::string(kMaxReason + 1, 'r'), kMaxReason).size(), kMaxReason);
}

}  // namespace
}  // namespace dagsim::dist_autograd
