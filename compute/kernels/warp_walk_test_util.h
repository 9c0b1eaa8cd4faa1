// Checks that a warp per line gives the bits of one thread per line (warp_walk.h), for every line
// op that takes a walk, written once for any place lines can run: a real GPU's kernels
// (cuda_gpu_test.cc) and the host's emulated warp (warp_walk_test.cc).
//
// A `Lines` backend provides:
//   template <typename T> T* put(const std::vector<T>&);          // a copy where the kernels read, kept
//                                                                  // until the backend is destroyed
//   template <typename T> std::vector<T> get(const T* p, size_t n);
//   template <typename T> void run(LineOp, const LineArgs&, bool by_warps);
//
// The inputs are built to make a warp and a thread disagree if they can: contiguous and strided
// lines, lines that do not fill the warp's last round (and, where a backend runs warps over short
// lines, lines shorter than a warp), ties of -0 and +0 in different lanes, NaN and infinities.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/prng.h"
#include "compute/kernels/line_kernels.h"

namespace dagsim::testing {

// How many elements differ in their bits, any NaN equal to any NaN: a NaN's sign and payload follow
// the operand order, which a compiler may pick differently in the warp and thread kernels.
template <typename T>
size_t bit_differences(const std::vector<T>& a, const std::vector<T>& b) {
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(T)) != 0) ++differ;
  }
  return differ;
}

// softmax, log_softmax and their backwards over [outer, size, inner], split at the middle dim.
// The first line is all negative but a -0 (lane 1) and a +0 (lane 0, second round): the warp's
// lanes then hold maxima of different signs, which must reach no output. The second line gets a
// NaN, the last a -inf.
template <typename T, typename Lines>
void expect_softmax_warps_match_threads(Lines& lines, int64_t outer, int64_t size, int64_t inner) {
  const int64_t n = outer * size * inner;
  Prng prng(static_cast<uint64_t>(n));
  std::vector<T> host(static_cast<size_t>(n));
  for (T& v : host) v = static_cast<T>(prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-8, 6))));
  const auto at = [&](int64_t line, int64_t k) { return static_cast<size_t>((line / inner) * size * inner + line % inner + k * inner); };
  for (int64_t k = 0; k < size; ++k) host[at(0, k)] = -std::fabs(host[at(0, k)]);
  if (size > 1) host[at(0, 1)] = -T{0};
  if (size > 32) host[at(0, 32)] = T{0};
  else if (size > 2) host[at(0, 2)] = T{0};  // a short line: the tie in lanes 1 and 2
  if (outer * inner > 1) host[at(1, size > 3 ? 3 : 0)] = static_cast<T>(NAN);
  host[at(outer * inner - 1, size - 1)] = static_cast<T>(-INFINITY);
  T* x = lines.put(host);
  T* by_warps = lines.put(host);
  T* by_threads = lines.put(host);
  T* g = lines.put(host);  // the backwards read x as the forward's output and `host` again as the gradient
  LineArgs a;
  a.x = x;
  a.g = g;
  a.lines = outer * inner;
  a.size = size;
  a.inner = inner;
  for (const LineOp op : {LineOp::softmax, LineOp::log_softmax, LineOp::softmax_backward, LineOp::log_softmax_backward}) {
    a.y = by_threads;
    lines.template run<T>(op, a, false);
    a.y = by_warps;
    lines.template run<T>(op, a, true);
    EXPECT_EQ(bit_differences(lines.get(by_warps, host.size()), lines.get(by_threads, host.size())), 0u)
        << line_op_name(op) << " over [" << outer << ", " << size << ", " << inner << "]";
  }
}

// layer_norm (output, mean and rstd) and its backward, with and without a weight and a bias, over
// values around an offset (so both sums' orders show), one row holding an infinity.
template <typename T, typename Lines>
void expect_layer_norm_warps_match_threads(Lines& lines, int64_t rows, int64_t size) {
  const size_t n = static_cast<size_t>(rows * size);
  Prng prng(n);
  std::vector<T> x(n), g(n), w(static_cast<size_t>(size)), b(w.size());
  for (T& v : x) v = static_cast<T>(42 + prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-20, 0))));
  for (std::vector<T>* values : {&g, &w, &b}) {
    for (T& v : *values) v = static_cast<T>(prng.uniform(-2, 2));
  }
  x[n - 1] = static_cast<T>(INFINITY);
  T* dx = lines.put(x);
  T* dg = lines.put(g);
  T* dw = lines.put(w);
  T* db = lines.put(b);
  T* y = lines.put(x);
  const std::vector<double> zeros(static_cast<size_t>(rows), 0.0);
  double* stats[2][2] = {{lines.put(zeros), lines.put(zeros)}, {lines.put(zeros), lines.put(zeros)}};  // [warp or thread][mean or rstd]
  for (const bool affine : {false, true}) {
    LineArgs a;
    a.x = dx;
    a.g = dg;
    a.w = affine ? dw : nullptr;
    a.b = affine ? db : nullptr;
    a.lines = rows;
    a.size = size;
    a.scalar = 1e-5;
    a.y = y;
    std::vector<T> outputs[2][2];  // [warp or thread][forward or backward]
    for (int by_warps = 0; by_warps < 2; ++by_warps) {
      a.stat0 = stats[by_warps][0];
      a.stat1 = stats[by_warps][1];
      for (const LineOp op : {LineOp::layer_norm, LineOp::layer_norm_backward}) {
        lines.template run<T>(op, a, by_warps == 1);
        outputs[by_warps][op == LineOp::layer_norm ? 0 : 1] = lines.get(y, n);
      }
    }
    const std::string where = " over [" + std::to_string(rows) + ", " + std::to_string(size) + "]" + (affine ? ", affine" : "");
    EXPECT_EQ(bit_differences(outputs[1][0], outputs[0][0]), 0u) << "layer_norm" << where;
    EXPECT_EQ(bit_differences(outputs[1][1], outputs[0][1]), 0u) << "layer_norm_backward" << where;
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(bit_differences(lines.get(stats[1][s], zeros.size()), lines.get(stats[0][s], zeros.size())), 0u)
          << (s == 0 ? "layer_norm's mean" : "layer_norm's rstd") << where;
    }
  }
}

