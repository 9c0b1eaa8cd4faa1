// BUGGIFY (buggify.h): off without a context, seeded per point, each point's stream its own.
#include "core/base/buggify.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dagsim::buggify {
namespace {

// Real points of the build (a test names a point, it marks none).
bool reach_watch_late() { return DAGSIM_BUGGIFY("store.watch_reply_late"); }
bool reach_reply_delayed() { return DAGSIM_BUGGIFY("store.reply_delayed"); }

Settings always(std::vector<std::string> points = {}) {
  Settings s;
  s.points = std::move(points);
  s.enable_probability = 1;
  s.fire_probability = 0.5;
  return s;
}

TEST(Buggify, EveryPointIsFalseWithoutAContext) {
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(reach_watch_late());
    ASSERT_FALSE(reach_reply_delayed());
  }
}

TEST(Buggify, TheTableListsTheBuildsPointsSorted) {
  const std::vector<std::string> names = all_point_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "store.watch_reply_late"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "rendezvous.cas_answered_lost"), names.end());
}

// The fires of a point for a seed, reaching it n times.
std::vector<bool> fires(uint64_t seed, const Settings& settings, int n, bool also_reach_the_other) {
  Context context(seed, settings);
  ScopedContext scope(context);
  std::vector<bool> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(reach_watch_late());
    if (also_reach_the_other) reach_reply_delayed();
  }
  return out;
}

TEST(Buggify, TheSameSeedFiresTheSameAndAnotherSeedDiffers) {
  const std::vector<bool> a = fires(7, always(), 200, false);
  EXPECT_EQ(a, fires(7, always(), 200, false));
  EXPECT_NE(a, fires(8, always(), 200, false));
  const long fired = std::count(a.begin(), a.end(), true);
  EXPECT_GT(fired, 60);
  EXPECT_LT(fired, 140);
}

TEST(Buggify, APointsStreamIsItsOwn) {
  // Reaching another point in between, or enabling fewer points, leaves this point's fires as they were.
  const std::vector<bool> alone = fires(11, always(), 200, false);
  EXPECT_EQ(alone, fires(11, always(), 200, true));
  EXPECT_EQ(alone, fires(11, always({"store.watch_reply_late"}), 200, true));
}

TEST(Buggify, OnlyCandidatePointsAreEnabledAndTheContextCounts) {
  Settings settings = always({"store.reply_delayed"});
  Context context(3, settings);
  EXPECT_EQ(context.enabled_points(), std::vector<std::string>{"store.reply_delayed"});
  {
    ScopedContext scope(context);
    for (int i = 0; i < 100; ++i) EXPECT_FALSE(reach_watch_late());
    for (int i = 0; i < 100; ++i) reach_reply_delayed();
  }
  EXPECT_FALSE(reach_reply_delayed());  // the scope ended: off again
  EXPECT_EQ(context.fired("store.watch_reply_late"), 0u);
  EXPECT_GT(context.fired("store.reply_delayed"), 20u);
  EXPECT_EQ(context.fired().size(), 1u);
}

TEST(Buggify, TheSwarmsChoiceReplacesTheEnableDraw) {
  Settings settings = always();
  settings.enable_probability = 0;
  settings.enabled = std::vector<std::string>{"store.watch_reply_late"};
  Context context(5, settings);
  EXPECT_EQ(context.enabled_points(), std::vector<std::string>{"store.watch_reply_late"});
}

TEST(Buggify, EnableProbabilityZeroEnablesNothing) {
  Settings settings = always();
  settings.enable_probability = 0;
  Context context(5, settings);
  EXPECT_TRUE(context.enabled_points().empty());
}

}  // namespace
}  // namespace dagsim::buggify
