// The host's row paths for take, index_add, softmax, log_softmax, layer_norm, their backwards, max
// and min (run_lines_on_host) against the line functors they stand in for, which are what a GPU
// runs: the same bits for the same arguments, with repeated rows, empty destinations, strided lines,
// ties, and sums whose order shows in the last bit.
#include "core/tensor/device_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/prng.h"
#include "compute/kernels/line_kernels.h"
#include "compute/kernels/vector_math.h"

namespace dagsim {
namespace {

// `rows` rows of `inner` values whose magnitudes span 2^-20 to 2^20, so a sum of several of them
// rounds differently when added in another order.
template <typename T>
std::vector<T> spread_values(Prng& prng, int64_t rows, int64_t inner) {
  std::vector<T> v(static_cast<size_t>(rows * inner));
  for (T& x : v) x = static_cast<T>(prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-20, 20))));
  return v;
}

// check(seed) for seeds 1 to `seeds` on every vector capability this CPU runs (vector_math.h).
template <typename Check>
void on_every_capability(uint64_t seeds, const Check& check) {
  const vec::Capability saved = vec::capability();
  for (const vec::Capability path : vec::supported_capabilities()) {
    vec::set_capability(path);
    for (uint64_t seed = 1; seed <= seeds; ++seed) check(seed);
  }
  vec::set_capability(saved);
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The same bits, except that any NaN equals any NaN: IEEE leaves a NaN's sign and payload to the
// operand order, which the compiler may swap (a * b for b * a) and an optimisation level changes.
template <typename T>
bool same_bits_or_both_nan(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  }
  return true;
}

template <typename T>
void check_take_and_index_add(uint64_t seed) {
  Prng prng(seed);
  const int64_t inner = prng.uniform_int(1, 37), sources = prng.uniform_int(1, 50), picks = prng.uniform_int(1, 120);
  const std::vector<T> x = spread_values<T>(prng, sources, inner);

  // take: `picks` rows of x, repeats likely.
  std::vector<int64_t> rows(static_cast<size_t>(picks));
  for (int64_t& r : rows) r = prng.uniform_int(0, sources - 1);
  LineArgs take;
  take.x = x.data();
  take.index = rows.data();
  take.lines = picks * inner;
  take.inner = inner;
  std::vector<T> by_rows(static_cast<size_t>(picks * inner)), by_lines(by_rows.size());
  take.y = by_rows.data();
  run_lines_on_host(LineOp::take, dtype_of<T>(), take);
  take.y = by_lines.data();
  run_lines_host<T>(LineOp::take, take);
  EXPECT_TRUE(same_bits(by_rows, by_lines)) << "take, seed " << seed;

  // index_add: the picked rows of g added back into `sources` rows, grouped by destination as
  // index_ops.cc groups them (sources in order within a destination; some destinations empty).
  const std::vector<T> g = spread_values<T>(prng, picks, inner);
  std::vector<int64_t> starts(static_cast<size_t>(sources) + 1, 0), order;
  for (int64_t d = 0; d < sources; ++d) {
    for (int64_t k = 0; k < picks; ++k) {
      if (rows[static_cast<size_t>(k)] == d) order.push_back(k);
    }
    starts[static_cast<size_t>(d) + 1] = static_cast<int64_t>(order.size());
  }
  LineArgs add;
  add.x = g.data();
  add.index = order.data();
  add.starts = starts.data();
  add.lines = sources * inner;
  add.inner = inner;
  std::vector<T> added_by_rows(static_cast<size_t>(sources * inner), T{7}), added_by_lines(added_by_rows.size(), T{9});
  add.y = added_by_rows.data();
  run_lines_on_host(LineOp::index_add, dtype_of<T>(), add);
  add.y = added_by_lines.data();
  run_lines_host<T>(LineOp::index_add, add);
  EXPECT_TRUE(same_bits(added_by_rows, added_by_lines)) << "index_add, seed " << seed;
}

TEST(LineKernels, TheHostsRowPathsGiveTheBitsOfTheFunctorsAGpuRuns) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    check_take_and_index_add<float>(seed);
    check_take_and_index_add<double>(seed);
  }
}

// The exponential the host's softmax path uses (SLEEF's, through vector_math.h), one element at a
// time: a one-element call pads a vector, and lanes are independent, so the bits are a full one's.
struct SleefExp {
  template <typename T> T operator()(T x) const {
    T y;
    vec::unary(vec::Unary::exp, &x, &y, 1);
    return y;
  }
};

