// Tests of SGD and Adam against scalar transcriptions of PyTorch's update rules, the step API
// with explicit gradients (what the DistributedOptimizer uses), and the version-counter guard
// that makes a graph saved before a step fail after it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/base/throws_error_test_util.h"
#include "core/optim/optimizer.h"
#include "core/tensor/ops.h"

namespace dagsim::optim {
namespace {

Tensor param(std::vector<double> values) {
  Tensor t = from_values({static_cast<int64_t>(values.size())}, values);
  t.set_requires_grad(true);
  return t;
}

TEST(Sgd, PlainStepIsPMinusLrG) {
  Tensor p = param({1, 2});
  Sgd sgd({p}, {.lr = 0.1});
  sgd.step({from_values({2}, {0.5, -1})});
  EXPECT_EQ(p.to_vector(), (std::vector<double>{1 - 0.1 * 0.5, 2 + 0.1 * 1}));
}

// torch.optim.SGD for one scalar, transcribed.
std::vector<double> sgd_reference(double p, const std::vector<double>& grads, SgdOptions o) {
  std::vector<double> trajectory;
  double buf = 0;
  bool has_buf = false;
  for (double g : grads) {
    double d_p = g + o.weight_decay * p;
    if (o.momentum != 0) {
      buf = has_buf ? o.momentum * buf + (1 - o.dampening) * d_p : d_p;
      has_buf = true;
      d_p = o.nesterov ? d_p + o.momentum * buf : buf;
    }
    p = p + (-o.lr) * d_p;
    trajectory.push_back(p);
  }
  return trajectory;
}

TEST(Sgd, MomentumDampeningNesterovAndWeightDecayFollowPyTorch) {
  const std::vector<double> grads = {0.3, -0.2, 0.7, 0.1};
  for (SgdOptions o : {SgdOptions{.lr = 0.1, .momentum = 0.9},
                       SgdOptions{.lr = 0.05, .momentum = 0.5, .dampening = 0.25, .weight_decay = 0.01},
                       SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true}}) {
    Tensor p = param({1.5});
    Sgd sgd({p}, o);
    const std::vector<double> expected = sgd_reference(1.5, grads, o);
    for (size_t k = 0; k < grads.size(); ++k) {
      sgd.step({from_values({1}, {grads[k]})});
      EXPECT_DOUBLE_EQ(p.item(), expected[k]) << "step " << k;
    }
  }
  EXPECT_TRUE(throws_error([] { Sgd({param({1})}, {.lr = 0.1, .nesterov = true}); }, ErrorCode::invalid_argument,
                           {"Nesterov momentum requires a momentum"}));
}

std::vector<double> adam_reference(double p, const std::vector<double>& grads, AdamOptions o) {
  std::vector<double> trajectory;
  double m = 0, v = 0;
  for (size_t k = 0; k < grads.size(); ++k) {
    const double g = grads[k] + o.weight_decay * p;
    m = m * o.beta1 + (1 - o.beta1) * g;
    v = v * o.beta2 + (1 - o.beta2) * g * g;
    const double bc1 = 1 - std::pow(o.beta1, static_cast<double>(k + 1));
    const double bc2 = 1 - std::pow(o.beta2, static_cast<double>(k + 1));
    const double denom = std::sqrt(v) / std::sqrt(bc2) + o.eps;
    p = p + (-(o.lr / bc1)) * (m / denom);
    trajectory.push_back(p);
  }
  return trajectory;
}

TEST(Adam, FollowsPyTorchsUpdateStepByStep) {
  const std::vector<double> grads = {0.3, -0.2, 0.7, 0.1, -0.5};
  for (AdamOptions o : {AdamOptions{}, AdamOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.05}}) {
    Tensor p = param({-0.75});
    Adam adam({p}, o);
    const std::vector<double> expected = adam_reference(-0.75, grads, o);
    for (size_t k = 0; k < grads.size(); ++k) {
      adam.step({from_values({1}, {grads[k]})});
      EXPECT_NEAR(p.item(), expected[k], 1e-15) << "step " << k;
    }
  }
}

TEST(Adam, TheFirstStepMovesEachParameterByAboutTheLearningRate) {
  Tensor p = param({0, 0, 0});
  Adam adam({p}, {.lr = 0.01});
  adam.step({from_values({3}, {5, -0.001, 123})});
  EXPECT_NEAR(p.to_vector()[0], -0.01, 1e-8);
  EXPECT_NEAR(p.to_vector()[1], 0.01, 1e-4);
  EXPECT_NEAR(p.to_vector()[2], -0.01, 1e-8);
}

TEST(Optimizer, ExplicitGradientsSkipUndefinedOnesAndMustFit) {
  Tensor a = param({1}), b = param({2});
  Sgd sgd({a, b}, {.lr = 1});
  sgd.step({Tensor(), from_values({1}, {1})});
  EXPECT_EQ(a.item(), 1);
  EXPECT_EQ(b.item(), 1);
  EXPECT_TRUE(throws_error([&] { sgd.step({Tensor()}); }, ErrorCode::invalid_argument, {"1 gradients for 2 parameters"}));
  EXPECT_TRUE(throws_error([&] { sgd.step({from_values({2}, {1, 1}), Tensor()}); }, ErrorCode::shape_mismatch,
                           {"gradient [2] for parameter 0 of shape [1]"}));
}

TEST(Optimizer, StepUsesGradAndAGraphSavedBeforeAStepFailsAfterIt) {
  Tensor w = param({3});
  Tensor loss = sum(mul(w, w));  // saves w
  loss.backward({}, /*retain_graph=*/true);
  Sgd sgd({w}, {.lr = 0.5});
  sgd.step();
  EXPECT_EQ(w.item(), 3 - 0.5 * 6);
  sgd.zero_grad();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(throws_error([&] { loss.backward(); }, ErrorCode::modified_by_inplace, {}));
}

}  // namespace
}  // namespace dagsim::optim
