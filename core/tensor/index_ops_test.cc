// max and min (along a dim, which selects by index, and over everything) and the indexing ops
// gather, index_select and embedding: forward values worked out by hand, backward values where
// gradcheck cannot look (ties, repeated indices checked entry by entry), gradchecks at points away
// from ties, and the errors of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/base/throws_error_test_util.h"
#include "core/tensor/gradcheck.h"
#include "core/tensor/ops.h"
#include "core/tensor/tensor_test_util.h"

namespace dagsim {
namespace {

using namespace dagsim::testing;  // t, leaf, V, equals, passes_gradcheck
using Inputs = std::vector<Tensor>;

constexpr ErrorCode kShape = ErrorCode::shape_mismatch;
constexpr ErrorCode kRange = ErrorCode::index_out_of_range;
constexpr ErrorCode kArg = ErrorCode::invalid_argument;

// The gradient of sum(f(x) * ramp) with ramp = 1, 2, 3, ... over f(x)'s elements, so the value
// that reaches each input element says which outputs it came from.
template <typename F>
Tensor grad_with_ramp(F&& f, const Tensor& x0) {
  Tensor x = leaf(clone(x0));
  Tensor y = f(x);
  sum(mul(y, reshape(arange(1.0, static_cast<double>(y.numel()) + 1.0, 1.0), y.shape()))).backward();
  return x.grad();
}

// max / min ------------------------------------------------------------------------------------

TEST(MaxMin, ValuesAndIndices) {
  const Tensor x = t({2, 3}, {1, 5, 3, 4, 2, 6});
  auto [values, indices] = max(x, 1);
  EXPECT_TRUE(equals(values, {2}, {5, 6}));
  EXPECT_TRUE(equals(indices, {2}, {1, 2}));
  EXPECT_EQ(indices.dtype(), Dtype::float64);
  EXPECT_TRUE(equals(max(x, 0).values, {3}, {4, 5, 6}));
  EXPECT_TRUE(equals(max(x, 0).indices, {3}, {1, 0, 1}));
  EXPECT_TRUE(equals(min(x, 1).values, {2}, {1, 2}));
  EXPECT_TRUE(equals(min(x, 1).indices, {2}, {0, 1}));
  EXPECT_TRUE(equals(min(x, -2, true).values, {1, 3}, {1, 2, 3}));
  EXPECT_TRUE(equals(min(x, -2, true).indices, {1, 3}, {0, 1, 0}));
  const Tensor y = reshape(arange(24), {2, 3, 4});
  EXPECT_TRUE(equals(max(y, 1).values, {2, 4}, {8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_TRUE(equals(max(y, 1).indices, {2, 4}, {2, 2, 2, 2, 2, 2, 2, 2}));
  EXPECT_TRUE(equals(min(y, 2, true).values, {2, 3, 1}, {0, 4, 8, 12, 16, 20}));
  EXPECT_TRUE(equals(max(x), {}, {6}));
  EXPECT_TRUE(equals(min(x), {}, {1}));
  // Ties pick the first; NaN wins and the first NaN is picked, as torch.max.
  EXPECT_TRUE(equals(max(t({4}, {3, 1, 3, 2}), 0).indices, {}, {0}));
  EXPECT_TRUE(equals(min(t({3}, {2, 1, 1}), 0).indices, {}, {1}));
  const Tensor with_nan = t({4}, {1, NAN, 3, NAN});
  EXPECT_TRUE(std::isnan(max(with_nan, 0).values.item()));
  EXPECT_TRUE(equals(max(with_nan, 0).indices, {}, {1}));
  EXPECT_TRUE(equals(min(with_nan, 0).indices, {}, {1}));
  EXPECT_TRUE(std::isnan(min(with_nan).item()));
  // float32 values keep their dtype; indices are float64 whatever the input.
  auto [v32, i32] = max(from_values({2, 2}, {1, 2, 4, 3}, Dtype::float32), 1);
  EXPECT_EQ(v32.dtype(), Dtype::float32);
  EXPECT_TRUE(equals(v32, {2}, {2, 4}));
  EXPECT_TRUE(equals(i32, {2}, {1, 0}));
}

TEST(MaxMin, BackwardGoesToTheSelectedElementFirstOfTies) {
  const Tensor x = t({2, 3}, {1, 5, 3, 4, 2, 6});
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& a) { return max(a, 1).values; }, x), {2, 3},
                     {0, 1, 0, 0, 0, 2}));
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& a) { return max(a, 0, true).values; }, x), {2, 3},
                     {0, 2, 0, 1, 0, 3}));
  // Ties: all of the gradient to the first, none to the other (gradcheck would see 1/2 each).
  const Tensor z = t({2, 3}, {3, 1, 3, 0, 2, 0});
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& a) { return max(a, 1).values; }, z), {2, 3},
                     {1, 0, 0, 0, 2, 0}));
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& a) { return min(a, 1).values; }, z), {2, 3},
                     {0, 1, 0, 2, 0, 0}));
  EXPECT_FALSE(max(leaf(clone(x)), 1).indices.requires_grad());
}