// softmax, log_softmax and their backwards over lines of 1 to 300 elements (and one of 5,000),
// contiguous or strided, with values wide enough that the order of the sums shows, and signed
// zeros, infinities and NaN sprinkled in: the host's vector paths against the functors with the
// same exp.
template <typename T>
void check_softmax(uint64_t seed) {
  Prng prng(seed);
  const int64_t size = seed == 1 ? 5000 : prng.uniform_int(1, 300);
  const int64_t outer = prng.uniform_int(1, 4), inner = prng.uniform_int(0, 2) == 0 ? prng.uniform_int(2, 5) : 1;
  std::vector<T> x(static_cast<size_t>(outer * size * inner));
  for (T& v : x) v = static_cast<T>(prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-8, 6))));
  const T specials[] = {T{0}, -T{0}, static_cast<T>(-INFINITY), static_cast<T>(INFINITY), static_cast<T>(NAN), T{30}};
  const int64_t sprinkled = prng.uniform_int(0, 3);
  for (int64_t i = 0; i < sprinkled; ++i) {
    x[static_cast<size_t>(prng.uniform_int(0, static_cast<int64_t>(x.size()) - 1))] = specials[prng.uniform_int(0, 5)];
  }
  if (seed % 7 == 0) {
    // Every value negative but a -0 and a +0 in different lanes, so the vector max and the
    // functor's meet the zeros in different orders: the outputs must not care.
    // Both in the first line: elements 1 and min(32, size - 1) of it, whatever the stride.
    for (T& v : x) v = -std::fabs(v);
    x[std::min<size_t>(1, static_cast<size_t>(size - 1)) * static_cast<size_t>(inner)] = -T{0};
    x[std::min<size_t>(32, static_cast<size_t>(size - 1)) * static_cast<size_t>(inner)] = T{0};
  }
  LineArgs a;
  a.x = x.data();
  a.lines = outer * inner;
  a.size = size;
  a.inner = inner;
  for (const bool log_form : {false, true}) {
    std::vector<T> by_rows(x.size(), T{7}), by_lines(x.size(), T{9});
    a.y = by_rows.data();
    run_lines_on_host(log_form ? LineOp::log_softmax : LineOp::softmax, dtype_of<T>(), a);
    a.y = by_lines.data();
    const line::SoftmaxWith<SleefExp> functor{log_form, {}};
    for (int64_t l = 0; l < a.lines; ++l) functor.run<T>(a, l);
    EXPECT_TRUE(same_bits_or_both_nan(by_rows, by_lines)) << (log_form ? "log_softmax" : "softmax") << ", seed " << seed
                                              << ", size " << size << ", inner " << inner;

    // The backward, from that output and a gradient of spread magnitudes (so the sum's order shows).
    const std::vector<T> out = by_rows;
    const std::vector<T> g = spread_values<T>(prng, outer * inner, size);
    LineArgs b = a;
    b.x = out.data();
    b.g = g.data();
    std::vector<T> dx_rows(x.size(), T{7}), dx_lines(x.size(), T{9});
    b.y = dx_rows.data();
    run_lines_on_host(log_form ? LineOp::log_softmax_backward : LineOp::softmax_backward, dtype_of<T>(), b);
    b.y = dx_lines.data();
    const line::SoftmaxBackwardWith<SleefExp> backward{log_form, {}};
    for (int64_t l = 0; l < b.lines; ++l) backward.run<T>(b, l);
    EXPECT_TRUE(same_bits_or_both_nan(dx_rows, dx_lines)) << (log_form ? "log_softmax" : "softmax") << " backward, seed " << seed
                                              << ", size " << size << ", inner " << inner;
  }
}

TEST(LineKernels, SoftmaxsVectorPathGivesTheFunctorsBitsOnEveryCapability) {
  on_every_capability(150, [](uint64_t seed) {
    check_softmax<float>(seed);
    check_softmax<double>(seed);
  });
}

