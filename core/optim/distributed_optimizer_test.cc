// Tests of the DistributedOptimizer: training with parameters on two owners (RRefs from
// dagsim.parameter, used as RRef arguments) ends with exactly the parameters the same training
// gives locally, for SGD with momentum and for Adam; and a context whose saved parameter a step
// changed fails its backward with the version-counter error instead of a silent wrong gradient.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "core/autograd/engine.h"
#include "core/base/throws_error_test_util.h"
#include "core/optim/distributed_optimizer.h"
#include "core/fibers/local_runtime.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/event.h"
#include "core/tensor/ops.h"

namespace dagsim::optim {
namespace {

using fibers::LocalRuntime;

class DistributedOptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = rpc::FunctionRegistry::with_builtins();
    for (int i = 0; i < 3; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<rpc::RpcAgent>(env, registry_));
      autograd_.push_back(std::make_unique<dist_autograd::DistAutograd>(*agents_.back()));
      hosts_.push_back(std::make_unique<OptimizerHost>(*agents_.back(), *autograd_.back()));
      agents_.back()->start();
    }
  }

  // Trains y = tanh(x W) V, loss = sum(y * y), with W on worker1 and V on worker2, from worker0.
  std::pair<std::vector<double>, std::vector<double>> train_distributed(OptimizerConfig config, int steps) {
    return rt_.run_on(0, [&] {
      rpc::RpcAgent& a = *agents_[0];
      rpc::RRef w = a.remote(1, "dagsim.parameter", {{w0_}, {}});
      rpc::RRef v = a.remote(2, "dagsim.parameter", {{v0_}, {}});
      DistributedOptimizer opt(a, config, {w, v});
      for (int k = 0; k < steps; ++k) {
        dist_autograd::DistAutograd::Context ctx(*autograd_[0]);
        Tensor h = tanh(a.rpc_sync(1, "matmul", {{x_}, {}, {w}})[0]);
        Tensor y = a.rpc_sync(2, "matmul", {{h}, {}, {v}})[0];
        autograd_[0]->backward(ctx.id(), {sum(mul(y, y))});
        opt.step(ctx.id());
      }
      return std::make_pair(w.to_here()[0].to_vector(), v.to_here()[0].to_vector());
    });
  }

  std::pair<std::vector<double>, std::vector<double>> train_locally(OptimizerConfig config, int steps) {
    Tensor w = clone(w0_), v = clone(v0_);
    w.set_requires_grad(true);
    v.set_requires_grad(true);
    std::unique_ptr<Optimizer> opt;
    if (config.kind == OptimizerConfig::Kind::sgd) {
      opt = std::make_unique<Sgd>(std::vector<Tensor>{w, v}, config.sgd);
    } else {
      opt = std::make_unique<Adam>(std::vector<Tensor>{w, v}, config.adam);
    }
    for (int k = 0; k < steps; ++k) {
      Tensor y = matmul(tanh(matmul(x_, w)), v);
      autograd::variable_list g = autograd::Engine::grad({sum(mul(y, y))}, {w, v});
      opt->step(g);
    }
    return {w.to_vector(), v.to_vector()};
  }

  LocalRuntime rt_;
  rpc::FunctionRegistry registry_;
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents_;
  std::vector<std::unique_ptr<dist_autograd::DistAutograd>> autograd_;
  std::vector<std::unique_ptr<OptimizerHost>> hosts_;
  Tensor x_ = from_values({2, 3}, {0.5, -1, 2, 1, 0.25, -0.5});
  Tensor w0_ = from_values({3, 2}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6});
  Tensor v0_ = from_values({2, 2}, {1, -1, 0.5, 2});
};

void expect_close(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12 + 1e-9 * std::abs(b[i])) << i;
}

TEST_F(DistributedOptimizerTest, SgdWithMomentumTrainsLikeLocalTraining) {
  OptimizerConfig config{.kind = OptimizerConfig::Kind::sgd, .sgd = {.lr = 0.05, .momentum = 0.9}, .adam = {}};
  auto [w, v] = train_distributed(config, 4);
  auto [lw, lv] = train_locally(config, 4);
  expect_close(w, lw);
  expect_close(v, lv);
  EXPECT_NE(w, w0_.to_vector()) << "the parameters moved";
  // The DistributedOptimizer is gone, and with it the owners' local optimizers.
  EXPECT_EQ(hosts_[1]->optimizers(), 0u);
  EXPECT_EQ(hosts_[2]->optimizers(), 0u);
}

