// Tests of distributed autograd's wire payloads: each round-trips through the codec, and each
// reader rejects a malformed payload with protocol_error naming the field.
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/autograd_messages.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/codec.h"
#include "core/tensor/ops.h"

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

TEST(AutogradMessages, BackwardAndCleanupRequestsRoundTrip) {
  const Message m = make_backward_request(5, {42, 7, true, {from_values({1}, {0.5})}});
  const BackwardRequest r = read_backward_request(through_the_wire(m));
  EXPECT_EQ(r.context, 42);
  EXPECT_EQ(r.message, 7);
  EXPECT_TRUE(r.retain_graph);
  EXPECT_EQ(r.grads[0].to_vector(), (std::vector<double>{0.5}));
  EXPECT_EQ(read_cleanup_request(through_the_wire(make_cleanup_request(6, 1234))), 1234);
}

TEST(AutogradMessages, MalformedPayloadsAreProtocolErrors) {
  Message m = wrap_with_autograd(MessageType::forward_autograd_resp, rpc::make_ret(1, {from_values({1}, {1})}), {1, 2, 3});
  m.tensors.clear();
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(m); }, ErrorCode::protocol_error, {"autograd.tensor_count: 1 flags for 0 tensors"}));
  m = wrap_with_autograd(MessageType::forward_autograd_req, rpc::make_call(1, "f", {}), {1, 2, 3});
  m.payload[0] = 0x0f;  // wrapping a wrapper
  m.payload[1] = 0x01;
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(m); }, ErrorCode::protocol_error, {"cannot wrap message type"}));
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(rpc::make_call(1, "f", {})); }, ErrorCode::protocol_error,
                           {"a call message carries no autograd metadata"}));
  Message backward = make_backward_request(1, {1, 2, false, {}});
  backward.payload.push_back(0);
  EXPECT_TRUE(throws_error([&] { read_backward_request(backward); }, ErrorCode::protocol_error,
                           {"backward_autograd_req: 1 unexpected trailing bytes"}));
  backward.payload.resize(3);
  EXPECT_TRUE(throws_error([&] { read_backward_request(backward); }, ErrorCode::protocol_error,
                           {"backward.context_id: needs 8 bytes, 3 left"}));
}

}  // namespace
}  // namespace dagsim::dist_autograd
