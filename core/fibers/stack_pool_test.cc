// StackPool: guarded stacks up to the budget, slab stacks with a checked canary past it, and a
// process that stays far below vm.max_map_count with tens of thousands of live stacks.
#include "core/fibers/stack_pool.h"

#include <boost/fiber/fiber.hpp>
#include <boost/fiber/operations.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace dagsim::fibers {
namespace {

using boost::context::stack_context;

size_t mappings() {
  std::ifstream maps("/proc/self/maps");
  size_t lines = 0;
  for (std::string line; std::getline(maps, line);) ++lines;
  return lines;
}

TEST(StackPool, GuardedStacksUpToTheBudgetThenSlabStacksAllReused) {
  StackPool pool(64 * 1024, 256, /*protected_budget=*/3);
  std::vector<stack_context> stacks;
  for (int i = 0; i < 3 + 70; ++i) stacks.push_back(pool.allocate());
  EXPECT_EQ(pool.counts().protected_live, 3u);
  EXPECT_EQ(pool.counts().slab_live, 70u);
  EXPECT_EQ(pool.counts().slabs, 2u);  // 70 stacks need two slabs of 64
  // No two stacks overlap, and each one's every byte can be written.
  std::vector<std::pair<char*, char*>> ranges;
  for (const stack_context& s : stacks) ranges.emplace_back(static_cast<char*>(s.sp) - s.size, static_cast<char*>(s.sp));
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
  for (size_t i = 3; i < stacks.size(); ++i) {
    char* far = static_cast<char*>(stacks[i].sp) - stacks[i].size;
    std::memset(far + StackPool::kCanaryBytes, 0x11, stacks[i].size - StackPool::kCanaryBytes);
  }
  for (stack_context& s : stacks) pool.deallocate(s);
  EXPECT_EQ(pool.counts().protected_live, 0u);
  EXPECT_EQ(pool.counts().slab_live, 0u);
  // A second round maps nothing new.
  stacks.clear();
  for (int i = 0; i < 73; ++i) stacks.push_back(pool.allocate());
  EXPECT_EQ(pool.counts().slabs, 2u);
  EXPECT_EQ(pool.counts().protected_live, 3u);
  for (stack_context& s : stacks) pool.deallocate(s);
}

TEST(StackPool, AnOverflowedSlabStackAbortsWhenItComesBack) {
  StackPool pool(64 * 1024, 256, /*protected_budget=*/1);
  stack_context guarded = pool.allocate();
  stack_context slab = pool.allocate();
  ASSERT_EQ(pool.counts().slab_live, 1u);
  char* far = static_cast<char*>(slab.sp) - slab.size;
  EXPECT_DEATH(
      {
        far[StackPool::kCanaryBytes - 1] = 0;  // the deepest frame reached the canary
        pool.deallocate(slab);
      },
      "overflowed its 65536-byte stack");
  pool.deallocate(slab);  // intact in this process
  pool.deallocate(guarded);
}

TEST(StackPool, FibersRunOnSlabStacks) {
  StackPool pool(64 * 1024, 256, /*protected_budget=*/2);
  std::vector<boost::fibers::fiber> fibers;
  std::vector<int> sums(200);
  for (int i = 0; i < 200; ++i) {
    fibers.emplace_back(std::allocator_arg, PooledStack(pool), [&sums, i] {
      char frame[8 * 1024];  // a frame of some depth on the stack, kept alive across a yield
      std::memset(frame, i, sizeof frame);
      boost::this_fiber::yield();
      int sum = 0;
      for (char c : frame) sum += static_cast<unsigned char>(c);
      sums[i] = sum;
    });
  }
  EXPECT_EQ(pool.counts().protected_live, 2u);
  EXPECT_EQ(pool.counts().slab_live, 198u);
  for (boost::fibers::fiber& f : fibers) f.join();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sums[i], (i & 0xff) * 8 * 1024) << i;
  fibers.clear();
  EXPECT_EQ(pool.counts().slab_live, 0u);
}

// 40,000 live stacks, more than the 10,000-node simulation's fibers: guarded ones alone would take
// 80,000 mappings, past Linux's default cap of 65,530.
TEST(StackPool, FortyThousandLiveStacksTakeAFewHundredMappings) {
  const size_t before = mappings();
  StackPool pool(64 * 1024, 256, /*protected_budget=*/100);
  std::vector<stack_context> stacks;
  for (int i = 0; i < 40000; ++i) stacks.push_back(pool.allocate());
  const size_t during = mappings();
  EXPECT_LT(during - std::min(during, before), 1000u) << "before " << before << ", during " << during;
  for (stack_context& s : stacks) pool.deallocate(s);
}

TEST(StackPool, TheDefaultBudgetIsAQuarterOfTheMappingCap) {
  std::ifstream in("/proc/sys/vm/max_map_count");
  size_t cap = 0;
  if (!(in >> cap)) GTEST_SKIP() << "no /proc/sys/vm/max_map_count";
  EXPECT_EQ(StackPool::default_protected_budget(), std::max<size_t>(cap / 4, 16));
}

}  // namespace
}  // namespace dagsim::fibers
