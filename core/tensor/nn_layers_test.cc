// layer_norm and dropout: values worked out by hand, gradchecks for every differentiable input,
// dropout's determinism (a seed fixes the mask), and the errors of bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/engine.h"
#include "core/base/throws_error_test_util.h"
#include "core/tensor/gradcheck.h"
#include "core/tensor/ops.h"
#include "core/tensor/tensor_test_util.h"

namespace dagsim {
namespace {

using namespace dagsim::testing;  // t, leaf, V, equals, passes_gradcheck
using Inputs = std::vector<Tensor>;

constexpr ErrorCode kShape = ErrorCode::shape_mismatch;
constexpr ErrorCode kDtype = ErrorCode::dtype_mismatch;
constexpr ErrorCode kArg = ErrorCode::invalid_argument;

// layer_norm --------------------------------------------------------------------------------------

TEST(LayerNorm, Values) {
  // Row (1, 2, 3, 4): mean 2.5, biased variance 1.25. Row (2, 2, 2, 2): variance 0, so x_hat = 0
  // and only the bias is left.
  const Tensor x = t({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2});
  const double eps = 1e-5;
  const double s = 1 / std::sqrt(1.25 + eps);
  EXPECT_TRUE(equals(layer_norm(x, {4}), {2, 4}, {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s, 0, 0, 0, 0}));
  const Tensor w = t({4}, {1, 2, 0.5, -1});
  const Tensor b = t({4}, {0, 1, 0, -1});
  EXPECT_TRUE(equals(layer_norm(x, {4}, w, b, eps), {2, 4},
                     {-1.5 * s, 1 - s, 0.25 * s, -1.5 * s - 1, 0, 1, 0, -1}));
  EXPECT_TRUE(equals(layer_norm(x, {4}, w), {2, 4}, {-1.5 * s, -s, 0.25 * s, -1.5 * s, 0, 0, 0, 0}));
  EXPECT_TRUE(equals(layer_norm(x, {4}, Tensor(), b), {2, 4},
                     {-1.5 * s, 1 - 0.5 * s, 0.5 * s, 1.5 * s - 1, 0, 1, 0, -1}));
  // eps = 0 on (0, 2): mean 1, variance 1, so exactly (-1, 1).
  EXPECT_TRUE(equals(layer_norm(t({2}, {0, 2}), {2}, Tensor(), Tensor(), 0.0), {2}, {-1, 1}));
  // Normalising over the last two dims of [2, 2, 2] is normalising rows of four.
  EXPECT_TRUE(allclose(layer_norm(reshape(x, {2, 2, 2}), {2, 2}, reshape(w, {2, 2}), reshape(b, {2, 2})),
                       reshape(layer_norm(x, {4}, w, b), {2, 2, 2})));
  // Over the whole of a [3, 4]: one mean and one variance for all twelve.
  const Tensor y = layer_norm(reshape(arange(12), {3, 4}), {3, 4});
  EXPECT_NEAR(mean(y).item(), 0.0, 1e-12);
  EXPECT_NEAR(mean(mul(y, y)).item(), 1.0, 1e-5);
  EXPECT_EQ(layer_norm(from_values({2}, {0, 2}, Dtype::float32), {2}).dtype(), Dtype::float32);
}

TEST(LayerNorm, Gradcheck) {
  Prng prng(51);
  const auto normal = [&](const Shape& shape) { return leaf(randn(shape, prng)); };
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
                               {normal({2, 3, 4}), normal({4}), normal({4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {3, 4}, x[1], x[2]); },
                               {normal({2, 3, 4}), normal({3, 4}), normal({3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {5}); }, {normal({5})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {2, 3}); }, {normal({4, 2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {3}, x[1]); },
                               {normal({4, 3}), normal({3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {3}, Tensor(), x[1], 0.1); },
                               {normal({4, 3}), normal({3})}));
  // A frozen weight and bias: only x is differentiated. And x frozen: only weight and bias.
  Tensor w = randn({3}, prng), b = randn({3}, prng);
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {3}, x[1], x[2]); },
                               {normal({4, 3}), w, b}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return layer_norm(x[0], {3}, x[1], x[2]); },
                               {randn({4, 3}, prng), normal({3}), normal({3})}));
  // Through a nonlinearity, so the gradient reaching layer_norm is not all ones.
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sum(tanh(layer_norm(x[0], {4}, x[1], x[2]))); },
                               {normal({3, 4}), normal({4}), normal({4})}));
}