TEST(MaxMin, FullReductionSplitsTheGradientAmongTies) {
  const auto grad_of = [](const Tensor& x0, bool is_max) {
    Tensor x = leaf(clone(x0));
    (is_max ? max(x) : min(x)).backward();
    return x.grad();
  };
  EXPECT_TRUE(equals(grad_of(t({4}, {3, 1, 3, 3}), true), {4}, {1.0 / 3, 0, 1.0 / 3, 1.0 / 3}));
  EXPECT_TRUE(equals(grad_of(t({2, 2}, {1, 2, 1, 5}), false), {2, 2}, {0.5, 0, 0.5, 0}));
  EXPECT_TRUE(equals(grad_of(t({3}, {1, NAN, NAN}), true), {3}, {0, 0.5, 0.5}));
  EXPECT_TRUE(equals(grad_of(t({3}, {1, 7, 2}), true), {3}, {0, 1, 0}));
}

// Over everything, max() and min() reduce chunk by chunk, then over the chunks' results (three
// passes at this size): the result and the gradient's split must be the one loop's, with the
// first of equal values picked (0.0 before -0.0 here), NaN winning from any chunk, and ties
// counted across chunks.
TEST(MaxMin, OverEverythingInChunksGivesTheOneLoopsResult) {
  Prng prng(43);
  const int64_t n = (int64_t{1} << 20) + 3 * 1024 + 7;
  std::vector<double> v = randn({n}, prng).to_vector();
  for (double& x : v) x = std::clamp(x, -5.0, 5.0);
  for (int64_t i : {int64_t{17}, int64_t{900'001}, n - 1}) v[static_cast<size_t>(i)] = 6.0;
  for (int64_t i : {int64_t{2047}, n - 1030}) v[static_cast<size_t>(i)] = -6.0;
  const auto check = [&](const std::vector<double>& values, bool is_max, double expect, int64_t ties) {
    Tensor x = leaf(t({n}, values));
    Tensor r = is_max ? max(x) : min(x);
    const double got = r.item();
    if (std::isnan(expect)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(std::signbit(got), std::signbit(expect));
      EXPECT_EQ(got, expect);
    }
    r.backward();
    const std::vector<double> grad = x.grad().to_vector();
    int64_t shared = 0;
    for (size_t i = 0; i < grad.size(); ++i) {
      const bool tie = std::isnan(expect) ? std::isnan(values[i]) : values[i] == expect;
      ASSERT_EQ(grad[i], tie ? 1.0 / static_cast<double>(ties) : 0.0) << "element " << i;
      shared += tie ? 1 : 0;
    }
    EXPECT_EQ(shared, ties);
  };
  check(v, true, 6.0, 3);
  check(v, false, -6.0, 2);
  // Zeros of both signs as the max: the first one, +0.0 at 5000, is the value; all four tie.
  std::vector<double> zeros_only(v.size(), -1.0);
  zeros_only[5000] = 0.0;
  zeros_only[3000] = -0.0;  // ... unless an earlier -0.0 comes first
  zeros_only[700'000] = -0.0;
  zeros_only[static_cast<size_t>(n) - 2] = 0.0;
  check(zeros_only, true, -0.0, 4);
  std::vector<double> with_nan = v;
  with_nan[600'000] = NAN;
  with_nan[static_cast<size_t>(n) - 5] = NAN;
  check(with_nan, true, NAN, 2);
  check(with_nan, false, NAN, 2);
}

TEST(MaxMin, Gradcheck) {
  Prng prng(41);
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + " keepdim " + std::to_string(keepdim));
      EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return max(x[0], dim, keepdim).values; },
                                   {leaf(randn({2, 3, 4}, prng))}));
      EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return min(x[0], dim, keepdim).values; },
                                   {leaf(randn({2, 3, 4}, prng))}));
    }
  }
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return max(x[0]); }, {leaf(randn({3, 4}, prng))}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return min(x[0]); }, {leaf(randn({3, 4}, prng))}));
  // A two-way tie is the one tie central differences can check: nudging either element moves the
  // result on one side only, so both see 1/2, which is the even split.
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return max(x[0]); }, {leaf(t({4}, {0.5, 2, -1, 2}))}));
}

