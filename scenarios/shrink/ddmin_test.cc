// ddmin (ddmin.h) on synthetic predicates: it finds the one or two elements a failure needs, is
// 1-minimal, tries each subset once, never the full set, and stops when asked.
#include "scenarios/shrink/ddmin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace dagsim::shrink {
namespace {

bool contains(const std::vector<size_t>& s, size_t x) { return std::find(s.begin(), s.end(), x) != s.end(); }

TEST(Ddmin, FindsTheOneElementThatMatters) {
  size_t tests = 0;
  const std::vector<size_t> kept = ddmin(
      41, [&](const std::vector<size_t>& s) { ++tests; return contains(s, 29); }, [] { return false; });
  EXPECT_EQ(kept, std::vector<size_t>({29}));
  EXPECT_LE(tests, 20u);  // about 2 log2(41), far below 41
}

TEST(Ddmin, FindsAPairAndIsOneMinimal) {
  auto holds = [](const std::vector<size_t>& s) { return contains(s, 3) && contains(s, 17); };
  std::set<std::vector<size_t>> seen;
  const std::vector<size_t> kept = ddmin(
      20,
      [&](const std::vector<size_t>& s) {
        EXPECT_TRUE(seen.insert(s).second) << "a subset tested twice";
        EXPECT_LT(s.size(), 20u) << "the full set tested";
        EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
        return holds(s);
      },
      [] { return false; });
  EXPECT_EQ(kept, std::vector<size_t>({3, 17}));
  for (size_t i = 0; i < kept.size(); ++i) {
    std::vector<size_t> fewer = kept;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    EXPECT_FALSE(holds(fewer));
  }
}

TEST(Ddmin, EmptyWhenNothingIsNeeded) {
  EXPECT_TRUE(ddmin(7, [](const std::vector<size_t>&) { return true; }, [] { return false; }).empty());
}

TEST(Ddmin, KeepsEverythingWhenEverythingIsNeeded) {
  const std::vector<size_t> kept = ddmin(5, [](const std::vector<size_t>& s) { return s.size() == 5; }, [] { return false; });
  EXPECT_EQ(kept.size(), 5u);
}

TEST(Ddmin, StopsWhenAsked) {
  size_t tests = 0;
  const std::vector<size_t> kept = ddmin(
      64, [&](const std::vector<size_t>& s) { ++tests; return contains(s, 5); }, [&] { return tests >= 3; });
  EXPECT_EQ(tests, 3u);
  EXPECT_TRUE(contains(kept, 5));
}

TEST(Ddmin, SameAnswerEveryTime) {
  auto run = [] {
    std::vector<std::vector<size_t>> order;
    ddmin(30, [&](const std::vector<size_t>& s) { order.push_back(s); return contains(s, 7) && contains(s, 22); },
          [] { return false; });
    return order;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace dagsim::shrink