// No rows (an input of [0, 3]): the weight's and the bias's gradients are zeros, whether or not
// the input wants its own (with it, dx and dw would share one kernel call, which has no lines).
TEST(LayerNorm, NoRowsGiveZeroWeightAndBiasGradients) {
  for (const bool input_grad : {true, false}) {
    Tensor x = Tensor::empty({0, 3}, Dtype::float64);
    if (input_grad) x = leaf(x);
    const Tensor w = leaf(t({3}, {1, 2, 3})), b = leaf(t({3}, {4, 5, 6}));
    const Tensor y = layer_norm(x, {3}, w, b);
    std::vector<Tensor> wrt{w, b};
    if (input_grad) wrt.push_back(x);
    const autograd::variable_list grads = autograd::Engine::grad({sum(y)}, wrt);
    EXPECT_TRUE(equals(grads[0], {3}, {0, 0, 0})) << "input_grad " << input_grad;
    EXPECT_TRUE(equals(grads[1], {3}, {0, 0, 0})) << "input_grad " << input_grad;
    if (input_grad) {
      EXPECT_EQ(grads[2].shape(), (Shape{0, 3}));
    }
  }
}

TEST(LayerNorm, Errors) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {}); }, kArg, {"layer_norm", "normalized_shape", "[]"}));
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {4}); }, kShape,
                           {"layer_norm", "normalized_shape=[4]", "[*, 4]", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {2}); }, kShape, {"layer_norm", "[*, 2]", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {1, 2, 3}); }, kShape, {"layer_norm", "[*, 1, 2, 3]", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {3}, zeros({4})); }, kShape,
                           {"layer_norm", "weight", "[3]", "[4]"}));
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {3}, Tensor(), zeros({1, 3})); }, kShape,
                           {"layer_norm", "bias", "[1, 3]"}));
  EXPECT_TRUE(throws_error([&] { layer_norm(x, {3}, zeros({3}, Dtype::float32)); }, kDtype,
                           {"layer_norm", "float32"}));
  EXPECT_TRUE(throws_error([] { layer_norm(Tensor(), {3}); }, kArg, {"layer_norm", "input"}));
}

// dropout -----------------------------------------------------------------------------------------

TEST(Dropout, KeepsOrZeroesAndScales) {
  Prng prng(7);
  const Tensor out = dropout(ones({1000}), 0.25, true, prng);
  int dropped = 0;
  for (double v : out.to_vector()) {
    if (v == 0) {
      ++dropped;
    } else {
      EXPECT_DOUBLE_EQ(v, 4.0 / 3.0);
    }
  }
  // About p of them: 250 expected, standard deviation ~14 (and the seed makes it one fixed number).
  EXPECT_GT(dropped, 200);
  EXPECT_LT(dropped, 300);
  const Tensor x = t({2, 3}, {1, -2, 3, -4, 5, -6});
  Prng prng2(8);
  const Tensor y = dropout(x, 0.5, true, prng2);
  for (int64_t i = 0; i < 6; ++i) {
    const double v = y.to_vector()[static_cast<size_t>(i)];
    EXPECT_TRUE(v == 0 || v == 2 * x.to_vector()[static_cast<size_t>(i)]) << v;
  }
  Prng prng3(9);
  EXPECT_EQ(dropout(from_values({4}, {1, 2, 3, 4}, Dtype::float32), 0.5, true, prng3).dtype(), Dtype::float32);
}