// layer_norm, its backward and its weight's gradient over rows of 1 to 300 elements (and one of
// 5,000), with and without a weight and a bias, values around an offset (so the variance about the
// mean shows the order of both sums), and now and then an infinity or a NaN: the host's vector paths
// against the functors, output and statistics.
template <typename T>
void check_layer_norm(uint64_t seed) {
  Prng prng(seed);
  const int64_t size = seed == 1 ? 5000 : prng.uniform_int(1, 300);
  const int64_t rows = prng.uniform_int(1, 4);
  const double offset = prng.uniform(-100, 100);
  std::vector<T> x = spread_values<T>(prng, rows, size);
  for (T& v : x) v = static_cast<T>(offset + static_cast<double>(v) * std::ldexp(1.0, -14));
  if (seed % 5 == 0) {
    const T specials[] = {static_cast<T>(INFINITY), static_cast<T>(NAN), T{0}, -T{0}};
    x[static_cast<size_t>(prng.uniform_int(0, static_cast<int64_t>(x.size()) - 1))] = specials[prng.uniform_int(0, 3)];
  }
  const std::vector<T> w = spread_values<T>(prng, 1, size), bias = spread_values<T>(prng, 1, size);
  const std::vector<T> g = spread_values<T>(prng, rows, size);
  const bool has_w = prng.uniform_int(0, 2) != 0, has_b = prng.uniform_int(0, 2) != 0;
  const std::string where = "seed " + std::to_string(seed) + ", size " + std::to_string(size) +
                            (has_w ? ", weight" : "") + (has_b ? ", bias" : "");

  LineArgs a;
  a.x = x.data();
  a.w = has_w ? w.data() : nullptr;
  a.b = has_b ? bias.data() : nullptr;
  a.lines = rows;
  a.size = size;
  a.scalar = 1e-5;
  std::vector<T> y_rows(x.size(), T{7}), y_lines(x.size(), T{9});
  std::vector<double> mean_rows(static_cast<size_t>(rows)), rstd_rows(mean_rows.size());
  std::vector<double> mean_lines(mean_rows.size(), 1), rstd_lines(mean_rows.size(), 1);
  a.y = y_rows.data();
  a.stat0 = mean_rows.data();
  a.stat1 = rstd_rows.data();
  run_lines_on_host(LineOp::layer_norm, dtype_of<T>(), a);
  a.y = y_lines.data();
  a.stat0 = mean_lines.data();
  a.stat1 = rstd_lines.data();
  for (int64_t l = 0; l < rows; ++l) line::LayerNorm{}.run<T>(a, l);
  EXPECT_TRUE(same_bits_or_both_nan(y_rows, y_lines)) << "layer_norm, " << where;
  EXPECT_TRUE(same_bits_or_both_nan(mean_rows, mean_lines)) << "layer_norm's mean, " << where;
  EXPECT_TRUE(same_bits_or_both_nan(rstd_rows, rstd_lines)) << "layer_norm's rstd, " << where;

  LineArgs b = a;
  b.g = g.data();
  std::vector<T> dx_rows(x.size(), T{7}), dx_lines(x.size(), T{9});
  b.y = dx_rows.data();
  run_lines_on_host(LineOp::layer_norm_backward, dtype_of<T>(), b);
  b.y = dx_lines.data();
  for (int64_t l = 0; l < rows; ++l) line::LayerNormBackward{}.run<T>(b, l);
  EXPECT_TRUE(same_bits_or_both_nan(dx_rows, dx_lines)) << "layer_norm backward, " << where;

  b.lines = size;  // the weight's gradient: one line per column, down the rows
  b.size = rows;
  b.inner = size;
  std::vector<T> dw_rows(static_cast<size_t>(size), T{7}), dw_lines(dw_rows.size(), T{9});
  b.y = dw_rows.data();
  run_lines_on_host(LineOp::layer_norm_weight, dtype_of<T>(), b);
  b.y = dw_lines.data();
  for (int64_t l = 0; l < size; ++l) line::LayerNormWeight{}.run<T>(b, l);
  EXPECT_TRUE(same_bits_or_both_nan(dw_rows, dw_lines)) << "layer_norm's weight gradient, " << where;

  // dx and dw in one call (y2): the host's single pass over the rows, and the functors run one op
  // after the other (run_separately, as a GPU's kernels run them), each give both the same bits,
  // also with dx written over g (which dw reads).
  LineArgs both = b;
  both.lines = rows;
  both.size = size;
  both.inner = 1;
  for (const bool one_pass : {true, false}) {
    for (const bool in_place : {false, true}) {
      std::vector<T> dx_both = in_place ? g : std::vector<T>(x.size(), T{5});
      std::vector<T> dw_both(dw_rows.size(), T{5});
      both.g = in_place ? dx_both.data() : g.data();
      both.y = dx_both.data();
      both.y2 = dw_both.data();
      if (one_pass) {
        run_lines_on_host(LineOp::layer_norm_backward, dtype_of<T>(), both);
      } else {
        run_lines_host<T>(LineOp::layer_norm_backward, both);
      }
      const std::string how = std::string(one_pass ? "one pass" : "separately") + (in_place ? ", over g" : "");
      EXPECT_TRUE(same_bits_or_both_nan(dx_both, dx_lines)) << "layer_norm backward with dw, " << how << ", " << where;
      EXPECT_TRUE(same_bits_or_both_nan(dw_both, dw_lines)) << "layer_norm's weight gradient with dx, " << how << ", "
                                                            << where;
    }
  }
}

