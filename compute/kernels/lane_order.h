// Lane order: the one order in which dagsim adds up a long line (softmax's sum of exponentials),
// on every device and at every vector width, so a line's sum has the same bits everywhere.
//
// A line of n elements is dealt to kLanes = 32 lanes: element k goes to lane k % 32, and each lane
// adds its elements in order, from +0. The lanes are then folded in halves: lane j += lane j + w
// for w = 16, 8, 4, 2, 1; lane 0 is the sum.
//
// Why this order and not the plain left-to-right one:
// - The CPU vectorises it without changing a bit: 32 lanes are 4 AVX2 vectors of floats (2 of
//   AVX-512, 32 scalars on the scalar path), each lane still adding in order. A left-to-right sum
//   is one chain of dependent adds, 4 cycles each.
// - A GPU runs it as one warp per line: lane j of the warp is lane j here, and the halving fold is
//   the warp's xor-shuffle reduction (lane j gets lane j ^ w; addition commutes, so lane 0's bits
//   are the fold's).
// - It is fixed by the code, not by the machine: a wider vector does not change it.
//
// Lanes that receive no element stay +0, and adding +0 changes no sum that starts from +0, so a
// short line's sum is the same with or without them.
//
// Plain C++17 that nvcc also compiles (compute/kernels/line_kernels.h).
#pragma once

#include <cstdint>

#include "compute/kernels/pointwise.h"

namespace dagsim::lane_order {

inline constexpr int kLanes = 32;

// Folds lanes[0..kLanes) in halves into lanes[0] and returns it (the lanes are overwritten).
template <typename T>
DAGSIM_HOST_DEVICE T fold(T* lanes) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// The sum of f(k) for k < n in lane order, one element at a time: the reference the vector and
// warp forms must equal, and what one GPU thread runs for a line.
template <typename T, typename F>
DAGSIM_HOST_DEVICE T sum(int64_t n, const F& f) {
  T lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = T{0};
  for (int64_t start = 0; start < n; start += kLanes) {
    for (int j = 0; j < kLanes && start + j < n; ++j) lanes[j] += f(start + j);
  }
  return fold(lanes);
}

}  // namespace dagsim::lane_order
