// Code probes (probe.h): a hit counts once, reset() clears, snapshot() lists only probes hit and
// sorted, and the generated table holds every site of the build, sorted and without repeats.
#include "core/base/probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace dagsim::probe {
namespace {

// A real probe of the build (sim/sim_network.cc): a test names a site's probe, it marks none.
void hit_injected_failure() { DAGSIM_PROBE("sim.connection_failure_injected"); }
void hit_held_by_partition() { DAGSIM_PROBE("sim.held_by_partition"); }

TEST(Probe, TableHoldsTheBuildsSitesSortedAndUnique) {
  const std::vector<std::string> names = all_probe_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_NE(std::find(names.begin(), names.end(), "sim.connection_failure_injected"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "sim.held_by_partition"), names.end());
  for (const std::string& name : names) {
    EXPECT_NE(name.find('.'), std::string::npos) << name;
  }
}

TEST(Probe, HitsCountAndResetClears) {
  reset();
  EXPECT_TRUE(snapshot().empty());
  hit_injected_failure();
  hit_injected_failure();
  hit_held_by_partition();
  EXPECT_EQ(count("sim.connection_failure_injected"), 2u);
  EXPECT_EQ(count("sim.held_by_partition"), 1u);
  EXPECT_EQ(count("no.such_probe"), 0u);
  const std::map<std::string, uint64_t> hits = snapshot();
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits.begin()->first, "sim.connection_failure_injected");
  EXPECT_EQ(hits.at("sim.held_by_partition"), 1u);
  reset();
  EXPECT_TRUE(snapshot().empty());
  EXPECT_EQ(count("sim.connection_failure_injected"), 0u);
}

TEST(ProbeDeathTest, ANameNotInTheTableAsserts) {
  EXPECT_DEATH(detail::site_index("sim.not_a_probe_of_this_build", "here.cc", 7), "not in the build's probe table");
}

}  // namespace
}  // namespace dagsim::probe