TEST(Dropout, SameSeedSameMask) {
  const Tensor x = reshape(arange(1.0, 41.0, 1.0), {5, 8});
  Prng a(123), b(123), c(124);
  const Tensor ya = dropout(x, 0.5, true, a);
  EXPECT_EQ(ya.to_vector(), dropout(x, 0.5, true, b).to_vector());
  EXPECT_NE(ya.to_vector(), dropout(x, 0.5, true, c).to_vector());
  // One draw per element in row-major order: the mask depends on the element count, not the shape.
  Prng d(123);
  EXPECT_EQ(ya.to_vector(), dropout(reshape(x, {40}), 0.5, true, d).to_vector());
  // The generator moves on: a second call from the same Prng draws a fresh mask.
  EXPECT_NE(dropout(x, 0.5, true, a).to_vector(), ya.to_vector());
}

TEST(Dropout, IdentityWhenNotTrainingOrPZeroAndZerosAtPOne) {
  const Tensor x = t({3}, {1, 2, 3});
  Prng prng(5);
  EXPECT_TRUE(dropout(x, 0.5, false, prng).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true, prng).is_same(x));
  // Neither drew anything.
  EXPECT_EQ(prng.next_u64(), Prng(5).next_u64());
  EXPECT_TRUE(equals(dropout(x, 1.0, true, prng), {3}, {0, 0, 0}));
  Tensor w = leaf(t({3}, {1, 2, 3}));
  sum(dropout(w, 1.0, true, prng)).backward();
  EXPECT_TRUE(equals(w.grad(), {3}, {0, 0, 0}));
}

TEST(Dropout, GradientIsMaskTimesScale) {
  Tensor x = leaf(t({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  Prng prng(11);
  const Tensor y = dropout(x, 0.4, true, prng);
  sum(y).backward();
  const std::vector<double> g = x.grad().to_vector(), out = y.to_vector(), in = detach(x).to_vector();
  int kept = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_TRUE(g[i] == 0 || std::fabs(g[i] - 1 / 0.6) < 1e-15) << g[i];
    EXPECT_DOUBLE_EQ(out[i], g[i] * in[i]);  // kept exactly where the gradient flows
    kept += g[i] != 0;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 8);
}

TEST(Dropout, Gradcheck) {
  Prng prng(52);
  for (double p : {0.2, 0.5, 0.9}) {
    SCOPED_TRACE("p " + std::to_string(p));
    // gradcheck calls fn many times: a fresh generator each time keeps the mask fixed.
    EXPECT_TRUE(passes_gradcheck(
        [p](const Inputs& x) {
          Prng mask(99);
          return dropout(x[0], p, true, mask);
        },
        {leaf(randn({3, 4}, prng))}));
  }
  EXPECT_TRUE(passes_gradcheck(
      [](const Inputs& x) {
        Prng mask(3);
        return dropout(mul(x[0], 2.0), 0.3, false, mask);  // the identity, so gradient 2
      },
      {leaf(randn({3}, prng))}));
}

TEST(Dropout, Errors) {
  const Tensor x = ones({3});
  Prng prng(1);
  EXPECT_TRUE(throws_error([&] { dropout(x, 1.5, true, prng); }, kArg, {"dropout", "between 0 and 1", "1.5"}));
  EXPECT_TRUE(throws_error([&] { dropout(x, -0.1, true, prng); }, kArg, {"dropout", "-0.1"}));
  EXPECT_TRUE(throws_error([&] { dropout(x, NAN, true, prng); }, kArg, {"dropout", "nan"}));
  // p is checked even when not training, as torch.nn.functional.dropout does.
  EXPECT_TRUE(throws_error([&] { dropout(x, 2.0, false, prng); }, kArg, {"dropout", "2.0"}));
  EXPECT_TRUE(throws_error([&] { dropout(Tensor(), 0.5, true, prng); }, kArg, {"dropout", "defined"}));
}

}  // namespace
}  // namespace dagsim
