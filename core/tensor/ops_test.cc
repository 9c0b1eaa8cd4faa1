// Forward values of every op in ops.h on small cases worked out by hand (backward is gradcheck's
// job, gradcheck_test.cc; bad inputs are ops_errors_test.cc's).
#include "core/tensor/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "core/tensor/op_util.h"
#include "core/tensor/tensor_test_util.h"

namespace dagsim {
namespace {

using namespace dagsim::testing;  // t, leaf, V, equals, passes_gradcheck

TEST(Ops, BinaryElementwise) {
  Tensor a = t({2, 2}, {1, 2, 3, 4});
  Tensor b = t({2, 2}, {4, 3, 2, 1});
  EXPECT_TRUE(equals(add(a, b), {2, 2}, {5, 5, 5, 5}));
  EXPECT_TRUE(equals(sub(a, b), {2, 2}, {-3, -1, 1, 3}));
  EXPECT_TRUE(equals(mul(a, b), {2, 2}, {4, 6, 6, 4}));
  EXPECT_TRUE(equals(div(a, b), {2, 2}, {0.25, 2.0 / 3.0, 1.5, 4}));
  EXPECT_TRUE(equals(a + b * a - b / b, {2, 2}, {4, 7, 8, 7}));
}

TEST(Ops, BinaryBroadcasting) {
  Tensor col = t({3, 1}, {1, 2, 3});
  Tensor row = t({1, 4}, {10, 20, 30, 40});
  EXPECT_TRUE(equals(add(col, row), {3, 4}, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
  Tensor m = t({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(equals(sub(m, t({3}, {1, 1, 2})), {2, 3}, {0, 1, 1, 3, 4, 4}));
  EXPECT_TRUE(equals(mul(scalar_tensor(2.0), m), {2, 3}, {2, 4, 6, 8, 10, 12}));
  EXPECT_TRUE(equals(div(m, scalar_tensor(2.0)), {2, 3}, {0.5, 1, 1.5, 2, 2.5, 3}));
  EXPECT_TRUE(equals(div(scalar_tensor(6.0), m), {2, 3}, {6, 3, 2, 1.5, 1.2, 1}));
  // [4,1,3] x [2,1] -> [4,2,3]: out[i,j,k] = a[i,0,k] * b[j,0].
  Tensor a = arange(12.0, 24.0, 1.0);
  Tensor r = mul(reshape(a, {4, 1, 3}), t({2, 1}, {1, -1}));
  EXPECT_EQ(r.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(r.at({2, 0, 1}), 19.0);
  EXPECT_EQ(r.at({2, 1, 1}), -19.0);
  EXPECT_EQ(r.at({3, 1, 2}), -23.0);
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {2, 1}, "x"), (Shape{4, 2, 3}));
  EXPECT_EQ(broadcast_shapes({}, {5}, "x"), (Shape{5}));
}

// Broadcasting with rows long enough for the vector kernel (elementwise.cc: broadcast_rows): every
// element equals the formula applied to the elements it broadcasts from, to the bit, in both
// dtypes, for operands that run along the row, repeat one value across it, or are scalars (and
// short rows, which take the element loops).
TEST(Ops, BroadcastingRowsGiveTheElementFormulasBits) {
  Prng prng(17);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{5, 1, 40}, {3, 40}}, {{6, 33}, {6, 1}}, {{6, 1}, {6, 33}}, {{4, 20}, {}}, {{}, {2, 3, 17}},
      {{40}, {3, 1, 40}}, {{2, 1, 3}, {4, 1}}, {{3, 16}, {16}}, {{5, 7}, {}}};
  for (Dtype dtype : {Dtype::float32, Dtype::float64}) {
    for (const auto& [sa, sb] : cases) {
      const Tensor a = randn(sa, prng, 0, 1, dtype), b = add(randn(sb, prng, 0, 1, dtype), scalar_tensor(3.0, dtype));
      const Shape so = broadcast_shapes(sa, sb, "test");
      // The element of an operand that output position `pos` reads, dim by dim from the right.
      const auto element = [&](const Tensor& x, const Shape& pos) {
        const std::vector<double> v = x.to_vector();
        int64_t offset = 0, stride = 1;
        for (size_t d = 0; d < x.shape().size(); ++d) {
          const size_t xd = x.shape().size() - 1 - d, od = so.size() - 1 - d;
          offset += (x.shape()[xd] == 1 ? 0 : pos[od]) * stride;
          stride *= x.shape()[xd];
        }
        return v[static_cast<size_t>(offset)];
      };
      const std::vector<std::pair<Tensor, std::function<double(double, double)>>> ops = {
          {add(a, b), [](double x, double y) { return x + y; }}, {sub(a, b), [](double x, double y) { return x - y; }},
          {mul(a, b), [](double x, double y) { return x * y; }}, {div(a, b), [](double x, double y) { return x / y; }}};
      for (size_t k = 0; k < ops.size(); ++k) {
        const std::vector<double> got = ops[k].first.to_vector();
        ASSERT_EQ(ops[k].first.shape(), so);
        Shape pos(so.size(), 0);
        for (size_t i = 0; i < got.size(); ++i) {
          const double x = element(a, pos), y = element(b, pos);
          // In float32 the op rounds once, as float(x) op float(y) does.
          const double want = dtype == Dtype::float32
                                  ? static_cast<double>(static_cast<float>(ops[k].second(static_cast<float>(x), static_cast<float>(y))))
                                  : ops[k].second(x, y);
          ASSERT_EQ(got[i], want) << "op " << k << " element " << i << " of " << shape_str(so);
          for (size_t d = so.size(); d-- > 0;) {
            if (++pos[d] < so[d]) break;
            pos[d] = 0;
          }
        }
      }
    }
  }
}

// sum and mean over a dim add each output's elements in order, from +0, in the tensor's dtype, and
// scale once: to the bit, for rows taken several at once (and the rows left over), columns, and
// blocks of columns, with magnitudes spread so that another order would round differently.
TEST(Ops, SumAndMeanOverADimAddInOrder) {
  Prng prng(23);
  const std::vector<std::pair<Shape, int64_t>> cases = {{{19, 37}, 1}, {{19, 37}, 0}, {{3, 50, 20}, 1}, {{9, 5}, 1},
                                                        {{2, 3, 4}, 2}, {{7, 1}, 1}, {{1, 300}, 1}};
  for (Dtype dtype : {Dtype::float32, Dtype::float64}) {
    for (const auto& [shape, dim] : cases) {
      const Tensor a = mul(randn(shape, prng, 0, 1, dtype), exp(mul(randn(shape, prng, 0, 1, dtype), 4.0)));
      const std::vector<double> x = a.to_vector();
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
        if (d < dim) outer *= shape[static_cast<size_t>(d)];
        if (d > dim) inner *= shape[static_cast<size_t>(d)];
      }
      const int64_t size = shape[static_cast<size_t>(dim)];
      for (const bool is_mean : {false, true}) {
        const std::vector<double> got = (is_mean ? mean(a, dim) : sum(a, dim)).to_vector();
        const double scale = is_mean ? 1.0 / static_cast<double>(size) : 1.0;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            double want;
            if (dtype == Dtype::float32) {
              float acc = 0;
              for (int64_t k = 0; k < size; ++k) acc += static_cast<float>(x[static_cast<size_t>((o * size + k) * inner + i)]);
              want = static_cast<float>(acc * scale);
            } else {
              double acc = 0;
              for (int64_t k = 0; k < size; ++k) acc += x[static_cast<size_t>((o * size + k) * inner + i)];
              want = acc * scale;
            }
            ASSERT_EQ(got[static_cast<size_t>(o * inner + i)], want)
                << (is_mean ? "mean" : "sum") << " over dim " << dim << " of " << shape_str(shape) << " at " << o << ", " << i;
          }
        }
      }
    }
  }
}

