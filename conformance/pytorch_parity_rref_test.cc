// PyTorch parity (pytorch_parity.h): RRefs in distributed autograd: backward through remote values,
// several trainers at once on one owner, and the trainer / parameter-server pattern.
#include "conformance/pytorch_parity.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/engine.h"
#include "core/base/throws_error_test_util.h"
#include "core/tensor/ops.h"

namespace dagsim::conformance::parity {
namespace {

using namespace std::chrono_literals;

TEST_F(DistAutogradTest, test_backward_rref) {
  bool done = false;
  on(0, [&] { backward_rref(0, 1, 1, done); });
  EXPECT_TRUE(done);
  EXPECT_EQ(contexts_everywhere(), 0u);
  EXPECT_EQ(agent(1).owned_rrefs(), 0u) << "both RRefs' values were dropped with their users";
}

TEST_F(DistAutogradTest, test_backward_rref_multi) {
  // Workers 1..3 at once, each with its own context, all with worker0 as callee and owner.
  std::map<WorkerId, bool> done;
  for (WorkerId w = 1; w < kWorld; ++w) {
    done[w] = false;
    cluster_.world.spawn_foreground(w, "trainer", [&, w] { backward_rref(w, 0, 0, done[w]); });
  }
  on(0, [] {});
  for (const auto& [w, d] : done) EXPECT_TRUE(d) << "worker" << w;
  EXPECT_EQ(contexts_everywhere(), 0u);
  EXPECT_EQ(agent(0).owned_rrefs(), 0u);
}

// test_backward_rref_nested: the callee is a third worker, which gets the RRef as a fork and
// passes it on to the owner (caller -> callee -> owner); gradients reach the caller's t2 and the
// owner's t1, and every fork is gone at the end, so the owner dropped the value.
TEST_F(DistAutogradTest, test_backward_rref_nested) {
  bool done = false;
  on(0, [&] { backward_rref(0, 1, 2, done); });
  EXPECT_TRUE(done);
  EXPECT_EQ(contexts_everywhere(), 0u);
  for (WorkerId w = 0; w < kWorld; ++w) {
    EXPECT_EQ(agent(w).owned_rrefs(), 0u) << "worker" << w;
    EXPECT_EQ(agent(w).pending_children(), 0u) << "worker" << w;
  }
}

// test_trainer_ps: the parameter server forks its RRef to three trainers (_run_trainer), each
// forks it back in my_rref_add and runs backward; the server finds each context's gradient under
// its own tensor (to_here() on the owner is the owned value, not a copy).
TEST_F(DistAutogradTest, test_trainer_ps) {
  const Tensor t2 = zeros({3, 3});
  rpc::RRef rref_t1;
  std::vector<rpc::Future<std::vector<Tensor>>> trainers;
  on(0, [&] {
    rref_t1 = agent(0).remote(0, "create_tensor", {});
    EXPECT_TRUE(rref_t1.to_here()[0].is_same(rref_t1.to_here()[0])) << "to_here on the owner returns the owned value";
    for (WorkerId trainer = 1; trainer < kWorld; ++trainer) {
      rpc::CallArgs args{{t2}, {}, {rref_t1}};
      args.ints["ps"] = 0;
      trainers.push_back(agent(0).rpc_async(trainer, "run_trainer", args));
    }
    while (trainers_done_ < kWorld - 1) cluster_.world.env(0).clock.sleep(10ms);
    Tensor local1 = ones({3, 3}), local2 = zeros({3, 3});
    local1.set_requires_grad(true);
    local2.set_requires_grad(true);
    sum(add(local1, local2)).backward();
    const Tensor local_t1 = rref_t1.to_here()[0];
    for (const auto& [trainer, id] : trainer_contexts_) {
      EXPECT_EQ(grad_of(autograd(0).get_gradients(id), local_t1), local1.grad().to_vector()) << "trainer " << trainer;
    }
    trainers_checked_ = true;
    for (auto& trainer : trainers) trainer.get();
  });
  rref_t1 = rpc::RRef();
  cluster_.world.run({.stop_at = cluster_.world.now() + 1s});
  EXPECT_EQ(contexts_everywhere(), 0u);
  EXPECT_EQ(agent(0).owned_rrefs(), 0u) << "the server's value went with its last fork";
}

// RRef.backward (RREF_BACKWARD_REQ): from a user, the owner runs the distributed backward with
// the RRef's value as root and answers when it is done; on the owner, with a context it is a
// distributed backward, without one a local backward into .grad.
TEST_F(DistAutogradTest, RRefBackwardFromAUserAndOnTheOwner) {
  on(0, [&] {
    const Tensor t1 = rand33(1, true);
    {
      DistContext ctx(autograd(0));
      const rpc::RRef user = agent(0).remote(1, "sum", {{mul(t1, t1)}, {}});  // a scalar owned by worker1
      autograd(0).rref_backward(user, ctx.id());
      const auto grads = autograd(0).get_gradients(ctx.id());
      ASSERT_EQ(grads.size(), 1u);
      EXPECT_EQ(grad_of(grads, t1), mul(t1, 2.0).to_vector());  // d sum(t1^2) / d t1
      EXPECT_TRUE(throws_error([&] { autograd(0).rref_backward(user, std::nullopt); }, ErrorCode::invalid_argument,
                               {"User RRefs require 'dist_autograd_ctx_id' to be specified"}));
      const rpc::RRef pieces = agent(0).remote(1, "chunk", {{t1}, {{"chunks", 3}}});
      EXPECT_TRUE(throws_error([&] { autograd(0).rref_backward(pieces, ctx.id()); }, ErrorCode::invalid_argument,
                               {"Error on Node 1", "RRef should contain a tensor for .backward()"}));
    }
    {
      DistContext ctx(autograd(0));
      const rpc::RRef owned = agent(0).remote(0, "sum", {{t1}, {}});
      autograd(0).rref_backward(owned, ctx.id());
      EXPECT_EQ(grad_of(autograd(0).get_gradients(ctx.id()), t1), ones({3, 3}).to_vector());
      EXPECT_FALSE(t1.grad().defined()) << "a distributed backward never writes .grad";
    }
    const rpc::RRef owned = agent(0).remote(0, "sum", {{t1}, {}});
    autograd(0).rref_backward(owned, std::nullopt);  // outside any context: local autograd
    ASSERT_TRUE(t1.grad().defined());
    EXPECT_EQ(t1.grad().to_vector(), ones({3, 3}).to_vector());
  });
  EXPECT_EQ(contexts_everywhere(), 0u);
}

}  // namespace
}  // namespace dagsim::conformance::parity
