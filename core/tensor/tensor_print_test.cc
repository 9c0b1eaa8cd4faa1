// Tests of printing a Tensor (tensor_print.h): the shape, dtype and values as PyTorch prints them,
// one format for all values, and the summary that keeps a large tensor's output bounded.
#include "core/tensor/tensor_print.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "core/tensor/ops.h"

namespace dagsim {
namespace {

std::string printed(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

TEST(TensorPrint, ShapeDtypeAndValuesInOneFormat) {
  EXPECT_EQ(printed(from_values({3}, {1, 2, 3})), "tensor([1., 2., 3.], shape=[3], dtype=float64)");
  EXPECT_EQ(printed(from_values({2, 2}, {0.1, -2.5, 3, 4}, Dtype::float32)),
            "tensor([[ 0.1000, -2.5000],\n"
            "        [ 3.0000,  4.0000]], shape=[2, 2], dtype=float32)");
  // A wide range reads in scientific notation, as PyTorch's formatter chooses.
  EXPECT_EQ(printed(from_values({2}, {1e-5, 1.5})), "tensor([1.0000e-05, 1.5000e+00], shape=[2], dtype=float64)");
  EXPECT_EQ(printed(from_values({3}, {NAN, -INFINITY, 0.5})), "tensor([   nan,   -inf, 0.5000], shape=[3], dtype=float64)");
  EXPECT_EQ(printed(scalar_tensor(7.25)), "tensor(7.2500, shape=[], dtype=float64)");
  EXPECT_EQ(printed(zeros({0, 3})), "tensor([], shape=[0, 3], dtype=float64)");
  EXPECT_EQ(printed(Tensor()), "tensor(undefined)");
  Tensor leaf = from_values({1}, {2});
  leaf.set_requires_grad(true);
  EXPECT_EQ(printed(leaf), "tensor([2.], shape=[1], dtype=float64, requires_grad=True)");
  // Three dimensions: a blank line between the blocks, each indented under its bracket.
  EXPECT_EQ(printed(reshape(arange(int64_t{8}), {2, 2, 2})),
            "tensor([[[0., 1.],\n"
            "         [2., 3.]],\n"
            "\n"
            "        [[4., 5.],\n"
            "         [6., 7.]]], shape=[2, 2, 2], dtype=float64)");
}

// More than 1000 elements: each long dimension shows its first and last three entries, so the
// output of a 10^6-element tensor is a few lines.
TEST(TensorPrint, LargeTensorsAreSummarised) {
  EXPECT_EQ(printed(arange(int64_t{1000})).size(), std::string("tensor([").size() + 1000 * 6 - 2 + std::string("], shape=[1000], dtype=float64)").size());
  EXPECT_EQ(printed(arange(int64_t{1001})),
            "tensor([   0.,    1.,    2., ...,  998.,  999., 1000.], shape=[1001], dtype=float64)");
  const std::string big = printed(reshape(arange(int64_t{1'000'000}), {1000, 1000}));
  EXPECT_EQ(big,
            "tensor([[     0.,      1.,      2., ...,    997.,    998.,    999.],\n"
            "        [  1000.,   1001.,   1002., ...,   1997.,   1998.,   1999.],\n"
            "        [  2000.,   2001.,   2002., ...,   2997.,   2998.,   2999.],\n"
            "        ...,\n"
            "        [997000., 997001., 997002., ..., 997997., 997998., 997999.],\n"
            "        [998000., 998001., 998002., ..., 998997., 998998., 998999.],\n"
            "        [999000., 999001., 999002., ..., 999997., 999998., 999999.]], shape=[1000, 1000], dtype=float64)");
  TensorPrintOptions options;
  options.threshold = 4;
  options.edgeitems = 1;
  EXPECT_EQ(format_tensor(from_values({5}, {1, 2, 3, 4, 5}), options), "tensor([1., ..., 5.], shape=[5], dtype=float64)");
}

}  // namespace
}  // namespace dagsim