TEST(Ops, SumTo) {
  Tensor x = t({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(equals(sum_to(x, {3}), {3}, {5, 7, 9}));
  EXPECT_TRUE(equals(sum_to(x, {2, 1}), {2, 1}, {6, 15}));
  EXPECT_TRUE(equals(sum_to(x, {}), {}, {21}));
  EXPECT_TRUE(sum_to(x, {2, 3}).is_same(x));
}

// sum_to's fast path (one sum over the middle dims) and its general loop both add each output's
// elements in the input's order, from +0: every output to the bit against that loop, written here.
TEST(Ops, SumToAddsInTheInputsOrder) {
  Prng prng(29);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{37, 19}, {19}},         {{37, 19}, {1, 19}},     {{37, 19}, {37, 1}},   {{37, 19}, {}},
      {{3, 50, 20}, {50, 1}},   {{3, 50, 20}, {3, 1, 20}}, {{4, 5, 6}, {1, 5, 1}}, {{4, 5, 6}, {6}},
      {{2, 1, 9, 3}, {1, 9, 1}}, {{1, 300}, {300}},      {{1, 300}, {1}},       {{5, 1, 4}, {5, 1, 1}},
      {{2, 3, 4, 5}, {3, 1, 5}}, {{0, 7}, {7}},          {{7, 0}, {7, 1}}};
  for (Dtype dtype : {Dtype::float32, Dtype::float64}) {
    for (const auto& [from, to] : cases) {
      const Tensor a = mul(randn(from, prng, 0, 1, dtype), exp(mul(randn(from, prng, 0, 1, dtype), 4.0)));
      const std::vector<double> x = a.to_vector();
      std::vector<double> want(static_cast<size_t>(shape_numel(to)), 0.0);
      std::vector<float> want32(want.size(), 0.0f);
      const std::vector<int64_t> own = detail::contiguous_strides(from);
      detail::for_each_broadcast(from, own, detail::broadcast_strides(to, from), [&](int64_t ix, int64_t iy, int64_t) {
        want32[static_cast<size_t>(iy)] += static_cast<float>(x[static_cast<size_t>(ix)]);
        want[static_cast<size_t>(iy)] += x[static_cast<size_t>(ix)];
      });
      const std::vector<double> got = sum_to(a, to).to_vector();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const double w = dtype == Dtype::float32 ? static_cast<double>(want32[i]) : want[i];
        ASSERT_EQ(got[i], w) << "sum_to " << shape_str(from) << " to " << shape_str(to) << " at " << i << " in "
                             << dtype_name(dtype);
      }
    }
  }
}

