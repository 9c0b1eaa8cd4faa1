// gradcheck over every op in ops.h that has a backward, plus tests of gradcheck itself (it must
// catch a wrong backward, or a passing op would prove nothing). Inputs come from a seeded Prng, so
// every run checks the same points; inputs are kept away from kinks and poles (relu at 0, log and
// pow at 0, div by ~0) where finite differences are meaningless.
#include "core/tensor/gradcheck.h"

#include <gtest/gtest.h>

#include "core/autograd/grad_mode.h"
#include "core/autograd/op_backward.h"
#include "core/tensor/ops.h"

namespace dagsim {
namespace {

using Inputs = std::vector<Tensor>;

template <typename F>
::testing::AssertionResult passes_gradcheck(F&& fn, const Inputs& inputs) {
  const GradcheckResult result = gradcheck(std::forward<F>(fn), inputs);
  if (result.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << result.message;
}

class Gradcheck : public ::testing::Test {
 protected:
  Tensor leaf(Tensor t) {
    t.set_requires_grad(true);
    return t;
  }
  Tensor normal(const Shape& shape) { return leaf(randn(shape, prng_)); }
  // In [0.5, 2): safe for log, sqrt-like pow and as a divisor.
  Tensor positive(const Shape& shape) { return leaf(rand_uniform(shape, prng_, 0.5, 2.0)); }
  // |x| in [0.2, 1.5): relu's kink at 0 is far from every point.
  Tensor away_from_zero(const Shape& shape) {
    Tensor t = rand_uniform(shape, prng_, 0.2, 1.5);
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (prng_.bernoulli(0.5)) p[i] = -p[i];
    }
    return leaf(t);
  }

  Prng prng_{20240611};
};

// The broadcasting pairs every binary op is checked on.
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3}, {3}}, {{}, {2, 3}}, {{2, 3}, {}}, {{4, 1, 3}, {2, 1}},
};

// x * x with a backward that multiplies by `factor` * x: correct only for factor 2.
Tensor square_with_factor(const Tensor& x, double factor) {
  Tensor out;
  {
    autograd::NoGradGuard no_grad;
    out = mul(x, x);
  }
  autograd::record_op("SquareBackward", {x}, {out}, [factor](const autograd::BackwardArgs& args) {
    return autograd::variable_list{mul(mul(args.grads[0], args.saved[0]), factor)};
  }, {x});
  return out;
}

// gradcheck itself --------------------------------------------------------------------------------

TEST_F(Gradcheck, PassesCorrectCustomBackward) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return square_with_factor(x[0], 2.0); },
                               {normal({2, 3})}));
}

TEST_F(Gradcheck, CatchesWrongBackwardAndNamesTheEntry) {
  Tensor a = normal({3});
  Tensor b = normal({2, 2});
  const GradcheckResult result = gradcheck(
      [](const Inputs& x) { return Inputs{mul(x[0], 2.0), square_with_factor(x[1], 1.0)}; }, {a, b});
  EXPECT_FALSE(result.passed);
  EXPECT_FALSE(static_cast<bool>(result));
  // Input 0 is right; the first wrong entry is input 1, element 0, on output 1.
  EXPECT_NE(result.message.find("output 1"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("input 1"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("input element 0 [0, 0]"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("numerical"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("analytic"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("4 of 49"), std::string::npos) << result.message;
}

TEST_F(Gradcheck, RejectsFloat32) {
  Tensor x = leaf(randn({3}, prng_, 0.0, 1.0, Dtype::float32));
  try {
    gradcheck([](const Inputs& in) { return exp(in[0]); }, {x});
    FAIL() << "expected dtype_mismatch";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::dtype_mismatch);
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
}

TEST_F(Gradcheck, RejectsInputsWithoutGrad) {
  Tensor x = randn({3}, prng_);
  try {
    gradcheck([](const Inputs& in) { return exp(in[0]); }, {x});
    FAIL() << "expected invalid_argument";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

TEST_F(Gradcheck, LeavesInputsUntouchedAndWorksUnderNoGrad) {
  Tensor x = normal({2, 3});
  const std::vector<double> before = x.to_vector();
  const uint32_t version = x.version();
  autograd::NoGradGuard no_grad;
  EXPECT_TRUE(passes_gradcheck([](const Inputs& in) { return tanh(in[0]); }, {x}));
  EXPECT_EQ(x.to_vector(), before);
  EXPECT_EQ(x.version(), version);
  EXPECT_FALSE(x.grad().defined());
}

TEST_F(Gradcheck, UnusedInputAndConstantOutputHaveZeroJacobians) {
  Tensor target = randn({3}, prng_);  // not differentiated
  EXPECT_TRUE(passes_gradcheck(
      [&](const Inputs& x) { return Inputs{mul(x[0], x[2]), clone(target)}; },
      {normal({3}), normal({2}), target}));
}

// Elementwise ---------------------------------------------------------------------------------

TEST_F(Gradcheck, BinaryOpsWithBroadcasting) {
  for (const auto& [sa, sb] : kBinaryShapes) {
    SCOPED_TRACE(shape_str(sa) + " with " + shape_str(sb));
    EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return add(x[0], x[1]); }, {normal(sa), normal(sb)}));
    EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sub(x[0], x[1]); }, {normal(sa), normal(sb)}));
    EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return mul(x[0], x[1]); }, {normal(sa), normal(sb)}));
    EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return div(x[0], x[1]); },
                                 {normal(sa), positive(sb)}));
    EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return div(x[1], x[0]); },
                                 {positive(sa), normal(sb)}));
  }
}