TEST_F(DistributedOptimizerTest, AdamTrainsLikeLocalTraining) {
  OptimizerConfig config{.kind = OptimizerConfig::Kind::adam, .sgd = {}, .adam = {.lr = 0.01, .weight_decay = 0.01}};
  auto [w, v] = train_distributed(config, 5);
  auto [lw, lv] = train_locally(config, 5);
  expect_close(w, lw);
  expect_close(v, lv);
}

// An elastic job's restart: train 2 steps, take the parameters and the optimizer state, then go on
// from them for 3 steps with the parameters on the other owners and a new optimizer: 5 local steps.
TEST_F(DistributedOptimizerTest, AStateDictCarriesTrainingAcrossOwners) {
  for (const OptimizerConfig& config :
       {OptimizerConfig{.kind = OptimizerConfig::Kind::sgd, .sgd = {.lr = 0.05, .momentum = 0.9}, .adam = {}},
        OptimizerConfig{.kind = OptimizerConfig::Kind::adam, .sgd = {}, .adam = {.lr = 0.01, .weight_decay = 0.01}}}) {
    auto [lw, lv] = train_locally(config, 5);
    std::vector<double> w, v;
    rt_.run_on(0, [&] {
      rpc::RpcAgent& a = *agents_[0];
      std::vector<std::vector<Tensor>> state;
      Tensor w_now, v_now;
      const auto train = [&](rpc::RRef& rw, rpc::RRef& rv, DistributedOptimizer& opt, int steps) {
        for (int k = 0; k < steps; ++k) {
          dist_autograd::DistAutograd::Context ctx(*autograd_[0]);
          Tensor h = tanh(a.rpc_sync(rw.owner(), "matmul", {{x_}, {}, {rw}})[0]);
          Tensor y = a.rpc_sync(rv.owner(), "matmul", {{h}, {}, {rv}})[0];
          autograd_[0]->backward(ctx.id(), {sum(mul(y, y))});
          opt.step(ctx.id());
        }
      };
      {
        rpc::RRef rw = a.remote(1, "dagsim.parameter", {{w0_}, {}});
        rpc::RRef rv = a.remote(2, "dagsim.parameter", {{v0_}, {}});
        DistributedOptimizer opt(a, config, {rw, rv});
        train(rw, rv, opt, 2);
        state = opt.state_dict();
        w_now = rw.to_here()[0];
        v_now = rv.to_here()[0];
      }
      ASSERT_EQ(state.size(), 2u);
      EXPECT_EQ(state[0].size(), config.kind == OptimizerConfig::Kind::sgd ? 1u : 3u) << "each parameter has its state";
      rpc::RRef rw = a.remote(2, "dagsim.parameter", {{w_now}, {}});  // owners swapped
      rpc::RRef rv = a.remote(1, "dagsim.parameter", {{v_now}, {}});
      DistributedOptimizer opt(a, config, {rw, rv});
      opt.load_state_dict(state);
      train(rw, rv, opt, 3);
      w = rw.to_here()[0].to_vector();
      v = rv.to_here()[0].to_vector();
      // A state of the wrong form is refused, naming the parameter; nothing was changed by it.
      std::vector<std::vector<Tensor>> bad = state;
      bad[1] = {from_values({3}, {1, 2, 3})};
      EXPECT_TRUE(throws_error([&] { opt.load_state_dict(bad); }, ErrorCode::invalid_argument, {"parameter 0"}));
      EXPECT_TRUE(throws_error([&] { opt.load_state_dict({state[0]}); }, ErrorCode::invalid_argument, {"1 parameters for 2"}));
    });
    expect_close(w, lw);
    expect_close(v, lv);
  }
}

// A trainer stopped while its step waits on the owners (an elastic worker group torn down by a
// restart) unwinds at once with `cancelled`; it never keeps waiting for the other owners' replies
// (found by elastic_training.toml: 11 of 200 seeds hit the step's all-replies assert).
TEST_F(DistributedOptimizerTest, AStepWhoseCallerIsCancelledUnwindsAtOnce) {
  auto scope = std::make_unique<runtime::CancelScope>("trainer", rt_.env(0).spawner);
  std::optional<ErrorCode> ended;
  rt_.env(0).spawner.spawn(*scope, "trainer", [&] {
    rpc::RpcAgent& a = *agents_[0];
    rpc::RRef w = a.remote(1, "dagsim.parameter", {{w0_}, {}});
    rpc::RRef v = a.remote(2, "dagsim.parameter", {{v0_}, {}});
    DistributedOptimizer opt(a, {.kind = OptimizerConfig::Kind::sgd, .sgd = {.lr = 0.1}, .adam = {}}, {w, v});
    dist_autograd::DistAutograd::Context ctx(*autograd_[0]);
    try {
      scope->cancel();  // as a restart would, while the step is about to wait on both owners
      opt.step(ctx.id());
    } catch (const Error& e) {
      ended = e.code();
      throw;
    }
  });
  rt_.run();
  EXPECT_EQ(ended, ErrorCode::cancelled);
}