TEST(Ops, ScalarOpsAndUnaryMath) {
  Tensor x = t({3}, {-1, 0, 2});
  EXPECT_TRUE(equals(add(x, 1.5), {3}, {0.5, 1.5, 3.5}));
  EXPECT_TRUE(equals(mul(x, -2.0), {3}, {2, 0, -4}));
  EXPECT_TRUE(equals(neg(x), {3}, {1, 0, -2}));
  EXPECT_TRUE(equals(-x + 1.0, {3}, {2, 1, -1}));
  EXPECT_TRUE(equals(pow(x, 2.0), {3}, {1, 0, 4}));
  EXPECT_TRUE(equals(pow(x, 3.0), {3}, {-1, 0, 8}));
  EXPECT_TRUE(equals(pow(x, 0.0), {3}, {1, 1, 1}));
  EXPECT_TRUE(equals(pow(t({2}, {4, 9}), 0.5), {2}, {2, 3}));
  EXPECT_TRUE(equals(exp(x), {3}, {std::exp(-1.0), 1, std::exp(2.0)}));
  EXPECT_TRUE(equals(log(t({3}, {1, std::exp(1.0), 0.5})), {3}, {0, 1, std::log(0.5)}));
  EXPECT_TRUE(equals(sin(t({2}, {0, M_PI / 2})), {2}, {0, 1}));
  EXPECT_TRUE(equals(cos(t({2}, {0, M_PI})), {2}, {1, -1}));
  EXPECT_TRUE(equals(tanh(x), {3}, {std::tanh(-1.0), 0, std::tanh(2.0)}));
  EXPECT_TRUE(equals(sigmoid(x), {3}, {1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-2.0))}));
  EXPECT_TRUE(equals(relu(t({4}, {-2, -0.0, 0.5, 3})), {4}, {0, 0, 0.5, 3}));
  EXPECT_TRUE(equals(abs(t({4}, {-2, -0.0, 0.5, 3})), {4}, {2, 0, 0.5, 3}));
  EXPECT_TRUE(equals(sqrt(t({4}, {0, 0.25, 4, 2})), {4}, {0, 0.5, 2, std::sqrt(2.0)}));
  EXPECT_TRUE(std::isnan(sqrt(t({1}, {-1})).item()));
}

