// Values a peer or a store controls that once reached an assertion (issue 23, item 2; the review is
// in the closing note): each is now refused by name where it is decoded or used, and the
// node goes on. A forward wrapper around anything but a call or its result; an autograd message id
// that names another sender or arrives twice; optimizer options of NaN; a stored rendezvous state
// whose lists are already full.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/autograd_messages.h"
#include "core/dist_autograd/context.h"
#include "core/dist_autograd/rpc_functions.h"
#include "core/optim/optimizer.h"
#include "core/rendezvous/rendezvous_settings.h"
#include "core/rendezvous/rendezvous_state.h"
#include "core/rpc/call_messages.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {
namespace {

using rpc::Message;
using rpc::MessageType;

TEST(ForgedValues, AForwardWrapperHoldsOnlyACallOrItsResult) {
  // An RRef delete (or any service request) inside a forward wrapper reached run_call's assertion.
  const Message forged = wrap_with_autograd(MessageType::forward_autograd_req,
                                            rpc::make_rref_request(MessageType::rref_user_delete, 7, 1, 2), {1, 2, 3});
  EXPECT_TRUE(throws_error([&] { unwrap_autograd(forged); }, ErrorCode::protocol_error,
                           {"a forward_autograd_req cannot wrap message type"}));
  // What outgoing_call and serve_call wrap still passes.
  EXPECT_NO_THROW(unwrap_autograd(wrap_with_autograd(MessageType::forward_autograd_req, rpc::make_call(1, "f", {}), {1, 2, 3})));
  EXPECT_NO_THROW(unwrap_autograd(wrap_with_autograd(
      MessageType::forward_autograd_req, rpc::make_rref_request(MessageType::rref_fetch_call, 7, 1, 2), {1, 2, 3})));
  EXPECT_NO_THROW(
      unwrap_autograd(wrap_with_autograd(MessageType::forward_autograd_resp, rpc::make_ret(1, {}), {1, 2, 3})));
}

TEST(ForgedValues, AnAutogradMessageIdMustBeItsSendersAndArriveOnce) {
  DistAutogradContext context(make_global_id(0, 1));
  const GradientSender none = [](WorkerId, ContextId, MessageId, autograd::variable_list) {};
  std::vector<Tensor> tensors{from_values({1}, {1})};
  const MessageId from_peer2 = static_cast<MessageId>(make_global_id(2, 5));
  // Node 2 sends an id of node 3's: forged (it could collide with node 3's own).
  EXPECT_TRUE(throws_error([&] { record_recv(context, 3, from_peer2, tensors, {true}, none); }, ErrorCode::protocol_error,
                           {"from node 3 names node 2 as its sender"}));
  record_recv(context, 2, from_peer2, tensors, {true}, none);
  std::vector<Tensor> again{from_values({1}, {1})};
  EXPECT_TRUE(throws_error([&] { record_recv(context, 2, from_peer2, again, {true}, none); }, ErrorCode::protocol_error,
                           {"arrived twice in context"}));
}

TEST(ForgedValues, OptimizerOptionsOfNaNAreRefusedWhenMade) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor p = from_values({1}, {1});
  p.set_requires_grad(true);
  optim::AdamOptions adam;
  adam.beta1 = nan;
  EXPECT_TRUE(throws_error([&] { optim::Adam({p}, adam); }, ErrorCode::invalid_argument, {"betas must be in [0, 1)"}));
  adam = {};
  adam.lr = nan;
  EXPECT_TRUE(throws_error([&] { optim::Adam({p}, adam); }, ErrorCode::invalid_argument, {"invalid learning rate"}));
  optim::SgdOptions sgd;
  sgd.momentum = nan;
  EXPECT_TRUE(throws_error([&] { optim::Sgd({p}, sgd); }, ErrorCode::invalid_argument, {"invalid momentum"}));
}

TEST(ForgedValues, AStoredStateWhoseListsAreFullIsAnErrorWhenItGrows) {
  // Anyone who can write the state key can store 65536 heartbeats; one more is past what a state
  // holds. Encoding it was an assertion; now it is the state's error.
  rendezvous::RendezvousState state;
  for (uint32_t i = 0; i <= rendezvous::kMaxRendezvousNodes; ++i) {
    state.wait_list.insert(rendezvous::NodeDesc{"h", i, 0});
    state.last_heartbeats.emplace(rendezvous::NodeDesc{"h", i, 0}, runtime::TimePoint{});
  }
  EXPECT_TRUE(throws_error([&] { rendezvous::encode(state); }, ErrorCode::protocol_error,
                           {"a list of 65537 nodes, more than the 65536 a state holds"}));
}

}  // namespace
}  // namespace dagsim::dist_autograd
