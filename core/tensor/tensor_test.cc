// Tests of Tensor itself and the factories: values, seeded determinism, element access errors,
// the autograd flags a tensor carries, detach's shared storage, the version counter and the
// grad-mode rule for in-place updates, and to_string.
#include "core/base/throws_error_test_util.h"
#include "core/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/tensor/ops.h"

namespace dagsim {
namespace {


TEST(Tensor, ConstantFactories) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dim(), 2);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), Dtype::float64);
  EXPECT_EQ(z.nbytes(), 48u);
  EXPECT_EQ(z.to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ones({3}, Dtype::float32).to_vector(), std::vector<double>(3, 1.0));
  EXPECT_EQ(ones({3}, Dtype::float32).nbytes(), 12u);
  EXPECT_EQ(full({2, 2}, -2.5).to_vector(), std::vector<double>(4, -2.5));
  Tensor s = scalar_tensor(7.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 7.0);
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
  Tensor like = ones_like(from_values({2}, {5, 6}, Dtype::float32));
  EXPECT_EQ(like.dtype(), Dtype::float32);
  EXPECT_EQ(like.to_vector(), (std::vector<double>{1, 1}));
  EXPECT_EQ(zeros_like(like).to_vector(), (std::vector<double>{0, 0}));
  EXPECT_TRUE(throws_error([] { Tensor::empty({2, -1}); }, ErrorCode::invalid_argument, {"[2, -1]"}));
}

TEST(Tensor, Arange) {
  EXPECT_EQ(arange(5).to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1.0, 2.0, 0.25).to_vector(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(5.0, 0.0, -2.0).to_vector(), (std::vector<double>{5, 3, 1}));
  EXPECT_EQ(arange(0.0, 1.0, 0.3).shape(), (Shape{4}));  // ceil(1 / 0.3)
  EXPECT_EQ(arange(2.0, 2.0).numel(), 0);
  EXPECT_EQ(arange(3, Dtype::float32).dtype(), Dtype::float32);
  EXPECT_TRUE(throws_error([] { arange(0.0, 5.0, 0.0); }, ErrorCode::invalid_argument, {"arange", "step"}));
  EXPECT_TRUE(throws_error([] { arange(0.0, 5.0, -1.0); }, ErrorCode::invalid_argument, {"arange"}));
  EXPECT_TRUE(throws_error([] { arange(5.0, 0.0, 1.0); }, ErrorCode::invalid_argument, {"arange"}));
  EXPECT_TRUE(throws_error([] { arange(0.0, 1.0, NAN); }, ErrorCode::invalid_argument, {"arange"}));
}

