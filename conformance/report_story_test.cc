// The reports tell the story a PyTorch user looks for first, from the examples' own runs: the
// elastic report's loss against local training (text and JSON, under the program workload's names),
// its late join, its stalls and what ended them, a partition's groups; the rendezvous report's
// rounds with their members and ranks, and who left each and why.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"
#include "conformance/examples.h"

namespace dagsim {
namespace {

using scenarios::RunResult;

std::string example(const std::string& name) { return testing::example_text(name); }

RunResult run(const std::string& text, const std::string& name, uint64_t seed = 42) {
  scenarios::RunOptions options;
  options.seed = seed;
  return scenarios::run_scenario(scenarios::parse_scenario(text, name), options);
}

std::string timeline_of(const RunResult& r) {
  std::string out;
  if (!r.workload.contains("timeline")) return out;
  for (const nlohmann::json& line : r.workload.at("timeline")) out += line.get<std::string>() + "\n";
  return out;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(ReportStory, TheElasticReportShowsTheLossAgainstLocalTrainingTheLateJoinAndTheStall) {
  const RunResult r = run(example("elastic_training.toml"), "elastic_training.toml");
  ASSERT_TRUE(r.passed);
  const std::string story = timeline_of(r);
  // The loss, first and last step, beside local training's (they are equal: params_match_local).
  EXPECT_TRUE(has(story, "loss ") && has(story, " at step 1, ") && has(story, " at step 300; local training ") &&
              has(story, "; largest difference 0"))
      << story;
  // worker8 joins at 5 s (its [[elastic.rendezvous.actions]] join), before round 2 takes it in.
  EXPECT_TRUE(has(story, "at 5.000 s worker8's agent joined late")) << story;
  EXPECT_TRUE(has(story, "worker6 (life 2)'s agent started again with its node")) << story;
  // The crash of worker6 stalls training until the group fails and round 3 forms.
  EXPECT_TRUE(has(story, "stall: no step committed from ") && has(story, ", formed at 9.")) << story;
  EXPECT_TRUE(has(story, "steps/s from the first commit to the last")) << story;
  // JSON: one loss per step, under the names the program and model workloads use.
  ASSERT_TRUE(r.workload.contains("losses") && r.workload.contains("local_losses"));
  EXPECT_EQ(r.workload["losses"].size(), 300u);
  EXPECT_EQ(r.workload["losses"], r.workload["local_losses"]);
  for (const nlohmann::json& loss : r.workload["losses"]) EXPECT_TRUE(loss.is_number() && loss.get<double>() > 0) << loss;
  // The job learns: its targets are a teacher network's, so the loss at step 300 is less than half
  // its loss at step 1 (with noise for targets it stayed where it began).
  ASSERT_EQ(r.workload["losses"].size(), 300u);
  EXPECT_LT(r.workload["losses"][299].get<double>(), 0.5 * r.workload["losses"][0].get<double>())
      << r.workload["losses"][0] << " at step 1, " << r.workload["losses"][299] << " at step 300";
  // The rounds under the rendezvous workload's names, with who left each and why: worker3's kill
  // ends its round 0, worker6's crash its round 2; the last round ends with everyone succeeded.
  std::string left;
  for (const nlohmann::json& round : r.workload["rendezvous"]) {
    EXPECT_TRUE(round.contains("world_size") && round.contains("completed_ms")) << round.dump();
    EXPECT_EQ(round["members"].size(), round["world_size"].get<size_t>());
    for (const nlohmann::json& gone : round.at("removed")) {
      left += "round " + std::to_string(round["round"].get<uint64_t>()) + ": " + gone["node"].get<std::string>() + " " +
              gone["why"].get<std::string>() + "; ";
    }
  }
  EXPECT_EQ(left, "round 0: worker3 killed; round 2: worker6 crashed; ");
}

TEST(ReportStory, AFaultLineNamesAPartitionsGroups) {
  std::string text = example("elastic_training.toml");
  text += "\n[[faults]]\nat_ms = 11000\nkind = \"partition\"\ngroups = [[\"worker1\", \"worker2\"], [\"worker4\", \"worker5\"]]\n"
          "heal_after_ms = 300\n";
  const RunResult r = run(text, "elastic_partition.toml");
  const std::string story = timeline_of(r);
  EXPECT_TRUE(has(story, "fault at 11.000 s: partition {worker1, worker2} | {worker4, worker5}")) << story;
  EXPECT_TRUE(has(story, ": heal")) << story;
}

TEST(ReportStory, TheRendezvousReportShowsEachRoundsMembersRanksAndWhoLeftWhy) {
  const RunResult r = run(example("rendezvous_dead_participant.toml"), "rendezvous_dead_participant.toml");
  ASSERT_TRUE(r.passed);
  const std::string story = timeline_of(r);
  EXPECT_TRUE(has(story, "round 0 formed at 0.009 s: 4 nodes (worker1 rank 0, worker2 rank 1, worker3 rank 2, worker4 rank 3)"))
      << story;
  EXPECT_TRUE(has(story, "worker4 left round 0: its heartbeat expired (last stamped ")) << story;
  EXPECT_TRUE(has(story, "round 1 formed at ") && has(story, ": 3 nodes (worker1 rank 0, worker2 rank 1, worker3 rank 2)"))
      << story;
  EXPECT_TRUE(has(story, "left round 0: its agent ended (exit)")) << story;
}

// The seed example's work takes milliseconds; the run then drains until its context releases
// have settled, which the simulator, like TCP, ends as soon as every node is settled (within a
// millisecond or so of virtual time here) rather than after the workload's whole drain time (6 s).
// The report says both times, so a user does not read the drain as the work.
TEST(ReportStory, TheWorkloadsOwnEndIsReportedApartFromTheDrain) {
  const RunResult r = run(example("seed_example.toml"), "seed_example.toml");
  ASSERT_TRUE(r.passed);
  ASSERT_TRUE(r.workload_end_ms.has_value());
  EXPECT_LT(*r.workload_end_ms, 1000.0);
  EXPECT_GE(r.virtual_time_ms, *r.workload_end_ms);
  EXPECT_LT(r.virtual_time_ms - *r.workload_end_ms, 1000.0) << "the drain did not end once every node had settled";
}

}  // namespace
}  // namespace dagsim
