// Tests of StridedShape (strided_shape.h), the index math of the cuda backend's elementwise,
// gather and sum kernels, on the host, with or without a GPU: for random index spaces with
// broadcast and transposed operands, the kernels' per-element bodies (what one GPU thread runs;
// for elementwise ops the flat or the strided kernel, chosen as the cuda launcher chooses) give
// the host kernel table's bits (host_kernels.h), which are the CPU ops' own. The host kernels step
// through their operands incrementally (op_util.h), not by division, so the two do not share a
// mistake. Not covered: a whole-tensor sum, which the cuda launcher gives to CUB (another order;
// the cuda tests compare it within a tolerance), and the launches themselves.
#include "compute/device/strided_shape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/prng.h"
#include "compute/device/host_kernels.h"
#include "compute/kernels/pointwise.h"

namespace dagsim::device {
namespace {

// An operand's strides in an index space: row-major over a random order of the dimensions (so
// some operands are transposed), a random subset of dimensions broadcast (stride 0), and a size-1
// dimension given an odd stride now and then (any stride is right for it). `extent` is how many
// elements its storage needs.
struct Operand {
  std::vector<int64_t> strides;
  int64_t extent = 1;
};
Operand random_operand(Prng& prng, const std::vector<int64_t>& shape) {
  const size_t ndim = shape.size();
  std::vector<size_t> order(ndim);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = ndim; i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(prng.uniform_int(0, static_cast<int64_t>(i) - 1))]);
  Operand o;
  o.strides.assign(ndim, 0);
  int64_t stride = 1;
  for (size_t k = ndim; k-- > 0;) {
    const size_t d = order[k];
    if (prng.uniform_int(0, 3) == 0) continue;  // stride 0
    o.strides[d] = shape[d] == 1 && prng.uniform_int(0, 2) == 0 ? 7 : stride;
    stride *= shape[d];
  }
  for (size_t d = 0; d < ndim; ++d) o.extent += (shape[d] - 1) * o.strides[d];
  return o;
}

std::vector<int64_t> random_shape(Prng& prng) {
  std::vector<int64_t> shape(static_cast<size_t>(prng.uniform_int(0, 5)));
  for (int64_t& s : shape) s = prng.uniform_int(1, 4);
  return shape;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t s : shape) n *= s;
  return n;
}

// Values of many magnitudes, so that a sum in another order, or an operand taken from the wrong
// place, shows in the bits.
std::vector<double> random_values(Prng& prng, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-30, 30)));
  return v;
}

const std::byte* bytes(const std::vector<double>& v) { return reinterpret_cast<const std::byte*>(v.data()); }
std::byte* bytes(std::vector<double>& v) { return reinterpret_cast<std::byte*>(v.data()); }

// sub and div: a swapped operand changes the value.
TEST(StridedShape, ElementwiseOverBroadcastAndTransposedOperandsGivesTheHostKernelsBits) {
  HostKernels host;
  Prng prng(11);
  int flat_runs = 0, strided_runs = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<int64_t> shape = random_shape(prng);
    const Operand a = random_operand(prng, shape);
    const Operand b = random_operand(prng, shape);
    const std::vector<double> va = random_values(prng, a.extent), vb = random_values(prng, b.extent);
    const int64_t n = numel(shape);
    for (const Pointwise op : {Pointwise::sub, Pointwise::div}) {
      std::vector<double> expected(static_cast<size_t>(n)), emulated(expected.size());
      host.binary(op, Dtype::float64, bytes(va), a.strides, bytes(vb), b.strides, bytes(expected), shape, 0.0);
      // As the cuda launcher: the flat kernel where both operands are row-major, else the offsets.
      const StridedShape index = strided(static_cast<int>(shape.size()), shape.data(), a.strides.data(), b.strides.data());
      const bool flat = row_major(index);
      ++(flat ? flat_runs : strided_runs);
      visit_binary(op, [&](auto f) {
        for (int64_t i = 0; i < n; ++i) {
          const Offsets o = flat ? Offsets{i, i} : offsets_of(index, i);
          ASSERT_TRUE(o.a >= 0 && o.a < a.extent && o.b >= 0 && o.b < b.extent) << "element " << i << " read outside its operand";
          emulated[static_cast<size_t>(i)] = static_cast<double>(f(va[static_cast<size_t>(o.a)], vb[static_cast<size_t>(o.b)], 0.0));
        }
      }, [] { FAIL() << "not a binary formula"; });
      ASSERT_EQ(emulated, expected) << pointwise_name(op) << ", trial " << trial << ", " << shape.size() << " dims";
    }
  }
  EXPECT_GT(flat_runs, 0);
  EXPECT_GT(strided_runs, 0);
}