TEST_F(Gradcheck, BinaryOpsWithOneSideConstantOrShared) {
  Tensor constant = randn({3}, prng_);
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return mul(x[0], x[1]); }, {normal({2, 3}), constant}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return div(x[1], x[0]); },
                               {positive({2, 3}), constant}));
  // The same tensor on both sides: the two gradients accumulate.
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return mul(x[0], x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return div(x[0], add(x[0], 3.0)); }, {positive({4})}));
}

TEST_F(Gradcheck, ScalarOpsAndNeg) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return add(x[0], 2.5); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return mul(x[0], -1.5); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return neg(x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return x[0] * 3.0 + -x[0]; }, {normal({})}));
}

TEST_F(Gradcheck, Pow) {
  for (double exponent : {0.0, 1.0, 2.0, 3.0}) {
    SCOPED_TRACE("exponent " + std::to_string(exponent));
    EXPECT_TRUE(passes_gradcheck([exponent](const Inputs& x) { return pow(x[0], exponent); },
                                 {normal({2, 3})}));
  }
  for (double exponent : {0.5, -1.0, 2.5}) {  // defined on positive inputs only
    SCOPED_TRACE("exponent " + std::to_string(exponent));
    EXPECT_TRUE(passes_gradcheck([exponent](const Inputs& x) { return pow(x[0], exponent); },
                                 {positive({2, 3})}));
  }
}

TEST_F(Gradcheck, UnaryMath) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return exp(x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return log(x[0]); }, {positive({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sin(x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return cos(x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return tanh(x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sigmoid(x[0]); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return relu(x[0]); }, {away_from_zero({3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return abs(x[0]); }, {away_from_zero({3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sqrt(x[0]); }, {positive({2, 3})}));
  // Chained, so saved outputs (exp, tanh, sigmoid) feed later saved inputs.
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return log(add(sigmoid(tanh(exp(x[0]))), 1.0)); },
                               {normal({5})}));
}

// Reductions and normalisations ------------------------------------------------------------------

TEST_F(Gradcheck, SumAndMean) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sum(x[0]); }, {normal({2, 3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return mean(x[0]); }, {normal({2, 3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sum(x[0]); }, {normal({})}));
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " keepdim " + std::to_string(keepdim));
      EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return sum(x[0], dim, keepdim); },
                                   {normal({2, 3, 4})}));
      EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return mean(x[0], dim, keepdim); },
                                   {normal({2, 3, 4})}));
    }
  }
}

TEST_F(Gradcheck, SoftmaxAndLogSoftmax) {
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE("[3, 4] dim " + std::to_string(dim));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return softmax(x[0], dim); }, {normal({3, 4})}));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return log_softmax(x[0], dim); }, {normal({3, 4})}));
  }
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("[2, 3, 4] dim " + std::to_string(dim));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return softmax(x[0], dim); }, {normal({2, 3, 4})}));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return log_softmax(x[0], dim); },
                                 {normal({2, 3, 4})}));
  }
}

// Shape ops ----------------------------------------------------------------------------------------

TEST_F(Gradcheck, TransposeAndReshape) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return transpose(x[0], 0, 1); }, {normal({2, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return transpose(x[0], 0, 2); }, {normal({2, 3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return transpose(x[0], -1, -2); }, {normal({2, 3, 4})}));
  for (const Shape& shape : std::vector<Shape>{{3, 4}, {12}, {-1, 2}, {2, -1, 3}, {2, 3, 2}}) {
    SCOPED_TRACE("reshape to " + shape_str(shape));
    EXPECT_TRUE(passes_gradcheck([&](const Inputs& x) { return reshape(x[0], shape); }, {normal({2, 6})}));
  }
}

TEST_F(Gradcheck, SqueezeUnsqueezeExpand) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return squeeze(x[0]); }, {normal({2, 1, 3, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return squeeze(x[0], 1); }, {normal({2, 1, 3, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return squeeze(x[0], -1); }, {normal({2, 1, 3, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return squeeze(x[0], 0); }, {normal({2, 1, 3, 1})}));
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("unsqueeze dim " + std::to_string(dim));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return unsqueeze(x[0], dim); }, {normal({2, 3})}));
  }
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return expand(x[0], {3, 4}); }, {normal({3, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return expand(x[0], {2, 3}); }, {normal({3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return expand(x[0], {2, 4, 3}); }, {normal({1, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return expand(x[0], {2, -1, 4}); }, {normal({3, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return expand(x[0], {2, 3}); }, {normal({})}));
}

TEST_F(Gradcheck, StackAndCat) {
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("stack dim " + std::to_string(dim));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return stack(x, dim); },
                                 {normal({2, 3}), normal({2, 3}), normal({2, 3})}));
  }
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return cat(x, 0); },
                               {normal({1, 3}), normal({2, 3}), normal({3, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return cat(x, 1); }, {normal({2, 1}), normal({2, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return cat(x, -1); },
                               {normal({2, 2, 1}), normal({2, 2, 3})}));
  // A constant part in the middle gets no gradient; the others still do.
  Tensor constant = randn({2, 2}, prng_);
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return cat(x, 1); },
                               {normal({2, 1}), constant, normal({2, 3})}));
}