// max and min along a dim (contiguous and strided), over values from a few levels so ties are
// common, a -0 before a +0 in one line and a NaN in another: the warp's candidates meet in another
// order than one thread's loop, and must pick the same element (value to the bit, and position).
template <typename T, typename Lines>
void expect_extremum_warps_match_threads(Lines& lines, int64_t outer, int64_t size, int64_t inner) {
  const size_t n = static_cast<size_t>(outer * size * inner);
  Prng prng(n + 1);
  const T levels[] = {T{0}, T{1}, T{-1}, T{2}, static_cast<T>(-INFINITY)};
  std::vector<T> host(n);
  for (T& v : host) v = levels[prng.uniform_int(0, 4)];
  // Line 0: all -1 but a -0 and a +0 after it, in different lanes (at 5 and 40; 1 and the last
  // element in a short line), so the max is the -0, not the +0.
  const size_t negative_zero = size > 5 ? 5 : 1;
  const size_t positive_zero = size > 40 ? 40 : static_cast<size_t>(size) - 1;
  for (size_t k = 0; k < static_cast<size_t>(size); ++k) {
    host[k * static_cast<size_t>(inner)] = k == positive_zero ? T{0} : T{-1};
  }
  if (negative_zero < positive_zero) host[negative_zero * static_cast<size_t>(inner)] = -T{0};
  host[n - 1] = static_cast<T>(NAN);
  T* x = lines.put(host);
  const std::vector<T> no_values(static_cast<size_t>(outer * inner), T{7});
  const std::vector<double> no_positions(no_values.size(), -1.0);
  T* y[2] = {lines.put(no_values), lines.put(no_values)};
  double* at[2] = {lines.put(no_positions), lines.put(no_positions)};
  for (const LineOp op : {LineOp::max, LineOp::min}) {
    LineArgs a;
    a.x = x;
    a.lines = outer * inner;
    a.size = size;
    a.inner = inner;
    for (int by_warps = 0; by_warps < 2; ++by_warps) {
      a.y = y[by_warps];
      a.stat0 = at[by_warps];
      lines.template run<T>(op, a, by_warps == 1);
    }
    const std::string where = std::string(line_op_name(op)) + " over [" + std::to_string(outer) + ", " +
                              std::to_string(size) + ", " + std::to_string(inner) + "]";
    EXPECT_EQ(bit_differences(lines.get(y[1], no_values.size()), lines.get(y[0], no_values.size())), 0u) << where;
    EXPECT_EQ(lines.get(at[1], no_values.size()), lines.get(at[0], no_values.size())) << where << ": positions";
  }
}

// Every check above, in both dtypes, over the shapes a GPU runs warps for (lines of 32 elements or
// more, cuda_op_kernels.h's kWarpLineMin) and, with `short_lines`, over lines shorter than a warp,
// where some lanes hold no element (a backend that can run a warp over them: the host's emulation).
template <typename Lines>
void expect_warps_match_threads(Lines& lines, bool short_lines) {
  using Shape = std::tuple<int64_t, int64_t, int64_t>;
  std::vector<Shape> softmax = {{64, 8192, 1}, {3, 5001, 1}, {4, 100, 3}, {7, 33, 1}, {5, 40, 2}};
  std::vector<std::pair<int64_t, int64_t>> layer_norm = {{512, 1024}, {3, 5001}, {7, 33}, {2, 100}};
  std::vector<Shape> extremum = {{64, 8192, 1}, {3, 77, 4}, {5, 41, 1}};
  if (short_lines) {
    for (const Shape& s : {Shape{3, 1, 1}, Shape{4, 5, 2}, Shape{2, 31, 1}, Shape{3, 32, 3}}) {
      softmax.push_back(s);
      extremum.push_back(s);
    }
    for (const auto& s : {std::pair<int64_t, int64_t>{2, 1}, {3, 7}, {2, 31}, {4, 32}}) layer_norm.push_back(s);
  }
  for (const auto& [outer, size, inner] : softmax) {
    expect_softmax_warps_match_threads<float>(lines, outer, size, inner);
    expect_softmax_warps_match_threads<double>(lines, outer, size, inner);
  }
  for (const auto& [rows, size] : layer_norm) {
    expect_layer_norm_warps_match_threads<float>(lines, rows, size);
    expect_layer_norm_warps_match_threads<double>(lines, rows, size);
  }
  for (const auto& [outer, size, inner] : extremum) {
    expect_extremum_warps_match_threads<float>(lines, outer, size, inner);
    expect_extremum_warps_match_threads<double>(lines, outer, size, inner);
  }
}

}  // namespace dagsim::testing