TEST(StridedShape, AGatherOfAStridedOperandGivesTheHostKernelsBits) {
  HostKernels host;
  Prng prng(12);
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<int64_t> shape = random_shape(prng);
    const Operand x = random_operand(prng, shape);
    const std::vector<double> vx = random_values(prng, x.extent);
    std::vector<double> expected(static_cast<size_t>(numel(shape))), emulated(expected.size());
    host.gather(Dtype::float64, bytes(vx), x.strides, bytes(expected), shape);
    const StridedShape index = strided(static_cast<int>(shape.size()), shape.data(), x.strides.data(), nullptr);
    for (size_t i = 0; i < emulated.size(); ++i) {
      const int64_t at = offsets_of(index, static_cast<int64_t>(i)).a;
      ASSERT_TRUE(at >= 0 && at < x.extent) << "element " << i << " read outside its operand";
      emulated[i] = vx[static_cast<size_t>(at)];
    }
    ASSERT_EQ(emulated, expected) << "trial " << trial << ", " << shape.size() << " dims";
  }
}

// Sums over any subset of dimensions, scaled or not (a mean): the per-output kernel adds in the
// CPU's order, so the bits are the host's.
TEST(StridedShape, APartialSumAddsInTheCpusOrderAndGivesTheHostKernelsBits) {
  HostKernels host;
  Prng prng(13);
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<int64_t> x_shape = random_shape(prng);
    const std::vector<double> vx = random_values(prng, numel(x_shape));
    // The outputs run along a random subset of x's dimensions, row-major among themselves.
    std::vector<bool> keep(x_shape.size());
    for (size_t d = 0; d < keep.size(); ++d) keep[d] = prng.uniform_int(0, 1) == 1;
    std::vector<int64_t> out_strides(x_shape.size(), 0);
    int64_t out_numel = 1;
    for (size_t d = x_shape.size(); d-- > 0;) {
      if (!keep[d]) continue;
      out_strides[d] = out_numel;
      out_numel *= x_shape[d];
    }
    for (const double scale : {1.0, 1.0 / 3.0}) {
      std::vector<double> expected(static_cast<size_t>(out_numel)), emulated(expected.size());
      host.reduce_sum(Dtype::float64, bytes(vx), x_shape, bytes(expected), out_numel, out_strides, scale);
      StridedShape kept, reduced;
      const int64_t reduced_numel =
          split_for_sum(static_cast<int>(x_shape.size()), x_shape.data(), out_strides.data(), kept, reduced);
      ASSERT_EQ(reduced_numel * out_numel, numel(x_shape));
      for (int64_t j = 0; j < out_numel; ++j) {
        emulated[static_cast<size_t>(j)] = reduced_sum(vx.data(), kept, reduced, reduced_numel, scale, j);
      }
      ASSERT_EQ(emulated, expected) << "trial " << trial << ", " << x_shape.size() << " dims, scale " << scale;
    }
  }
}

// A dimension of one element may have any stride: row_major looks past it, and not past a
// broadcast or transposed operand.
TEST(StridedShape, RowMajorIsExactlyTheOperandsInIndexOrder) {
  const int64_t shape[] = {2, 1, 3};
  EXPECT_TRUE(row_major(strided(3, shape, std::vector<int64_t>{3, 99, 1}.data(), std::vector<int64_t>{3, 3, 1}.data())));
  EXPECT_FALSE(row_major(strided(3, shape, std::vector<int64_t>{3, 3, 1}.data(), std::vector<int64_t>{0, 3, 1}.data())));
  EXPECT_TRUE(row_major(strided(3, shape, std::vector<int64_t>{3, 3, 1}.data(), std::vector<int64_t>{0, 3, 1}.data()),
                        /*with_b=*/false));
  EXPECT_FALSE(row_major(strided(3, shape, std::vector<int64_t>{1, 2, 2}.data(), nullptr), /*with_b=*/false));
}

TEST(StridedShape, MoreDimensionsThanTheKernelsTakeAreRefusedNamingTheRank) {
  const std::vector<int64_t> ones(kMaxDims + 1, 1);
  for (int which = 0; which < 2; ++which) {
    try {
      StridedShape kept, reduced;
      if (which == 0) strided(kMaxDims + 1, ones.data(), ones.data(), nullptr);
      else split_for_sum(kMaxDims + 1, ones.data(), ones.data(), kept, reduced);
      ADD_FAILURE() << "a tensor of " << kMaxDims + 1 << " dimensions was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("a tensor of 17 dimensions: the cuda kernels take at most 16"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace dagsim::device
