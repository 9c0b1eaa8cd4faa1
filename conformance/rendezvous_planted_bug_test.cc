// The planted bug (issue 11 item 7): this binary links rendezvous_ops.cc compiled with
// DAGSIM_PLANTED_RANK_BUG, which assigns ranks in reverse node order at completion (still unique,
// still 0..n-1, so no assert in the engine objects). The invariant checker must catch it on the
// plain formation example, naming S2, the round and the nodes, on every seed.
#include <gtest/gtest.h>

#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"

namespace dagsim::conformance {
namespace {

TEST(RendezvousPlantedBug, TheCheckerCatchesRanksInReverseNodeOrder) {
  const scenarios::Scenario scenario =
      scenarios::load_scenario_file(std::string(DAGSIM_EXAMPLES) + "/rendezvous_formation.toml");
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    scenarios::RunOptions options;
    options.seed = seed;
    const scenarios::RunResult result = scenarios::run_scenario(scenario, options);
    EXPECT_FALSE(result.passed) << "seed " << seed;
    bool caught = false;
    for (const scenarios::CheckResult& check : result.checks) {
      if (check.name != "invariants") continue;
      EXPECT_FALSE(check.passed) << "seed " << seed;
      EXPECT_NE(check.detail.find("S2 (store life 0, round 0; worker1_0_0)"), std::string::npos) << check.detail;
      EXPECT_NE(check.detail.find("its place in node order is 0"), std::string::npos) << check.detail;
      caught = !check.passed;
    }
    EXPECT_TRUE(caught) << "seed " << seed << ": the invariants check did not run or passed";
  }
}

}  // namespace
}  // namespace dagsim::conformance
