// Bad inputs to every op family: each must throw the dagsim::Error code a caller can react to, with
// a message that names the op and the shapes involved (ops.h's contract). Also the two errors
// autograd raises through the ops' saved tensors: a saved tensor modified in place, and a second
// backward through a freed graph.
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

namespace dagsim {
namespace {


constexpr ErrorCode kShape = ErrorCode::shape_mismatch;
constexpr ErrorCode kDtype = ErrorCode::dtype_mismatch;
constexpr ErrorCode kRange = ErrorCode::index_out_of_range;
constexpr ErrorCode kArg = ErrorCode::invalid_argument;

TEST(OpsErrors, BinaryShapeMismatch) {
  const Tensor a = zeros({2, 3});
  const Tensor b = zeros({4});
  EXPECT_TRUE(throws_error([&] { add(a, b); }, kShape, {"add", "[2, 3]", "[4]"}));
  EXPECT_TRUE(throws_error([&] { sub(a, b); }, kShape, {"sub", "[2, 3]", "[4]"}));
  EXPECT_TRUE(throws_error([&] { mul(b, a); }, kShape, {"mul", "[4]", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { div(a, zeros({3, 3})); }, kShape, {"div", "[2, 3]", "[3, 3]"}));
  EXPECT_TRUE(throws_error([&] { broadcast_shapes({2}, {3}, "my_op"); }, kShape, {"my_op"}));
  EXPECT_TRUE(throws_error([&] { sum_to(a, {4}); }, kShape, {"sum_to", "[2, 3]", "[4]"}));
  EXPECT_TRUE(throws_error([&] { sum_to(b, {1, 4}); }, kShape, {"sum_to", "[4]", "[1, 4]"}));
}

// The elementwise binary ops promote mixed float dtypes, as PyTorch's do (cast.cc); the others
// refuse them by name, as torch.matmul does ("expected scalar type").
TEST(OpsErrors, DtypeMismatch) {
  const Tensor f32 = zeros({2}, Dtype::float32);
  const Tensor f64 = zeros({2});
  for (const Tensor& t : {add(f32, f64), sub(f64, f32), mul(f32, f64), div(f64, full({2}, 1.0, Dtype::float32))}) {
    EXPECT_EQ(t.dtype(), Dtype::float64);
  }
  EXPECT_EQ(add(f32, f32).dtype(), Dtype::float32);
  EXPECT_TRUE(throws_error([&] { matmul(f32, f64); }, kDtype, {"matmul", "float32", "float64"}));
  EXPECT_TRUE(throws_error([&] { bmm(zeros({1, 2, 2}, Dtype::float32), zeros({1, 2, 2})); }, kDtype,
                           {"bmm"}));
  EXPECT_TRUE(throws_error([&] { cat({f64, f32}); }, kDtype, {"cat", "float32"}));
  EXPECT_TRUE(throws_error([&] { linear(zeros({1, 2}), zeros({3, 2}, Dtype::float32)); }, kDtype,
                           {"linear"}));
  EXPECT_TRUE(throws_error([&] { mse_loss(f32, f64); }, kDtype, {"mse_loss"}));
}

TEST(OpsErrors, UndefinedInputs) {
  const Tensor undefined;
  EXPECT_TRUE(throws_error([&] { exp(undefined); }, kArg, {"exp", "defined"}));
  EXPECT_TRUE(throws_error([&] { abs(undefined); }, kArg, {"abs", "defined"}));
  EXPECT_TRUE(throws_error([&] { sqrt(undefined); }, kArg, {"sqrt", "defined"}));
  EXPECT_TRUE(throws_error([&] { add(zeros({1}), undefined); }, kArg, {"add", "other"}));
  EXPECT_TRUE(throws_error([&] { sum(undefined); }, kArg, {"sum"}));
  EXPECT_TRUE(throws_error([&] { reshape(undefined, {1}); }, kArg, {"reshape"}));
  EXPECT_TRUE(throws_error([&] { linear(zeros({1, 2}), undefined); }, kArg, {"linear", "weight"}));
}

TEST(OpsErrors, BadDims) {
  const Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_error([&] { sum(x, 3); }, kRange, {"sum", "dimension 3", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { sum(x, -4, true); }, kRange, {"sum", "dimension -4", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { mean(x, 5); }, kRange, {"mean", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { softmax(x, 3); }, kRange, {"softmax", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { log_softmax(x, -4); }, kRange, {"log_softmax", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { transpose(x, 0, 3); }, kRange, {"transpose", "dimension 3", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { transpose(x, -4, 0); }, kRange, {"transpose", "[2, 3, 4]"}));
  // unsqueeze may insert at ndim (so [-4, 3] is valid here) but not past it.
  EXPECT_TRUE(throws_error([&] { unsqueeze(x, 4); }, kRange, {"unsqueeze", "dimension 4", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { unsqueeze(x, -5); }, kRange, {"unsqueeze", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { squeeze(x, 3); }, kRange, {"squeeze", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { stack({x, x}, 4); }, kRange, {"stack", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { cat({x, x}, 3); }, kRange, {"cat", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { split(x, 1, 3); }, kRange, {"split", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { narrow(x, -4, 0, 1); }, kRange, {"narrow", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { sum(scalar_tensor(1.0), 0); }, kRange, {"sum", "[]"}));
}

TEST(OpsErrors, EmptyReductions) {
  EXPECT_TRUE(throws_error([] { mean(zeros({0})); }, kArg, {"mean", "empty"}));
  EXPECT_TRUE(throws_error([] { mean(zeros({2, 0}), 1); }, kArg, {"mean", "empty"}));
}

TEST(OpsErrors, ReshapeAndExpand) {
  const Tensor x = zeros({2, 3});
  EXPECT_TRUE(throws_error([&] { reshape(x, {4, 2}); }, kShape, {"reshape", "[4, 2]", "size 6", "[2, 3]"}));
  EXPECT_TRUE(throws_error([&] { reshape(x, {-1, 4}); }, kShape, {"reshape", "[-1, 4]", "size 6"}));
  EXPECT_TRUE(throws_error([&] { reshape(x, {-1, -1}); }, kArg, {"reshape", "one dimension"}));
  EXPECT_TRUE(throws_error([&] { reshape(x, {-2, 3}); }, kArg, {"reshape", "-2"}));
  EXPECT_TRUE(throws_error([&] { expand(zeros({3, 2}), {3, 4}); }, kShape, {"expand", "[3, 4]", "[3, 2]"}));
  EXPECT_TRUE(throws_error([&] { expand(x, {3}); }, kShape, {"expand", "(1)", "(2)"}));
  EXPECT_TRUE(throws_error([&] { expand(x, {-1, 2, 3}); }, kShape, {"expand", "-1", "[-1, 2, 3]"}));
}

TEST(OpsErrors, CatStackSplitChunkNarrow) {
  const Tensor a = zeros({2, 3});
  EXPECT_TRUE(throws_error([&] { cat({a, zeros({2, 4})}, 0); }, kShape, {"cat", "[2, 3]", "[2, 4]"}));
  EXPECT_TRUE(throws_error([&] { cat({a, zeros({3})}, 0); }, kShape, {"cat", "[2, 3]", "[3]"}));
  EXPECT_TRUE(throws_error([&] { cat({}); }, kArg, {"cat", "non-empty"}));
  EXPECT_TRUE(throws_error([&] { cat({scalar_tensor(1.0)}); }, kArg, {"cat", "zero-dimensional"}));
  EXPECT_TRUE(throws_error([&] { stack({a, zeros({3, 2})}); }, kShape, {"stack", "[2, 3]", "[3, 2]"}));
  EXPECT_TRUE(throws_error([&] { stack({}); }, kArg, {"stack"}));
  const Tensor x = zeros({5, 2});
  EXPECT_TRUE(throws_error([&] { split(x, std::vector<int64_t>{1, 2}); }, kShape,
                           {"split", "[1, 2]", "sum to 3", "size 5", "[5, 2]"}));
  EXPECT_TRUE(throws_error([&] { split(x, std::vector<int64_t>{3, 3}); }, kShape, {"split", "sum to 6"}));
  EXPECT_TRUE(throws_error([&] { split(x, std::vector<int64_t>{6, -1}); }, kArg, {"split", "non-negative"}));
  EXPECT_TRUE(throws_error([&] { split(x, 0); }, kArg, {"split", "split_size"}));
  EXPECT_TRUE(throws_error([&] { split(scalar_tensor(1.0), 1); }, kArg, {"split", "zero-dimensional"}));
  EXPECT_TRUE(throws_error([&] { chunk(x, 0); }, kArg, {"chunk", "chunks"}));
  EXPECT_TRUE(throws_error([&] { narrow(x, 0, 4, 2); }, kRange,
                           {"narrow", "start (4)", "length (2)", "[5, 2]"}));
  EXPECT_TRUE(throws_error([&] { narrow(x, 1, -3, 1); }, kRange, {"narrow", "[5, 2]"}));
  EXPECT_TRUE(throws_error([&] { narrow(x, 1, 0, -1); }, kRange, {"narrow", "[5, 2]"}));
  EXPECT_TRUE(throws_error([&] { narrow(scalar_tensor(1.0), 0, 0, 1); }, kArg, {"narrow"}));
}

TEST(OpsErrors, Matmul) {
  EXPECT_TRUE(throws_error([] { matmul(zeros({2, 3}), zeros({4, 5})); }, kShape,
                           {"matmul", "[2, 3]", "[4, 5]"}));
  EXPECT_TRUE(throws_error([] { matmul(zeros({3}), zeros({4})); }, kShape, {"matmul", "[3]", "[4]"}));
  EXPECT_TRUE(throws_error([] { matmul(zeros({2, 3}), zeros({2})); }, kShape, {"matmul", "[2, 3]", "[2]"}));
  EXPECT_TRUE(throws_error([] { matmul(zeros({2, 3, 4}), zeros({5, 4})); }, kShape,
                           {"matmul", "[2, 3, 4]", "[5, 4]"}));
  EXPECT_TRUE(throws_error([] { matmul(scalar_tensor(1.0), zeros({2})); }, kShape, {"matmul", "[]", "[2]"}));
  // Batch dims that do not broadcast: the message names the operands, not just their batch dims.
  EXPECT_TRUE(throws_error([] { matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); }, kShape,
                           {"matmul", "[2, 3, 4]", "[3, 4, 5]"}));
}

TEST(OpsErrors, Bmm) {
  EXPECT_TRUE(throws_error([] { bmm(zeros({2, 3}), zeros({2, 3, 4})); }, kShape,
                           {"bmm", "3-D", "[2, 3]", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([] { bmm(zeros({2, 3, 4}), zeros({1, 2, 3, 4})); }, kShape,
                           {"bmm", "[1, 2, 3, 4]"}));
  EXPECT_TRUE(throws_error([] { bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); }, kShape,
                           {"bmm", "[2, 3, 4]", "[3, 4, 5]"}));
  EXPECT_TRUE(throws_error([] { bmm(zeros({2, 3, 4}), zeros({2, 5, 5})); }, kShape,
                           {"bmm", "[2, 3, 4]", "[2, 5, 5]"}));
}

TEST(OpsErrors, MultiDot) {
  EXPECT_TRUE(throws_error([] { multi_dot({zeros({2, 2})}); }, kArg, {"multi_dot", "at least 2"}));
  EXPECT_TRUE(throws_error([] { multi_dot({zeros({2, 3}), zeros({3}), zeros({2, 2})}); }, kShape,
                           {"multi_dot", "tensor 1", "[3]"}));
  EXPECT_TRUE(throws_error([] { multi_dot({zeros({2, 3, 1}), zeros({1, 2})}); }, kShape,
                           {"multi_dot", "tensor 0", "[2, 3, 1]"}));
  // An inner mismatch names multi_dot and the two tensors as given, not an intermediate product.
  EXPECT_TRUE(throws_error([] { multi_dot({zeros({2, 3}), zeros({3, 4}), zeros({5, 6})}); }, kShape,
                           {"multi_dot", "[3, 4]", "[5, 6]"}));
}

TEST(OpsErrors, Linear) {
  const Tensor x = zeros({4, 3});
  EXPECT_TRUE(throws_error([&] { linear(x, zeros({5, 2})); }, kShape, {"linear", "[4, 3]", "[5, 2]"}));
  EXPECT_TRUE(throws_error([&] { linear(x, zeros({3})); }, kShape, {"linear", "[4, 3]", "[3]"}));
  EXPECT_TRUE(throws_error([&] { linear(zeros({2, 4, 3}), zeros({3, 5})); }, kShape,
                           {"linear", "[2, 4, 3]", "[3, 5]"}));
  EXPECT_TRUE(throws_error([&] { linear(x, zeros({5, 3}), zeros({4})); }, kShape,
                           {"linear", "bias", "[4]", "[5]"}));
  EXPECT_TRUE(throws_error([&] { linear(x, zeros({5, 3}), zeros({1, 5})); }, kShape, {"linear", "[1, 5]"}));
}

TEST(OpsErrors, Losses) {
  EXPECT_TRUE(throws_error([] { mse_loss(zeros({3}), zeros({4})); }, kShape, {"mse_loss", "[3]", "[4]"}));
  EXPECT_TRUE(throws_error([] { mse_loss(zeros({2, 3}), zeros({3})); }, kShape,
                           {"mse_loss", "[2, 3]", "[3]"}));
  EXPECT_TRUE(throws_error([] { mse_loss(zeros({0}), zeros({0})); }, kArg, {"mse_loss", "empty"}));
  const Tensor logp = zeros({2, 3});
  EXPECT_TRUE(throws_error([&] { nll_loss(logp, from_values({2}, {0, 3})); }, kRange,
                           {"nll_loss", "3", "[0, 3)"}));
  EXPECT_TRUE(throws_error([&] { nll_loss(logp, from_values({2}, {-1, 0})); }, kRange,
                           {"nll_loss", "[0, 3)"}));
  EXPECT_TRUE(throws_error([&] { nll_loss(logp, from_values({2}, {0.5, 1})); }, kRange, {"nll_loss", "0.5"}));
  EXPECT_TRUE(throws_error([&] { nll_loss(logp, zeros({3})); }, kShape, {"nll_loss", "[2, 3]", "[3]"}));
  EXPECT_TRUE(throws_error([&] { nll_loss(zeros({3}), zeros({3})); }, kShape, {"nll_loss", "[3]"}));
  EXPECT_TRUE(throws_error([&] { cross_entropy(zeros({2, 3, 4}), zeros({2})); }, kShape,
                           {"cross_entropy", "[2, 3, 4]"}));
  EXPECT_TRUE(throws_error([&] { cross_entropy(logp, from_values({2}, {1, 7})); }, kRange, {"[0, 3)"}));
}

// Autograd through saved tensors ------------------------------------------------------------------

TEST(OpsErrors, BackwardThroughTensorModifiedInPlace) {
  Tensor x = from_values({3}, {1, 2, 3});
  x.set_requires_grad(true);
  // A constant saved by mul for x's gradient, then updated in place (allowed: no grad needed).
  Tensor w = from_values({3}, {4, 5, 6});
  Tensor y = sum(mul(x, w));
  add_(w, ones({3}));
  EXPECT_TRUE(throws_error([&] { y.backward(); }, ErrorCode::modified_by_inplace,
                           {"modified by an inplace operation", "is at version 1", "expected version 0",
                            "MulBackward"}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(OpsErrors, BackwardAfterTheIndicesOfMaxAlongADimWereModifiedInPlace) {
  // The backward scatters through the indices max returned; changed in place (they need no grad),
  // they would point anywhere, so the backward refuses by name, as PyTorch's does.
  Tensor x = from_values({2, 3}, {1, 5, 2, 7, 0, 3});
  x.set_requires_grad(true);
  ValuesIndices top = max(x, 1);
  Tensor loss = sum(top.values);
  fill_(top.indices, 1e9);
  EXPECT_TRUE(throws_error([&] { loss.backward(); }, ErrorCode::modified_by_inplace,
                           {"modified by an inplace operation", "MaxBackward"}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(OpsErrors, BackwardThroughSavedOutputModifiedViaDetach) {
  Tensor x = from_values({2}, {0.5, 1.5});
  x.set_requires_grad(true);
  Tensor e = exp(x);  // ExpBackward saves its output
  Tensor loss = sum(e);
  Tensor alias = detach(e);  // shares e's storage and so its version counter
  mul_(alias, 2.0);
  mul_(alias, 2.0);
  EXPECT_TRUE(throws_error([&] { loss.backward(); }, ErrorCode::modified_by_inplace,
                           {"modified by an inplace operation", "is at version 2", "ExpBackward"}));
}

TEST(OpsErrors, OptimizerStepBeforeBackwardIsCaught) {
  Tensor w = from_values({2}, {1, 2});
  w.set_requires_grad(true);
  Tensor loss = sum(mul(w, w));  // saves the leaf w
  {
    autograd::NoGradGuard no_grad;
    add_(w, ones({2}), -0.1);
  }
  EXPECT_TRUE(throws_error([&] { loss.backward(); }, ErrorCode::modified_by_inplace,
                           {"modified by an inplace operation", "is at version 1"}));
}

TEST(OpsErrors, SecondBackwardWithoutRetainGraph) {
  Tensor x = from_values({2}, {0.5, 1.5});
  x.set_requires_grad(true);
  Tensor y = sum(exp(x));
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), exp(detach(x))));
  EXPECT_TRUE(throws_error([&] { y.backward(); }, ErrorCode::graph_freed,
                           {"backward through the graph a second time", "retain_graph"}));
}

TEST(OpsErrors, RetainGraphAllowsASecondBackward) {
  Tensor x = from_values({2}, {0.5, 1.5});
  x.set_requires_grad(true);
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), mul(exp(detach(x)), 2.0)));
  EXPECT_TRUE(throws_error([&] { y.backward(); }, ErrorCode::graph_freed, {"second time"}));
}

}  // namespace
}  // namespace dagsim