// torch.relu keeps NaN (clamp_min), and its backward (threshold_backward: 0 where the output is
// <= 0, else the gradient) passes the gradient where the output is NaN.
TEST(Ops, ReluKeepsNaNAndItsBackwardPassesTheGradientThere) {
  Tensor x = t({3}, {std::nan(""), -1, 2});
  x.set_requires_grad(true);
  Tensor y = relu(x);
  EXPECT_TRUE(std::isnan(y.to_vector()[0]));
  EXPECT_EQ(y.to_vector()[1], 0.0);
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{1, 0, 1}));
}

TEST(Ops, AbsAndSqrtBackward) {
  // abs: sign(x), and 0 at the kink (PyTorch's choice), which gradcheck cannot probe.
  Tensor x = t({4}, {-2, 0, 0.5, 3});
  x.set_requires_grad(true);
  sum(mul(abs(x), t({4}, {1, 2, 3, 4}))).backward();
  EXPECT_TRUE(equals(x.grad(), {4}, {-1, 0, 3, 4}));
  Tensor y = t({3}, {0.25, 4, 0});
  y.set_requires_grad(true);
  sum(sqrt(y)).backward();
  EXPECT_TRUE(equals(narrow(y.grad(), 0, 0, 2), {2}, {1, 0.25}));
  EXPECT_EQ(y.grad().at({2}), INFINITY);
}

TEST(Ops, Float32Compute) {
  Tensor a = from_values({2}, {1.5, 2}, Dtype::float32);
  Tensor r = mul(add(a, a), 2.0);
  EXPECT_EQ(r.dtype(), Dtype::float32);
  EXPECT_TRUE(equals(r, {2}, {6, 8}));
  EXPECT_EQ(matmul(a, a).dtype(), Dtype::float32);
  EXPECT_NEAR(matmul(a, a).item(), 6.25, 1e-6);
  EXPECT_NEAR(softmax(a, 0).at({1}), 1 / (1 + std::exp(-0.5)), 1e-6);
}

