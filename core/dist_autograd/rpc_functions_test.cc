// Tests of the RPC autograd functions and their recording: a send records edges to the sent
// tensors' history by position, a receive makes the received tensors' grad_fn a RecvRpcBackward,
// and a local backward through it sends the gradients (zeros where none flowed) to the sender.
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/container.h"
#include "core/dist_autograd/rpc_functions.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {
namespace {

Tensor leaf(Shape shape, std::vector<double> values) {
  Tensor t = from_values(shape, values);
  t.set_requires_grad(true);
  return t;
}

TEST(RecordSend, EdgesFollowTheSentTensorsByPosition) {
  DistAutogradContainer container(0, 0);
  DistAutogradContext& ctx = container.new_context();
  Tensor x = leaf({2}, {1, 2});
  Tensor y = mul(x, 2.0);
  Tensor plain = from_values({1}, {7});
  const MessageId id = record_send(container, ctx, 1, {plain, y});
  EXPECT_EQ(ctx.known_worker_ids(), (std::set<WorkerId>{1}));
  auto send = std::dynamic_pointer_cast<SendRpcBackward>(ctx.retrieve_send_function(id));
  ASSERT_NE(send, nullptr);
  ASSERT_EQ(send->num_outputs(), 2u);
  EXPECT_FALSE(send->next_edge(0).is_valid());
  EXPECT_EQ(send->next_edge(1).function, y.grad_fn());
  EXPECT_EQ(send->num_inputs(), 0u);

  // Without tensors that require grad, only the worker is recorded.
  const MessageId quiet = record_send(container, ctx, 2, {plain});
  EXPECT_TRUE(throws_error([&] { ctx.retrieve_send_function(quiet); }, ErrorCode::invalid_argument,
                           {"Could not find send function"}));
  EXPECT_EQ(ctx.known_worker_ids(), (std::set<WorkerId>{1, 2}));
}

TEST(SendRpcBackward, HandsOnThePeersGradients) {
  SendRpcBackward send;
  send.add_next_edge(autograd::Edge());
  EXPECT_TRUE(throws_error([&] { send.apply({}); }, ErrorCode::autograd_error, {"expected 1 gradient(s) from the peer, got 0"}));
  send.set_grads({from_values({1}, {4})});
  EXPECT_EQ(send.apply({})[0].to_vector(), (std::vector<double>{4}));
}

TEST(RecordRecv, ABackwardThroughTheReceivedTensorsSendsTheirGradientsHome) {
  DistAutogradContext ctx(77);
  struct Sent {
    WorkerId to;
    ContextId context;
    MessageId message;
    autograd::variable_list grads;
  };
  std::vector<Sent> sent;
  std::vector<Tensor> received = {from_values({2}, {1, 2}), from_values({2}, {5, 5}), from_values({1}, {9})};
  // A message id of node 3's own, as its record_send makes them.
  const MessageId id = static_cast<MessageId>(make_global_id(3, 1234));
  record_recv(ctx, 3, id, received, {true, true, false},
              [&](WorkerId to, ContextId c, MessageId m, autograd::variable_list g) { sent.push_back({to, c, m, g}); });
  EXPECT_EQ(ctx.known_worker_ids(), (std::set<WorkerId>{3}));
  ASSERT_EQ(ctx.recv_functions().count(id), 1u);
  EXPECT_EQ(received[0].grad_fn()->name(), "RecvRpcBackward");
  EXPECT_EQ(received[0].grad_fn(), received[1].grad_fn());
  EXPECT_FALSE(received[2].requires_grad());

  // Only the first received tensor is used: the second's gradient is zeros.
  Tensor loss = sum(mul(received[0], 3.0));
  loss.backward();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].to, 3);
  EXPECT_EQ(sent[0].context, 77);
  EXPECT_EQ(sent[0].message, id);
  ASSERT_EQ(sent[0].grads.size(), 3u);
  EXPECT_EQ(sent[0].grads[0].to_vector(), (std::vector<double>{3, 3}));
  EXPECT_EQ(sent[0].grads[1].to_vector(), (std::vector<double>{0, 0}));
  EXPECT_EQ(sent[0].grads[2].to_vector(), (std::vector<double>{0}));
}

}  // namespace
}  // namespace dagsim::dist_autograd