TEST(LineKernels, LayerNormsVectorPathGivesTheFunctorsBitsOnEveryCapability) {
  on_every_capability(150, [](uint64_t seed) {
    check_layer_norm<float>(seed);
    check_layer_norm<double>(seed);
  });
}

// max and min along rows of 1 to 300 elements (and one of 5,000), drawn from a few levels so ties
// are common, with signed zeros, infinities and now and then a NaN or two: the host's vector path
// against the functor, value (to the bit: which zero) and position.
template <typename T>
void check_extremum(uint64_t seed) {
  Prng prng(seed);
  const int64_t size = seed == 1 ? 5000 : prng.uniform_int(1, 300);
  const int64_t rows = prng.uniform_int(1, 4);
  std::vector<T> x(static_cast<size_t>(rows * size));
  const T levels[] = {T{0}, -T{0}, T{1}, T{-1}, T{2}, static_cast<T>(0.5), static_cast<T>(-INFINITY),
                      static_cast<T>(INFINITY)};
  const int64_t top = prng.uniform_int(0, 2) == 0 ? 7 : 5;  // infinities in a third of the cases
  for (T& v : x) v = levels[prng.uniform_int(0, top)];
  const int64_t nans = seed % 4 == 0 ? prng.uniform_int(1, 2) : 0;
  for (int64_t i = 0; i < nans; ++i) x[static_cast<size_t>(prng.uniform_int(0, static_cast<int64_t>(x.size()) - 1))] = static_cast<T>(NAN);
  for (const bool is_max : {true, false}) {
    LineArgs a;
    a.x = x.data();
    a.lines = rows;
    a.size = size;
    std::vector<T> y_rows(static_cast<size_t>(rows), T{7}), y_lines(y_rows.size(), T{9});
    std::vector<double> at_rows(y_rows.size(), -1), at_lines(y_rows.size(), -2);
    a.y = y_rows.data();
    a.stat0 = at_rows.data();
    run_lines_on_host(is_max ? LineOp::max : LineOp::min, dtype_of<T>(), a);
    a.y = y_lines.data();
    a.stat0 = at_lines.data();
    for (int64_t l = 0; l < rows; ++l) line::Extremum{is_max}.run<T>(a, l);
    EXPECT_TRUE(same_bits_or_both_nan(y_rows, y_lines)) << (is_max ? "max" : "min") << ", seed " << seed;
    EXPECT_EQ(at_rows, at_lines) << (is_max ? "max" : "min") << "'s position, seed " << seed;
  }
}

TEST(LineKernels, MaxAndMinsVectorPathFindsTheFunctorsElementOnEveryCapability) {
  on_every_capability(200, [](uint64_t seed) {
    check_extremum<float>(seed);
    check_extremum<double>(seed);
  });
}

// Lane order is not left to right, and a change to it shows in the bits: 1 in lane 0 and 2^-24
// (half an ulp of 1) in lanes 1 to 31.
TEST(LaneOrder, SumsInThirtyTwoLanesFoldedInHalves) {
  std::vector<float> v(64, 0.0f);
  v[0] = 1.0f;
  for (int j = 1; j < 32; ++j) v[static_cast<size_t>(j)] = std::ldexp(1.0f, -24);
  float left_to_right = 0;
  for (float e : v) left_to_right += e;
  const float lanes = lane_order::sum<float>(64, [&](int64_t k) { return v[static_cast<size_t>(k)]; });
  EXPECT_EQ(left_to_right, 1.0f);  // every 2^-24 ties to even and is lost
  // The fold: w=16 gives lane 0 1 + 2^-24 -> 1 (tie to even) and lanes 1..15 2^-23 each; then
  // w=8, 4, 2, 1 add 2^-23, 2^-22, 2^-21 and 2^-20 to lane 0, all exact: 1 + 15 * 2^-23.
  EXPECT_EQ(lanes, 1.0f + 15.0f * std::ldexp(1.0f, -23));
}

}  // namespace
}  // namespace dagsim