TEST(MaxMin, Errors) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_error([&] { max(x, 2); }, kRange, {"max", "dimension 2", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { min(x, -3, true); }, kRange, {"min", "dimension -3", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { max(scalar_tensor(1.0), 0); }, kRange, {"max", "[]"}));
  EXPECT_TRUE(throws_error([] { max(zeros({2, 0}), 1); }, kArg, {"max", "dim 1", "non-zero size", "[2, 0]"}));
  EXPECT_TRUE(throws_error([] { min(zeros({0, 3}), -2); }, kArg, {"min", "dim 0", "[0, 3]"}));
  EXPECT_TRUE(throws_error([] { max(zeros({0})); }, kArg, {"max", "non-empty", "[0]"}));
  EXPECT_TRUE(throws_error([] { min(zeros({2, 0})); }, kArg, {"min", "[2, 0]"}));
  EXPECT_TRUE(throws_error([] { max(Tensor(), 0); }, kArg, {"max", "defined"}));
  EXPECT_TRUE(throws_error([] { min(Tensor()); }, kArg, {"min", "defined"}));
}

// gather ------------------------------------------------------------------------------------------

TEST(Gather, Values) {
  const Tensor a = t({2, 2}, {1, 2, 3, 4});
  // torch.gather's documented example.
  EXPECT_TRUE(equals(gather(a, 1, t({2, 2}, {0, 0, 1, 0})), {2, 2}, {1, 1, 4, 3}));
  EXPECT_TRUE(equals(gather(a, 0, t({1, 2}, {1, 0})), {1, 2}, {3, 2}));
  // Along `dim` the index may be longer than the input; elsewhere shorter.
  EXPECT_TRUE(equals(gather(a, -1, t({2, 4}, {0, 1, 1, 0, 1, 1, 1, 1})), {2, 4}, {1, 2, 2, 1, 4, 4, 4, 4}));
  const Tensor m = reshape(arange(9), {3, 3});
  EXPECT_TRUE(equals(gather(m, 1, t({2, 1}, {2, 0})), {2, 1}, {2, 3}));
  const Tensor y = reshape(arange(24), {2, 3, 4});
  const Tensor out = gather(y, 1, t({2, 1, 2}, {2, 0, 1, 1}));
  EXPECT_TRUE(equals(out, {2, 1, 2}, {y.at({0, 2, 0}), y.at({0, 0, 1}), y.at({1, 1, 0}), y.at({1, 1, 1})}));
  EXPECT_TRUE(equals(gather(a, 0, zeros({0, 2})), {0, 2}, {}));
  // A float32 index works with a float64 input: only the values matter.
  EXPECT_TRUE(equals(gather(a, 1, from_values({2, 1}, {1, 0}, Dtype::float32)), {2, 1}, {2, 3}));
}

TEST(Gather, BackwardScatterAdds) {
  // Row 0 reads column 0 twice (ramp 1 and 2), row 1 reads column 1 then 0 (ramp 3, 4).
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& x) { return gather(x, 1, t({2, 2}, {0, 0, 1, 0})); },
                                    t({2, 2}, {1, 2, 3, 4})),
                     {2, 2}, {3, 0, 4, 3}));
}

TEST(Gather, Gradcheck) {
  Prng prng(42);
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return gather(x[0], 0, x[1]); },
                               {leaf(randn({3, 4}, prng)), t({2, 4}, {2, 0, 1, 2, 2, 2, 0, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return gather(x[0], 1, x[1]); },
                               {leaf(randn({3, 4}, prng)), t({2, 5}, {3, 3, 0, 1, 3, 0, 0, 2, 1, 1})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return gather(x[0], -1, x[1]); },
                               {leaf(randn({2, 3, 2}, prng)), t({2, 2, 3}, {1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 1})}));
}

TEST(Gather, Errors) {
  const Tensor a = zeros({2, 3});
  EXPECT_TRUE(throws_error([&] { gather(a, 1, zeros({2})); }, kShape,
                           {"gather", "same number of dimensions", "[2, 3]", "[2]"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 1, zeros({3, 1})); }, kShape,
                           {"gather", "[3, 1]", "[2, 3]", "dimension 0"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 1, t({2, 1}, {0, 3})); }, kRange,
                           {"gather", "index 3", "dimension 1", "size 3"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 0, t({1, 1}, {-1})); }, kRange, {"gather", "index -1", "size 2"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 1, t({1, 1}, {0.5})); }, kArg, {"gather", "0.5", "integer"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 1, t({1, 1}, {NAN})); }, kArg, {"gather", "integer"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 2, zeros({1, 1})); }, kRange, {"gather", "dimension 2", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { gather(a, 0, Tensor()); }, kArg, {"gather", "index"}));
}

// index_select ------------------------------------------------------------------------------------