TEST_F(Gradcheck, SplitChunkNarrow) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return split(x[0], 2, 0); }, {normal({5, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return split(x[0], 2, -1); }, {normal({3, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return split(x[0], std::vector<int64_t>{1, 3, 1}, 0); },
                               {normal({5, 2})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return split(x[0], std::vector<int64_t>{2, 0, 2}, 1); },
                               {normal({3, 4})}));
  // Only some pieces used: the unused ones reach SplitBackward as zeros.
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return split(x[0], 2, 0)[1]; }, {normal({5, 3})}));
  EXPECT_TRUE(passes_gradcheck(
      [](const Inputs& x) {
        std::vector<Tensor> parts = split(x[0], std::vector<int64_t>{1, 2, 2}, 1);
        return Inputs{mul(parts[0], 2.0), exp(parts[2])};
      },
      {normal({2, 5})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return chunk(x[0], 3, 1); }, {normal({2, 7})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return chunk(x[0], 2, 0); }, {normal({4, 2})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return narrow(x[0], 0, 1, 2); }, {normal({4, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return narrow(x[0], 1, -3, 2); }, {normal({2, 4})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return narrow(x[0], -1, 0, 1); }, {normal({2, 3, 4})}));
}

TEST_F(Gradcheck, Clone) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return clone(x[0]); }, {normal({2, 3})}));
}

// Linear algebra -----------------------------------------------------------------------------------

TEST_F(Gradcheck, Matmul) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4}},                      // dot
      {{3, 4}, {4}},                   // matrix-vector
      {{4}, {4, 2}},                   // vector-matrix
      {{3, 4}, {4, 2}},                // mm
      {{2, 3, 4}, {2, 4, 5}},          // batched
      {{2, 1, 3, 4}, {5, 4, 2}},       // broadcast batch dims
      {{2, 3, 4}, {4, 2}},             // batched with a matrix
      {{3, 4}, {2, 4, 5}},             // matrix with a batch
      {{4}, {2, 4, 3}},                // vector with a batch
      {{2, 3, 4}, {4}},                // batch with a vector
  };
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(shape_str(sa) + " x " + shape_str(sb));
    EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return matmul(x[0], x[1]); },
                                 {normal(sa), normal(sb)}));
  }
}

TEST_F(Gradcheck, BmmAndMultiDot) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return bmm(x[0], x[1]); },
                               {normal({2, 3, 4}), normal({2, 4, 5})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return multi_dot(x); },
                               {normal({2, 3}), normal({3, 4}), normal({4, 2})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return multi_dot(x); },
                               {normal({3}), normal({3, 4}), normal({4, 2}), normal({2})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return multi_dot(x); },
                               {normal({3}), normal({3, 4}), normal({4, 2})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return multi_dot(x); }, {normal({2, 3}), normal({3})}));
}

TEST_F(Gradcheck, Linear) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                               {normal({4, 3}), normal({5, 3}), normal({5})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return linear(x[0], x[1]); },
                               {normal({4, 3}), normal({5, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                               {normal({2, 4, 3}), normal({5, 3}), normal({5})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return linear(x[0], x[1]); },
                               {normal({2, 4, 3}), normal({5, 3})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                               {normal({3}), normal({5, 3}), normal({5})}));
  // A frozen weight: only the input and the bias are differentiated.
  Tensor weight = randn({5, 3}, prng_);
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                               {normal({4, 3}), weight, normal({5})}));
}

// Losses --------------------------------------------------------------------------------------------

TEST_F(Gradcheck, Losses) {
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return mse_loss(x[0], x[1]); },
                               {normal({3, 4}), normal({3, 4})}));
  Tensor target = from_values({4}, {0, 2, 1, 2});
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return nll_loss(x[0], x[1]); },
                               {normal({4, 3}), target}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return nll_loss(log_softmax(x[0], 1), x[1]); },
                               {normal({4, 3}), target}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return cross_entropy(x[0], x[1]); },
                               {normal({4, 3}), target}));
}

TEST_F(Gradcheck, TwoLayerMlp) {
  Tensor target = from_values({3}, {1, 0, 3});
  EXPECT_TRUE(passes_gradcheck(
      [](const Inputs& x) {
        Tensor hidden = tanh(linear(x[0], x[1], x[2]));
        return cross_entropy(linear(hidden, x[3], x[4]), x[5]);
      },
      {normal({3, 4}), normal({5, 4}), normal({5}), normal({4, 5}), normal({4}), target}));
}

}  // namespace
}  // namespace dagsim