// Only the trainer that created an optimizer may use it (issue 23): another node's step, state,
// load or drop of it is refused by name, and so is an optimizer created under another's id; the
// trainer's own optimizer is untouched and keeps stepping.
TEST_F(DistributedOptimizerTest, OnlyTheTrainerThatCreatedAnOptimizerMayUseIt) {
  rt_.run_on(0, [&] {
    rpc::RpcAgent& a = *agents_[0];
    rpc::RRef w = a.remote(1, "dagsim.parameter", {{w0_}, {}});
    const uint64_t before = a.new_global_id();
    DistributedOptimizer opt(a, {.kind = OptimizerConfig::Kind::sgd, .sgd = {.lr = 0.1}, .adam = {}}, {w});
    ASSERT_EQ(hosts_[1]->optimizers(), 1u);
    int refused_as_not_theirs = 0;
    runtime::Event done;
    rt_.env(2).spawner.spawn("intruder", [&] {
      // The optimizer's id is one of worker0's next few; worker2 tries each with every function.
      for (uint64_t id = before + 1; id <= before + 4; ++id) {
        for (const char* function : {"dagsim.optim.step", "dagsim.optim.state", "dagsim.optim.load_state", "dagsim.optim.drop"}) {
          rpc::CallArgs args;
          args.set_id("id", id);
          args.set_id("context", 1);
          try {
            agents_[2]->rpc_sync(1, function, args);
            // Only a drop may succeed: of an id that names no optimizer (a retried drop).
            EXPECT_EQ(std::string(function), "dagsim.optim.drop") << function << " of " << id << " succeeded";
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
            const std::string what = e.what();
            if (what.find("belongs to node 0, not to node 2, which called") != std::string::npos) ++refused_as_not_theirs;
          }
        }
        rpc::CallArgs create;
        create.set_id("id", id + 100);
        create.ints["kind"] = 0;
        EXPECT_TRUE(throws_error([&] { agents_[2]->rpc_sync(1, "dagsim.optim.create", create); },
                                 ErrorCode::invalid_argument, {"not one of node 2's ids"}));
      }
      done.set();
    });
    done.wait();
    EXPECT_EQ(refused_as_not_theirs, 4) << "each function, on the one id that names an optimizer";
    EXPECT_EQ(hosts_[1]->optimizers(), 1u);
    dist_autograd::DistAutograd::Context ctx(*autograd_[0]);
    autograd_[0]->backward(ctx.id(), {sum(a.rpc_sync(1, "matmul", {{x_}, {}, {w}})[0])});
    opt.step(ctx.id());  // the trainer's own optimizer still steps
  });
}

TEST_F(DistributedOptimizerTest, AStepThatChangedASavedParameterFailsTheOlderContextsBackward) {
  rt_.run_on(0, [&] {
    rpc::RpcAgent& a = *agents_[0];
    rpc::RRef w = a.remote(1, "dagsim.parameter", {{w0_}, {}});
    DistributedOptimizer opt(a, {.kind = OptimizerConfig::Kind::sgd, .sgd = {.lr = 0.1}, .adam = {}}, {w});
    dist_autograd::DistAutograd::Context old_ctx(*autograd_[0]);
    Tensor stale = sum(a.rpc_sync(1, "matmul", {{x_}, {}, {w}})[0]);  // saves w on worker1
    {
      // Contexts do not nest on one fiber (PyTorch's "Already have an autograd context id"): the
      // newer one is opened with none current, as PyTorch would on another thread.
      dist_autograd::ContextScope none(std::nullopt);
      dist_autograd::DistAutograd::Context ctx(*autograd_[0]);
      Tensor loss = sum(a.rpc_sync(1, "matmul", {{x_}, {}, {w}})[0]);
      autograd_[0]->backward(ctx.id(), {loss});
      opt.step(ctx.id());  // w changes in place
    }
    dist_autograd::ContextScope back(old_ctx.id());
    EXPECT_TRUE(throws_error([&] { autograd_[0]->backward(old_ctx.id(), {stale}); }, ErrorCode::modified_by_inplace,
                             {"Error on Node 1"}));
  });
}

}  // namespace
}  // namespace dagsim::optim
