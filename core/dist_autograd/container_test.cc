// Tests of DistAutogradContainer and DistAutogradContext: globally unique ids across workers and
// incarnations, PyTorch's error texts, release semantics, gradient accumulation per context in a
// deterministic order, and the current context being per fiber.
#include <gtest/gtest.h>

#include <boost/fiber/fiber.hpp>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/container.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {
namespace {

TEST(DistAutogradContainer, IdsCarryTheWorkerAndIncarnationAndNeverRepeat) {
  DistAutogradContainer w3(3, 0);
  DistAutogradContainer w3_restarted(3, 1);
  const ContextId a = w3.new_context().context_id();
  const ContextId b = w3.new_context().context_id();
  const ContextId c = w3_restarted.new_context().context_id();
  EXPECT_EQ(worker_of(static_cast<uint64_t>(a)), 3);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c) << "a restarted node must not reuse its predecessor's ids";
  EXPECT_EQ(incarnation_of(static_cast<uint64_t>(c)), 1);
  const MessageId m1 = w3.new_autograd_message_id();
  EXPECT_NE(m1, w3.new_autograd_message_id());
  EXPECT_EQ(worker_of(static_cast<uint64_t>(m1)), 3);
}

TEST(DistAutogradContainer, RetrieveAndReleaseUsePyTorchsErrors) {
  DistAutogradContainer c(1, 0);
  EXPECT_TRUE(throws_error([&] { c.retrieve_context(42); }, ErrorCode::invalid_argument,
                           {"Could not find autograd context with id: 42"}));
  DistAutogradContext& ctx = c.get_or_create_context(42);
  ctx.add_known_worker_id(2);
  ctx.add_known_worker_id(0);
  EXPECT_EQ(&c.retrieve_context(42), &ctx);
  EXPECT_EQ(c.num_contexts(), 1u);
  EXPECT_EQ(c.release_context(42), (std::set<WorkerId>{0, 2}));
  EXPECT_EQ(c.num_contexts(), 0u);
  EXPECT_FALSE(c.release_context_if_present(42).has_value());
  EXPECT_TRUE(throws_error([&] { c.release_context(42); }, ErrorCode::invalid_argument, {"with id: 42"}));
  EXPECT_TRUE(throws_error([&] { c.current_context(); }, ErrorCode::invalid_argument,
                           {"Current thread doesn't have a valid autograd context"}));
}

TEST(DistAutogradContext, GradientsAccumulatePerLeafInFirstSeenOrder) {
  DistAutogradContext ctx(7);
  Tensor w = from_values({2}, {1, 1});
  Tensor b = from_values({1}, {0});
  Tensor g1 = from_values({2}, {1, 2});
  ctx.accumulate_grad(b, from_values({1}, {5}));
  ctx.accumulate_grad(w, g1);
  ctx.accumulate_grad(w, from_values({2}, {10, 20}));
  g1.data<double>()[0] = 100;  // the context kept its own copy
  const auto grads = ctx.gradients();
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_TRUE(grads[0].first.is_same(b));
  EXPECT_EQ(grads[0].second.to_vector(), (std::vector<double>{5}));
  EXPECT_TRUE(grads[1].first.is_same(w));
  EXPECT_EQ(grads[1].second.to_vector(), (std::vector<double>{11, 22}));
  EXPECT_FALSE(w.grad().defined()) << "distributed gradients never land in .grad";
  EXPECT_FALSE(ctx.gradient_of(from_values({1}, {0})).defined());
}

TEST(DistAutogradContext, SendFunctionsAreFoundByMessageId) {
  DistAutogradContext ctx(1);
  EXPECT_TRUE(throws_error([&] { ctx.retrieve_send_function(9); }, ErrorCode::invalid_argument,
                           {"Could not find send function for autograd message id: 9"}));
}

TEST(ContextScope, TheCurrentContextIsPerFiberAndRestored) {
  EXPECT_FALSE(DistAutogradContainer::current_context_id().has_value());
  {
    ContextScope outer(5);
    EXPECT_EQ(DistAutogradContainer::current_context_id(), 5);
    std::optional<ContextId> seen_in_other_fiber = 99;
    boost::fibers::fiber other([&] { seen_in_other_fiber = DistAutogradContainer::current_context_id(); });
    other.join();
    EXPECT_FALSE(seen_in_other_fiber.has_value());
    {
      ContextScope inner(6);
      EXPECT_EQ(DistAutogradContainer::current_context_id(), 6);
    }
    EXPECT_EQ(DistAutogradContainer::current_context_id(), 5);
  }
  EXPECT_FALSE(DistAutogradContainer::current_context_id().has_value());
}

}  // namespace
}  // namespace dagsim::dist_autograd
