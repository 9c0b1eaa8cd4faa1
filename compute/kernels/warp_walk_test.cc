// Tests of WarpWalk (warp_walk.h), the walk the cuda backend's warp-per-line kernel runs, on the
// host, with or without a GPU: an emulated warp whose 32 lanes are fibers, exchanging values
// through a fiber barrier where a GPU's lanes shuffle, runs the same template the GPU runs. Its
// lanes are scheduled in a seeded random order (fibers::DeterministicScheduler), as a GPU promises
// no order among warps' lanes between shuffles, so the bits cannot hinge on the order the
// emulation happens to run lanes in. What it cannot show is the GPU's own part:
// the shuffle intrinsics, nvcc's code, the device's libm (CudaGpu.LaneOrderWarpsGiveTheOneThread-
// FunctorsBits runs the same checks on a GPU).
#include "compute/kernels/warp_walk.h"

#include <gtest/gtest.h>

#include <array>
#include <boost/fiber/barrier.hpp>
#include <boost/fiber/fiber.hpp>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/base/prng.h"
#include "core/fibers/scheduler.h"
#include "compute/kernels/line_kernels.h"
#include "compute/kernels/warp_walk_test_util.h"

namespace dagsim {
namespace {

// What the 32 lane fibers of one emulated warp share: a barrier every lane reaches at each
// exchange, and two sets of slots, used in turn, so a lane that has read its partner's value and
// gone on to the next exchange cannot overwrite a slot a slower lane has still to read (it cannot
// get two exchanges ahead: the next barrier waits for every lane).
struct WarpExchange {
  boost::fibers::barrier barrier{lane_order::kLanes};
  std::array<std::array<std::byte, 8>, lane_order::kLanes> slots[2];
  std::array<uint64_t, lane_order::kLanes> exchanges{};  // per lane, how many it has made
};

// warp_walk.h's Lanes for a lane fiber of the emulated warp.
struct FiberLanes {
  WarpExchange* warp;
  int lane;

  template <typename V> V exchange(V v, int w) const { return read_after_all_wrote(v, lane ^ w); }
  template <typename V> V from_lane0(V v) const { return read_after_all_wrote(v, 0); }

 private:
  template <typename V> V read_after_all_wrote(V v, int from) const {
    static_assert(std::is_trivially_copyable_v<V> && sizeof(V) <= 8, "a GPU shuffles words of up to 8 bytes");
    auto& slots = warp->slots[warp->exchanges[static_cast<size_t>(lane)]++ % 2];
    std::memcpy(slots[static_cast<size_t>(lane)].data(), &v, sizeof v);
    warp->barrier.wait();
    V theirs;
    std::memcpy(&theirs, slots[static_cast<size_t>(from)].data(), sizeof theirs);
    return theirs;
  }
};
using FiberWalk = WarpWalk<FiberLanes>;

// Line kernels as warp_walk_test_util.h's backend wants them: host memory, and the functors run by
// one thread per line or by one emulated warp that takes the lines in turn, as a warp of the cuda
// kernel does (all its lanes on one line at a time).
class EmulatedWarps {
 public:
  explicit EmulatedWarps(uint64_t seed) : scheduler_(fibers::DeterministicScheduler::for_this_thread()) {
    scheduler_.set_random_order(Prng(seed));
  }
  ~EmulatedWarps() { scheduler_.set_random_order(std::nullopt); }

  template <typename T> T* put(const std::vector<T>& values) {
    auto& bytes = owned_.emplace_back(std::make_unique<std::byte[]>(values.size() * sizeof(T) + 1));
    std::memcpy(bytes.get(), values.data(), values.size() * sizeof(T));
    return reinterpret_cast<T*>(bytes.get());
  }
  template <typename T> std::vector<T> get(const T* p, size_t n) { return std::vector<T>(p, p + n); }

  template <typename T> void run(LineOp op, const LineArgs& a, bool by_warps) {
    ++runs_;
    visit_line(op, [&](auto f) {
      if constexpr (walks_lines<decltype(f), T, FiberWalk>::value) {
        if (by_warps) return run_warp<T>(f, a);
      } else {
        ADD_FAILURE() << line_op_name(op) << " does not take a walk";
      }
      for (int64_t l = 0; l < a.lines; ++l) f.template run<T>(a, l);
    });
  }

  int runs() const { return runs_; }

 private:
  template <typename T, typename F> void run_warp(const F& f, const LineArgs& a) {
    WarpExchange warp;
    std::vector<boost::fibers::fiber> lanes;
    for (int j = 0; j < lane_order::kLanes; ++j) {
      lanes.emplace_back([&f, &a, &warp, j] {
        const FiberWalk walk{FiberLanes{&warp, j}, j};
        for (int64_t l = 0; l < a.lines; ++l) f.template run<T>(a, l, walk);
      });
    }
    // A lane that made fewer exchanges than the others (divergent lanes, which a GPU's shuffles do
    // not allow) would leave them waiting at the barrier for good: the scheduler then reports a
    // deadlock and aborts, rather than the test hanging.
    for (boost::fibers::fiber& lane : lanes) lane.join();
  }

  fibers::DeterministicScheduler& scheduler_;
  std::vector<std::unique_ptr<std::byte[]>> owned_;
  int runs_ = 0;
};

TEST(WarpWalk, AnEmulatedWarpGivesTheOneThreadFunctorsBitsInAnyLaneOrder) {
  for (const uint64_t seed : {1u, 2u}) {
    EmulatedWarps lines(seed);
    testing::expect_warps_match_threads(lines, /*short_lines=*/true);
    EXPECT_GT(lines.runs(), 0);
  }
}

// The walk's sum is lane_order::sum, to the bit, where the order shows: 1e8 in lane 0 and ones
// everywhere else. Added one at a time to 1e8, each one is lost (float's spacing there is 8); lane
// order adds each lane's ones first and folds the lanes in halves, so they count.
TEST(WarpWalk, AWarpsSumIsTheLaneOrderSum) {
  EmulatedWarps lines(3);
  for (const int64_t n : {33, 64, 100, 1000}) {
    std::vector<float> x(static_cast<size_t>(n), 1.0f);
    x[0] = 1e8f;
    float warp_sum[lane_order::kLanes] = {};
    WarpExchange warp;
    std::vector<boost::fibers::fiber> fibers;
    for (int j = 0; j < lane_order::kLanes; ++j) {
      fibers.emplace_back([&, j] {
        const FiberWalk walk{FiberLanes{&warp, j}, j};
        warp_sum[j] = walk.sum<float>(n, [&](int64_t k) { return x[static_cast<size_t>(k)]; });
      });
    }
    for (boost::fibers::fiber& f : fibers) f.join();
    const float expected = lane_order::sum<float>(n, [&](int64_t k) { return x[static_cast<size_t>(k)]; });
    for (const float s : warp_sum) EXPECT_EQ(s, expected) << "n = " << n;
  }
}

}  // namespace
}  // namespace dagsim