TEST(Ops, SumAndMean) {
  Tensor x = t({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(equals(sum(x), {}, {21}));
  EXPECT_TRUE(equals(mean(x), {}, {3.5}));
  EXPECT_TRUE(equals(sum(x, 0), {3}, {5, 7, 9}));
  EXPECT_TRUE(equals(sum(x, 1), {2}, {6, 15}));
  EXPECT_TRUE(equals(sum(x, -1, true), {2, 1}, {6, 15}));
  EXPECT_TRUE(equals(sum(x, 0, true), {1, 3}, {5, 7, 9}));
  EXPECT_TRUE(equals(mean(x, 0), {3}, {2.5, 3.5, 4.5}));
  EXPECT_TRUE(equals(mean(x, -1, true), {2, 1}, {2, 5}));
  Tensor y = reshape(arange(24), {2, 3, 4});
  // sum over dim 1 of y[i, :, k] = 3 * (12 i + k) + 12.
  EXPECT_TRUE(equals(sum(y, 1), {2, 4}, {12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_TRUE(equals(mean(y, -3), {3, 4}, {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_TRUE(equals(sum(zeros({0})), {}, {0}));
  EXPECT_TRUE(equals(sum(scalar_tensor(4.0)), {}, {4}));
}

TEST(Ops, SoftmaxAndLogSoftmax) {
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0);
  const double z = e1 + e2 + e3;
  Tensor x = t({2, 3}, {1, 2, 3, 3, 2, 1});
  EXPECT_TRUE(equals(softmax(x, 1), {2, 3}, {e1 / z, e2 / z, e3 / z, e3 / z, e2 / z, e1 / z}));
  EXPECT_TRUE(equals(log_softmax(x, -1), {2, 3},
                     {1 - std::log(z), 2 - std::log(z), 3 - std::log(z), 3 - std::log(z), 2 - std::log(z),
                      1 - std::log(z)}));
  // Over dim 0 each column is a pair: softmax(1, 3) and (2, 2).
  const double lo = 1 / (1 + std::exp(2.0));
  EXPECT_TRUE(equals(softmax(x, 0), {2, 3}, {lo, 0.5, 1 - lo, 1 - lo, 0.5, lo}));
  // Max-shifted, so huge logits neither overflow nor lose the answer.
  EXPECT_TRUE(equals(softmax(t({2}, {1000, 1000}), 0), {2}, {0.5, 0.5}));
  EXPECT_TRUE(equals(log_softmax(t({2}, {-1000, 0}), 0), {2}, {-1000, 0}));
}

TEST(Ops, TransposeReshapeSqueeze) {
  Tensor x = t({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(equals(transpose(x, 0, 1), {3, 2}, {1, 4, 2, 5, 3, 6}));
  Tensor y = reshape(arange(24), {2, 3, 4});
  Tensor yt = transpose(y, 0, 2);
  EXPECT_EQ(yt.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(yt.at({3, 1, 0}), y.at({0, 1, 3}));
  EXPECT_EQ(yt.at({2, 2, 1}), y.at({1, 2, 2}));
  EXPECT_TRUE(equals(transpose(x, -1, -1), {2, 3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(equals(reshape(x, {3, 2}), {3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(reshape(x, {-1}).shape(), (Shape{6}));
  EXPECT_EQ(reshape(x, {3, -1}).shape(), (Shape{3, 2}));
  EXPECT_EQ(reshape(zeros({0, 3}), {-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(squeeze(zeros({1, 2, 1, 3})).shape(), (Shape{2, 3}));
  EXPECT_EQ(squeeze(zeros({1, 2, 1, 3}), 2).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(squeeze(zeros({1, 2, 1, 3}), 1).shape(), (Shape{1, 2, 1, 3}));  // size 2: unchanged
  EXPECT_EQ(squeeze(zeros({1, 1})).shape(), (Shape{}));
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(unsqueeze(x, -1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(unsqueeze(x, 2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(unsqueeze(scalar_tensor(1.0), 0).shape(), (Shape{1}));
}

TEST(Ops, ViewsShareStorageCopiesDoNot) {
  Tensor x = t({2, 3}, {1, 2, 3, 4, 5, 6});
  for (const Tensor& view : {reshape(x, {3, 2}), squeeze(unsqueeze(x, 1)), unsqueeze(x, 0), detach(x)}) {
    EXPECT_EQ(view.storage(), x.storage());
  }
  Tensor c = clone(x);
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_TRUE(equals(c, {2, 3}, {1, 2, 3, 4, 5, 6}));
  c.data<double>()[0] = 100;
  EXPECT_EQ(x.at({0, 0}), 1.0);
  EXPECT_NE(transpose(x, 0, 1).storage(), x.storage());
}

TEST(Ops, Expand) {
  EXPECT_TRUE(equals(expand(t({3, 1}, {1, 2, 3}), {3, 2}), {3, 2}, {1, 1, 2, 2, 3, 3}));
  EXPECT_TRUE(equals(expand(t({2}, {1, 2}), {2, 2}), {2, 2}, {1, 2, 1, 2}));
  EXPECT_TRUE(equals(expand(t({2, 1}, {1, 2}), {2, -1, 3}), {2, 2, 3}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
  EXPECT_TRUE(equals(expand(scalar_tensor(7.0), {2}), {2}, {7, 7}));
}

TEST(Ops, StackAndCat) {
  Tensor a = t({2}, {1, 2});
  Tensor b = t({2}, {3, 4});
  EXPECT_TRUE(equals(stack({a, b}), {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(equals(stack({a, b}, 1), {2, 2}, {1, 3, 2, 4}));
  EXPECT_TRUE(equals(stack({a, b, a}, -1), {2, 3}, {1, 3, 1, 2, 4, 2}));
  Tensor m = t({2, 2}, {1, 2, 3, 4});
  Tensor n = t({2, 1}, {5, 6});
  EXPECT_TRUE(equals(cat({m, n}, 1), {2, 3}, {1, 2, 5, 3, 4, 6}));
  EXPECT_TRUE(equals(cat({m, transpose(n, 0, 1)}, 0), {3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(equals(cat({a, zeros({0}), b}), {4}, {1, 2, 3, 4}));
  EXPECT_TRUE(equals(cat({a}), {2}, {1, 2}));
}

TEST(Ops, SplitChunkNarrow) {
  Tensor x = arange(10.0, 15.0, 1.0);
  std::vector<Tensor> parts = split(x, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(equals(parts[0], {2}, {10, 11}));
  EXPECT_TRUE(equals(parts[1], {2}, {12, 13}));
  EXPECT_TRUE(equals(parts[2], {1}, {14}));
  parts = split(x, std::vector<int64_t>{1, 0, 4});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(equals(parts[1], {0}, {}));
  EXPECT_TRUE(equals(parts[2], {4}, {11, 12, 13, 14}));
  Tensor m = reshape(arange(8), {2, 4});
  parts = split(m, std::vector<int64_t>{3, 1}, -1);
  EXPECT_TRUE(equals(parts[0], {2, 3}, {0, 1, 2, 4, 5, 6}));
  EXPECT_TRUE(equals(parts[1], {2, 1}, {3, 7}));
  // chunk: ceil(n / chunks) per piece, so fewer pieces when they run out, as torch.chunk.
  EXPECT_EQ(chunk(arange(7), 3).size(), 3u);
  EXPECT_EQ(chunk(arange(7), 3)[2].shape(), (Shape{1}));
  EXPECT_EQ(chunk(arange(6), 4).size(), 3u);
  EXPECT_TRUE(equals(chunk(m, 2, 1)[1], {2, 2}, {2, 3, 6, 7}));
  EXPECT_TRUE(equals(narrow(m, 1, 1, 2), {2, 2}, {1, 2, 5, 6}));
  EXPECT_TRUE(equals(narrow(m, 0, 1, 1), {1, 4}, {4, 5, 6, 7}));
  EXPECT_TRUE(equals(narrow(m, -1, -2, 2), {2, 2}, {2, 3, 6, 7}));
  EXPECT_TRUE(equals(narrow(m, 1, 4, 0), {2, 0}, {}));
}

TEST(Ops, Matmul) {
  Tensor v = t({3}, {1, 2, 3});
  Tensor m = t({2, 3}, {1, 0, -1, 2, 1, 0});
  EXPECT_TRUE(equals(matmul(v, v), {}, {14}));
  EXPECT_TRUE(equals(matmul(m, v), {2}, {-2, 4}));
  EXPECT_TRUE(equals(matmul(t({2}, {1, 1}), m), {3}, {3, 1, -1}));
  EXPECT_TRUE(equals(matmul(m, transpose(m, 0, 1)), {2, 2}, {2, 2, 2, 5}));
  // Batched: each batch of a times the shared m^T.
  Tensor a = stack({m, mul(m, 2.0)});
  EXPECT_TRUE(equals(matmul(a, transpose(m, 0, 1)), {2, 2, 2}, {2, 2, 2, 5, 4, 4, 4, 10}));
  EXPECT_TRUE(equals(matmul(a, v), {2, 2}, {-2, 4, -4, 8}));
  // [2,1,2,3] x [3,3,1] -> [2,3,2,1]: batch dims broadcast.
  Tensor b = reshape(t({9}, {1, 0, 0, 0, 1, 0, 0, 0, 1}), {3, 3, 1});
  Tensor r = matmul(reshape(a, {2, 1, 2, 3}), b);
  EXPECT_EQ(r.shape(), (Shape{2, 3, 2, 1}));
  EXPECT_EQ(r.at({1, 2, 0, 0}), -2.0);  // a[1] column 2
  EXPECT_EQ(r.at({0, 1, 1, 0}), 1.0);   // a[0] column 1
  Tensor column = reshape(v, {3, 1});
  EXPECT_TRUE(equals(bmm(a, stack({column, mul(column, -1.0)})), {2, 2, 1}, {-2, 4, 4, -8}));
}

TEST(Ops, MultiDotAndLinear) {
  Tensor a = t({2, 2}, {1, 2, 3, 4});
  Tensor b = t({2, 2}, {0, 1, 1, 0});
  EXPECT_TRUE(equals(multi_dot({a, b, a}), {2, 2}, {5, 8, 13, 20}));
  EXPECT_TRUE(equals(multi_dot({t({2}, {1, 0}), a, t({2}, {0, 1})}), {}, {2}));
  EXPECT_TRUE(equals(multi_dot({t({2}, {1, 1}), a}), {2}, {4, 6}));
  Tensor x = t({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = t({2, 3}, {1, 0, 0, 0, 1, -1});
  Tensor bias = t({2}, {10, 20});
  EXPECT_TRUE(equals(linear(x, w), {2, 2}, {1, -1, 4, -1}));
  EXPECT_TRUE(equals(linear(x, w, bias), {2, 2}, {11, 19, 14, 19}));
  EXPECT_TRUE(equals(linear(reshape(x, {2, 1, 3}), w, bias), {2, 1, 2}, {11, 19, 14, 19}));
  EXPECT_TRUE(equals(linear(t({3}, {1, 2, 3}), w, bias), {2}, {11, 19}));
  EXPECT_TRUE(equals(linear(zeros({2, 0}), zeros({3, 0}), t({3}, {1, 2, 3})), {2, 3}, {1, 2, 3, 1, 2, 3}));
}

TEST(Ops, Losses) {
  EXPECT_TRUE(equals(mse_loss(t({2, 2}, {1, 2, 3, 4}), t({2, 2}, {1, 0, 3, 7})), {}, {13.0 / 4}));
  Tensor logp = t({2, 3}, {-1, -2, -3, -0.5, -1.5, -2.5});
  EXPECT_TRUE(equals(nll_loss(logp, t({2}, {2, 0})), {}, {(3 + 0.5) / 2}));
  // cross_entropy = nll_loss(log_softmax(x, 1)): for logits (0, ln 3) the probabilities are 1/4, 3/4.
  Tensor logits = t({2, 2}, {0, std::log(3.0), 0, std::log(3.0)});
  EXPECT_TRUE(equals(cross_entropy(logits, t({2}, {0, 1})), {}, {(std::log(4.0) + std::log(4.0 / 3)) / 2}));
}

TEST(Ops, Allclose) {
  Tensor a = t({2}, {1, 2});
  EXPECT_TRUE(allclose(a, t({2}, {1, 2 + 1e-13})));
  EXPECT_FALSE(allclose(a, t({2}, {1, 2.001})));
  EXPECT_TRUE(allclose(a, t({2}, {1, 2.001}), 1e-3));
  EXPECT_FALSE(allclose(a, t({1, 2}, {1, 2})));
  EXPECT_FALSE(allclose(a, t({2}, {1, NAN})));
  EXPECT_FALSE(allclose(a, Tensor()));
}

}  // namespace
}  // namespace dagsim
