// WarpWalk: the walk of a warp, line_kernels.h's OneThread shared by the 32 lanes of a warp, for
// the line ops that take a walk (softmax, log_softmax, layer_norm and their backwards; max and min
// along a dim). The cuda backend runs a warp per long line with it (cuda_op_kernels.cu).
//
// What it promises is OneThread's bits, to the bit:
// - Lane j takes the line's elements k = j mod 32 in order, as lane j of lane_order.h does.
// - `sum`: the xor-exchange fold gives lane 0 exactly lane_order::fold's sum (at step w, lane j < w
//   adds lane j + w), and lane 0's total is the one every lane returns.
// - `max` is exact in any order, up to the sign of a zero: where +0 and -0 tie for the max, lanes
//   may return either, and one thread returns the first. Its one user, softmax, only subtracts it,
//   where the sign cannot show (exp(+-0) is 1; log_softmax's +-0 - log(total) is the same number);
//   a functor that writes the max or divides by it would need arg_best instead.
// - `arg_best` finds the first best in any order.
// - `each` calls f(k) once for every k, on the lane that holds k.
//
// It is written against `Lanes`, how a lane reads another lane's value, so that the same code runs
// on a GPU (its warp shuffles) and on the host in an emulated warp whose lanes are fibers
// (warp_walk_test.cc checks it there against OneThread on every machine, a GPU or not). Lanes has
//   template <typename V> V exchange(V v, int w) const;  // lane (this lane ^ w)'s v
//   template <typename V> V from_lane0(V v) const;       // lane 0's v
// and every lane of the warp calls them together, the same number of times, as a GPU's shuffles
// require: only the folds exchange, and their trip counts are the same on every lane (the loops
// over a lane's own elements differ in length from lane to lane, but exchange nothing).
//
// Plain C++17 that nvcc also compiles.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "compute/kernels/lane_order.h"
#include "compute/kernels/line_kernels.h"
#include "compute/kernels/pointwise.h"

namespace dagsim {

template <typename Lanes>
struct WarpWalk {
  Lanes lanes;
  int lane;

  template <typename T, typename F> DAGSIM_HOST_DEVICE T max(int64_t n, const F& f) const {
    T best = -static_cast<T>(INFINITY);
    for (int64_t k = lane; k < n; k += lane_order::kLanes) {
      const T v = f(k);
      best = best < v ? v : best;
    }
    for (int w = lane_order::kLanes / 2; w >= 1; w /= 2) {
      const T other = lanes.exchange(best, w);
      best = best < other ? other : best;
    }
    return best;
  }

  template <typename T, typename F> DAGSIM_HOST_DEVICE T sum(int64_t n, const F& f) const {
    T acc{0};
    for (int64_t k = lane; k < n; k += lane_order::kLanes) acc += f(k);
    for (int w = lane_order::kLanes / 2; w >= 1; w /= 2) acc += lanes.exchange(acc, w);
    return lanes.from_lane0(acc);
  }

  // Each lane finds its own first best (its elements in order), then the lanes' candidates meet in
  // the xor-exchange fold: of two, the one that beats the other, else the earlier. That picks the
  // first NaN, else the first of the best values, whatever the order the candidates meet in, so
  // every lane returns one thread's answer. A lane with no element (n < 32) has index -1.
  template <typename T, typename F> DAGSIM_HOST_DEVICE int64_t arg_best(int64_t n, const F& f, bool is_max) const {
    int64_t best = -1;
    T value{};
    for (int64_t k = lane; k < n; k += lane_order::kLanes) {
      const T v = f(k);
      if (best < 0 || line::beats(v, value, is_max)) {
        best = k;
        value = v;
      }
    }
    for (int w = lane_order::kLanes / 2; w >= 1; w /= 2) {
      const int64_t other = lanes.exchange(best, w);
      const T other_value = lanes.exchange(value, w);
      if (other < 0) continue;
      const bool earlier = best < 0 || other < best;
      const bool other_wins = best < 0 || (earlier ? !line::beats(value, other_value, is_max)
                                                   : line::beats(other_value, value, is_max));
      if (other_wins) {
        best = other;
        value = other_value;
      }
    }
    return best < 0 ? 0 : best;
  }

  template <typename F> DAGSIM_HOST_DEVICE void each(int64_t n, const F& f) const {
    for (int64_t k = lane; k < n; k += lane_order::kLanes) f(k);
  }
};

// Whether line functor F's run<T> takes a walk of type Walk (the lane-order line ops and max and
// min do). nvcc compiles C++17 here, so no requires-expression.
template <typename F, typename T, typename Walk, typename = void>
struct walks_lines : std::false_type {};
template <typename F, typename T, typename Walk>
struct walks_lines<F, T, Walk,
                   std::void_t<decltype(std::declval<const F&>().template run<T>(
                       std::declval<const LineArgs&>(), int64_t{0}, std::declval<const Walk&>()))>>
    : std::true_type {};

}  // namespace dagsim