TEST(IndexSelect, Values) {
  const Tensor x = t({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(equals(index_select(x, 0, t({2}, {2, 0})), {2, 3}, {7, 8, 9, 1, 2, 3}));
  EXPECT_TRUE(equals(index_select(x, 1, t({2}, {1, 1})), {3, 2}, {2, 2, 5, 5, 8, 8}));
  EXPECT_TRUE(equals(index_select(x, -1, zeros({0})), {3, 0}, {}));
  EXPECT_TRUE(equals(index_select(x, 0, scalar_tensor(1.0)), {1, 3}, {4, 5, 6}));
  const Tensor y = reshape(arange(24), {2, 3, 4});
  const Tensor out = index_select(y, 1, t({2}, {2, 0}));
  EXPECT_EQ(out.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(out.at({1, 0, 3}), y.at({1, 2, 3}));
  EXPECT_EQ(out.at({0, 1, 2}), y.at({0, 0, 2}));
}

TEST(IndexSelect, BackwardIndexAdds) {
  // Row 2 is selected twice (ramp rows 1 and 3), row 0 once (ramp row 2), row 1 never.
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& x) { return index_select(x, 0, t({3}, {2, 0, 2})); },
                                    zeros({3, 3})),
                     {3, 3}, {4, 5, 6, 0, 0, 0, 8, 10, 12}));
}

TEST(IndexSelect, Gradcheck) {
  Prng prng(43);
  const Tensor index = t({4}, {1, 0, 1, 2});
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    EXPECT_TRUE(passes_gradcheck([=](const Inputs& x) { return index_select(x[0], dim, x[1]); },
                                 {leaf(randn({3, 3, 3}, prng)), index}));
  }
}

TEST(IndexSelect, Errors) {
  const Tensor x = zeros({3, 2});
  EXPECT_TRUE(throws_error([&] { index_select(x, 0, zeros({2, 1})); }, kShape,
                           {"index_select", "vector", "[2, 1]"}));
  EXPECT_TRUE(throws_error([&] { index_select(x, 0, t({2}, {0, 3})); }, kRange,
                           {"index_select", "index 3", "dimension 0", "size 3"}));
  EXPECT_TRUE(throws_error([&] { index_select(x, -1, t({1}, {-2})); }, kRange,
                           {"index_select", "index -2", "dimension 1", "size 2"}));
  EXPECT_TRUE(throws_error([&] { index_select(x, 1, t({1}, {1.25})); }, kArg, {"index_select", "1.25"}));
  EXPECT_TRUE(throws_error([&] { index_select(x, 2, t({1}, {0})); }, kRange,
                           {"index_select", "dimension 2", "[3, 2]"}));
}

// embedding ---------------------------------------------------------------------------------------

TEST(Embedding, Values) {
  const Tensor weight = t({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(equals(embedding(weight, t({2, 2}, {1, 3, 0, 1})), {2, 2, 2}, {2, 3, 6, 7, 0, 1, 2, 3}));
  EXPECT_TRUE(equals(embedding(weight, t({1}, {2})), {1, 2}, {4, 5}));
  EXPECT_TRUE(equals(embedding(weight, scalar_tensor(3.0)), {2}, {6, 7}));
  EXPECT_TRUE(equals(embedding(weight, zeros({0})), {0, 2}, {}));
}

TEST(Embedding, BackwardAccumulatesRows) {
  // Ramp over the [2, 2, 2] output: row 1 is read at ramp (1, 2) and (7, 8), row 3 at (3, 4),
  // row 0 at (5, 6); row 2 never, so its gradient is a dense zero row.
  EXPECT_TRUE(equals(grad_with_ramp([](const Tensor& w) { return embedding(w, t({2, 2}, {1, 3, 0, 1})); },
                                    zeros({4, 2})),
                     {4, 2}, {5, 6, 8, 10, 0, 0, 3, 4}));
}

TEST(Embedding, Gradcheck) {
  Prng prng(44);
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return embedding(x[0], x[1]); },
                               {leaf(randn({5, 3}, prng)), t({2, 3}, {4, 0, 4, 1, 1, 2})}));
  EXPECT_TRUE(passes_gradcheck([](const Inputs& x) { return sum(tanh(embedding(x[0], x[1]))); },
                               {leaf(randn({3, 2}, prng)), t({4}, {2, 2, 0, 2})}));
}

TEST(Embedding, Errors) {
  const Tensor weight = zeros({4, 2});
  EXPECT_TRUE(throws_error([] { embedding(zeros({4}), t({1}, {0})); }, kShape, {"embedding", "2-D", "[4]"}));
  EXPECT_TRUE(throws_error([&] { embedding(weight, t({2}, {1, 4})); }, kRange,
                           {"embedding", "index 4", "size 4"}));
  EXPECT_TRUE(throws_error([&] { embedding(weight, t({1}, {-1})); }, kRange, {"embedding", "index -1"}));
  EXPECT_TRUE(throws_error([&] { embedding(weight, t({1}, {1.5})); }, kArg, {"embedding", "1.5"}));
  EXPECT_TRUE(throws_error([&] { embedding(Tensor(), t({1}, {0})); }, kArg, {"embedding", "weight"}));
}

}  // namespace
}  // namespace dagsim