TEST(Tensor, FromValues) {
  Tensor t = from_values({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(t.to_vector(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.at({1, 0}), 4.0);
  EXPECT_EQ(t.at({0, 2}), 3.0);
  Tensor f = from_values({2}, {0.5, -1.25}, Dtype::float32);
  EXPECT_EQ(f.dtype(), Dtype::float32);
  EXPECT_EQ(f.data<float>()[1], -1.25f);
  EXPECT_TRUE(throws_error([] { from_values({2, 3}, {1, 2, 3, 4, 5}); }, ErrorCode::shape_mismatch,
                           {"from_values", "5 values", "[2, 3]"}));
  EXPECT_TRUE(throws_error([] { from_values({}, {}); }, ErrorCode::shape_mismatch, {"[]"}));
}

TEST(Tensor, RandomFactoriesAreDeterministicPerSeed) {
  Prng a(7), b(7), c(8);
  Tensor ua = rand_uniform({100}, a, -2.0, 3.0);
  Tensor ub = rand_uniform({100}, b, -2.0, 3.0);
  Tensor uc = rand_uniform({100}, c, -2.0, 3.0);
  EXPECT_EQ(ua.to_vector(), ub.to_vector());
  EXPECT_NE(ua.to_vector(), uc.to_vector());
  for (double v : ua.to_vector()) {
    EXPECT_GE(v, -2.0);
    EXPECT_LT(v, 3.0);
  }
  Tensor na = randn({2, 50}, a, 1.0, 2.0);
  Tensor nb = randn({2, 50}, b, 1.0, 2.0);
  Tensor nc = randn({2, 50}, c, 1.0, 2.0);
  EXPECT_EQ(na.to_vector(), nb.to_vector());
  EXPECT_NE(na.to_vector(), nc.to_vector());
  // The stream advances: a second draw from the same generator differs from the first.
  EXPECT_NE(rand_uniform({100}, a, -2.0, 3.0).to_vector(), ua.to_vector());
  EXPECT_EQ(randn({3}, a, 0.0, 1.0, Dtype::float32).dtype(), Dtype::float32);
}

TEST(Tensor, RandnHasTheRequestedMoments) {
  Prng prng(11);
  const std::vector<double> v = randn({20000}, prng, 3.0, 0.5).to_vector();
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size());
  EXPECT_NEAR(mean, 3.0, 0.02);
  EXPECT_NEAR(std::sqrt(var), 0.5, 0.02);
}

TEST(Tensor, RandomFactoryArgumentErrors) {
  Prng prng(1);
  EXPECT_TRUE(throws_error([&] { rand_uniform({2}, prng, 1.0, 1.0); }, ErrorCode::invalid_argument,
                           {"rand_uniform"}));
  EXPECT_TRUE(throws_error([&] { randn({2}, prng, 0.0, -1.0); }, ErrorCode::invalid_argument, {"randn"}));
}

TEST(Tensor, ItemAndAt) {
  EXPECT_EQ(scalar_tensor(2.5).item(), 2.5);
  EXPECT_EQ(from_values({1, 1}, {4.0}).item(), 4.0);
  EXPECT_EQ(from_values({1}, {0.5}, Dtype::float32).item(), 0.5);
  EXPECT_TRUE(throws_error([] { zeros({2}).item(); }, ErrorCode::invalid_argument,
                           {"item", "2 elements", "[2]"}));
  EXPECT_TRUE(throws_error([] { zeros({0}).item(); }, ErrorCode::invalid_argument, {"item"}));

  Tensor t = reshape(arange(24), {2, 3, 4});
  EXPECT_EQ(t.at({1, 2, 3}), 23.0);
  EXPECT_EQ(t.at({0, 1, 0}), 4.0);
  EXPECT_EQ(scalar_tensor(9.0).at({}), 9.0);
  EXPECT_TRUE(throws_error([&] { t.at({1, 2}); }, ErrorCode::index_out_of_range, {"2 indices", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { t.at({0, 3, 0}); }, ErrorCode::index_out_of_range,
                           {"index 3", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { t.at({-1, 0, 0}); }, ErrorCode::index_out_of_range, {"index -1"}));
}

TEST(Tensor, SizeWrapsNegativeDims) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(-3), 2);
  EXPECT_TRUE(throws_error([&] { t.size(3); }, ErrorCode::index_out_of_range, {"3", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { t.size(-4); }, ErrorCode::index_out_of_range, {"-4"}));
}

TEST(Tensor, HandlesShareOneImpl) {
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  Tensor a = zeros({2});
  Tensor b = a;
  EXPECT_TRUE(a.is_same(b));
  EXPECT_FALSE(a.is_same(zeros({2})));
  b.data<double>()[1] = 3.0;
  EXPECT_EQ(a.at({1}), 3.0);
}

TEST(Tensor, RequiresGradOnlyOnLeaves) {
  Tensor x = zeros({2});
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  x.set_requires_grad(true);
  EXPECT_TRUE(x.requires_grad());
  Tensor y = mul(x, 2.0);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward");
  EXPECT_TRUE(throws_error([&] { y.set_requires_grad(false); }, ErrorCode::invalid_argument,
                           {"leaf", "MulBackward"}));
  // Ops on tensors that do not require grad record nothing; neither do ops under NoGradGuard.
  EXPECT_FALSE(mul(zeros({2}), 2.0).requires_grad());
  {
    autograd::NoGradGuard no_grad;
    Tensor z = mul(x, 2.0);
    EXPECT_FALSE(z.requires_grad());
    EXPECT_TRUE(z.is_leaf());
  }
  x.set_requires_grad(false);
  EXPECT_FALSE(x.requires_grad());
}

TEST(Tensor, SetGradChecksShape) {
  Tensor x = zeros({2, 3});
  x.set_grad(ones({2, 3}));
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>(6, 1.0));
  EXPECT_TRUE(throws_error([&] { x.set_grad(ones({3, 2})); }, ErrorCode::shape_mismatch,
                           {"[3, 2]", "[2, 3]"}));
}

TEST(Tensor, DetachSharesStorageAndVersion) {
  Tensor x = from_values({3}, {1, 2, 3});
  x.set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  Tensor d = detach(y);
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.storage(), y.storage());
  EXPECT_FALSE(d.is_same(y));
  EXPECT_EQ(d.version(), y.version());
  const uint32_t before = y.version();
  add_(d, ones({3}));  // allowed: d does not require grad
  EXPECT_EQ(y.version(), before + 1);
  EXPECT_EQ(d.version(), y.version());
  EXPECT_EQ(y.to_vector(), (std::vector<double>{3, 5, 7}));
}

TEST(Tensor, InplaceOpsBumpTheVersion) {
  Tensor t = from_values({2, 2}, {1, 4, 9, 16});
  const Tensor other = full({2, 2}, 2.0);
  uint32_t version = t.version();
  EXPECT_EQ(version, 0u);
  auto expect_bumped = [&](const char* op) {
    EXPECT_EQ(t.version(), ++version) << op;
  };
  sqrt_(t);
  expect_bumped("sqrt_");
  EXPECT_EQ(t.to_vector(), (std::vector<double>{1, 2, 3, 4}));
  add_(t, other, 0.5);
  expect_bumped("add_");
  EXPECT_EQ(t.to_vector(), (std::vector<double>{2, 3, 4, 5}));
  sub_(t, other);
  expect_bumped("sub_");
  mul_(t, other);
  expect_bumped("mul_");
  EXPECT_EQ(t.to_vector(), (std::vector<double>{0, 2, 4, 6}));
  div_(t, other);
  expect_bumped("div_");
  mul_(t, 3.0);
  expect_bumped("mul_ scalar");
  EXPECT_EQ(t.to_vector(), (std::vector<double>{0, 3, 6, 9}));
  addcmul_(t, other, from_values({2, 2}, {1, 1, 0, 0}), -1.5);
  expect_bumped("addcmul_");
  EXPECT_EQ(t.to_vector(), (std::vector<double>{-3, 0, 6, 9}));
  add_(t, from_values({2}, {10, 20}));  // broadcast along rows
  expect_bumped("add_ broadcast");
  EXPECT_EQ(t.to_vector(), (std::vector<double>{7, 20, 16, 29}));
  copy_(t, other);
  expect_bumped("copy_");
  EXPECT_EQ(t.to_vector(), std::vector<double>(4, 2.0));
  fill_(t, 5.0);
  expect_bumped("fill_");
  zero_(t);
  expect_bumped("zero_");
  EXPECT_EQ(t.to_vector(), std::vector<double>(4, 0.0));
  // Out-of-place ops leave the version alone.
  (void)add(t, other);
  (void)clone(t);
  EXPECT_EQ(t.version(), version);
}

TEST(Tensor, InplaceOnTensorRequiringGradNeedsNoGrad) {
  Tensor w = ones({3});
  w.set_requires_grad(true);
  EXPECT_TRUE(throws_error([&] { add_(w, ones({3})); }, ErrorCode::invalid_argument,
                           {"add_", "leaf", "requires grad", "NoGradGuard"}));
  EXPECT_TRUE(throws_error([&] { mul_(w, 2.0); }, ErrorCode::invalid_argument, {"mul_"}));
  EXPECT_TRUE(throws_error([&] { zero_(w); }, ErrorCode::invalid_argument));
  Tensor h = mul(w, 2.0);  // non-leaf
  EXPECT_TRUE(throws_error([&] { sub_(h, ones({3})); }, ErrorCode::invalid_argument, {"sub_"}));
  EXPECT_EQ(w.version(), 0u);
  EXPECT_EQ(w.to_vector(), std::vector<double>(3, 1.0));
  {
    autograd::NoGradGuard no_grad;  // as an optimizer step
    add_(w, full({3}, 0.5), -2.0);
  }
  EXPECT_EQ(w.version(), 1u);
  EXPECT_EQ(w.to_vector(), std::vector<double>(3, 0.0));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
}

TEST(Tensor, InplaceArgumentErrors) {
  Tensor t = zeros({2, 1});
  EXPECT_TRUE(throws_error([&] { add_(t, ones({3})); }, ErrorCode::shape_mismatch, {"add_", "[2, 1]"}));
  EXPECT_TRUE(throws_error([&] { copy_(t, ones({2, 1}, Dtype::float32)); }, ErrorCode::dtype_mismatch,
                           {"copy_", "float32", "float64"}));
  EXPECT_TRUE(throws_error([&] { addcmul_(t, ones({2, 1}), ones({1, 2}), 1.0); }, ErrorCode::shape_mismatch,
                           {"addcmul_", "[1, 2]"}));
  Tensor undefined;
  EXPECT_TRUE(throws_error([&] { fill_(undefined, 1.0); }, ErrorCode::invalid_argument, {"fill_"}));
}

TEST(Tensor, ToString) {
  EXPECT_EQ(from_values({2, 2}, {1, 2, 3, 4}).to_string(), "tensor([[1, 2], [3, 4]], dtype=float64)");
  EXPECT_EQ(scalar_tensor(2.5).to_string(), "tensor(2.5, dtype=float64)");
  EXPECT_EQ(from_values({3}, {-0.5, 0, 8}, Dtype::float32).to_string(),
            "tensor([-0.5, 0, 8], dtype=float32)");
  EXPECT_EQ(zeros({0}).to_string(), "tensor([], dtype=float64)");
  EXPECT_EQ(Tensor().to_string(), "tensor(undefined)");
  // 17 significant digits: the printed value reads back as the same double.
  EXPECT_EQ(std::stod(scalar_tensor(0.1).to_string().substr(7)), 0.1);
  EXPECT_EQ(describe(zeros({3, 3}, Dtype::float32)), "float32 [3, 3]");
  EXPECT_EQ(describe(Tensor()), "undefined");
}

}  // namespace
}  // namespace dagsim
