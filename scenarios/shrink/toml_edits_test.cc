// The candidate generators (toml_edits.h) and the materialising of drawn faults
// (fault_materialise.h): each edit is pure, in a fixed order, and its text parses back.
#include "scenarios/shrink/toml_edits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/base/error.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/shrink/fault_materialise.h"

namespace dagsim::shrink {
namespace {

const char* kScenario = R"(name = "t"
max_virtual_time_ms = 60000
program = [ { out = "a", call = "add", args = ["x", "y"] }, { out = "b", call = "sum", args = ["a"] } ]

[cluster]
nodes = 4

[network]
latency = { dist = "uniform", min_us = 50, max_us = 500 }
rate = 0.25

[[faults]]
at_ms = 3505.361735
kind = "kill"
node = "worker1"
restart_at_ms = 4705.361735

[[faults]]
at_ms = 100
kind = "partition"
groups = [["worker0"], ["worker1", "worker2"]]
heal_at_ms = 300

[[checks]]
kind = "x"
)";

TEST(TomlEdits, TextRoundTripsExactly) {
  const toml::table root = parse_toml(kScenario, "t.toml");
  const std::string text = to_text(root);
  EXPECT_EQ(to_text(parse_toml(text, "again")), text);
  // A drawn fault's time survives the trip to the nanosecond.
  EXPECT_EQ(number_at(parse_toml(text, "again"), {{"faults", 0, false}, {"", 0, true}, {"at_ms", 0, false}}), 3505.361735);
  EXPECT_NE(text.find("[[faults]]"), std::string::npos);
  EXPECT_NE(text.find("latency = {"), std::string::npos);
}

TEST(TomlEdits, EnumeratesInAFixedOrder) {
  const toml::table root = parse_toml(kScenario, "t.toml");
  std::vector<std::string> arrays;
  for (const TomlPath& p : arrays_in(root)) arrays.push_back(path_text(p));
  EXPECT_EQ(arrays, std::vector<std::string>({"checks", "faults", "faults[1].groups", "faults[1].groups[0]",
                                              "faults[1].groups[1]", "program", "program[0].args", "program[1].args"}));
  std::vector<std::string> numbers;
  for (const TomlPath& p : numbers_in(root)) numbers.push_back(path_text(p));
  EXPECT_EQ(numbers, std::vector<std::string>({"cluster.nodes", "faults[0].at_ms", "faults[0].restart_at_ms",
                                               "faults[1].at_ms", "faults[1].heal_at_ms", "max_virtual_time_ms",
                                               "network.latency.max_us", "network.latency.min_us", "network.rate"}));
}

TEST(TomlEdits, KeepsElementsAndKeysWithoutTouchingTheInput) {
  const toml::table root = parse_toml(kScenario, "t.toml");
  const toml::table one = keep_elements(root, {{"faults", 0, false}}, {1});
  ASSERT_EQ(one["faults"].as_array()->size(), 1u);
  EXPECT_EQ(one["faults"][0]["kind"].value<std::string>(), "partition");
  EXPECT_EQ(root["faults"].as_array()->size(), 2u);
  const std::vector<std::string> keys = keys_of(root, {{"network", 0, false}});
  EXPECT_EQ(keys, std::vector<std::string>({"latency", "rate"}));
  const toml::table no_rate = keep_keys(root, {{"network", 0, false}}, keys, {0});
  EXPECT_EQ(no_rate["network"]["rate"].node(), nullptr);
  EXPECT_NE(root["network"]["rate"].node(), nullptr);
}

TEST(TomlEdits, NumbersGetSmallerAndStayIntegersWhenWhole) {
  EXPECT_EQ(smaller_numbers(60000, true), std::vector<double>({0, 1, 30000, 45000}));
  EXPECT_EQ(smaller_numbers(4, true), std::vector<double>({0, 1, 2, 3}));
  EXPECT_EQ(smaller_numbers(0.25, false), std::vector<double>({0, 0.125, 0.1875}));
  EXPECT_EQ(smaller_numbers(2.5, false), std::vector<double>({0, 1, 2, 1.25, 1.875}));
  EXPECT_TRUE(smaller_numbers(0, true).empty());
  EXPECT_EQ(smaller_numbers(0.001, false), std::vector<double>({0}));
  const toml::table root = parse_toml(kScenario, "t.toml");
  const toml::table half = with_number(root, {{"max_virtual_time_ms", 0, false}}, 30000);
  EXPECT_TRUE(half["max_virtual_time_ms"].is_integer());
  const toml::table fraction = with_number(root, {{"network", 0, false}, {"rate", 0, false}}, 0.125);
  EXPECT_EQ(fraction["network"]["rate"].value<double>(), 0.125);
}

TEST(TomlEdits, FaultsEarlierShorterMilder) {
  const toml::table root = parse_toml(kScenario, "t.toml");
  const toml::table& kill = *root["faults"][0].as_table();
  const std::vector<toml::table> earlier = earlier_faults(kill);
  ASSERT_FALSE(earlier.empty());
  EXPECT_EQ(earlier[0]["at_ms"].value<int64_t>(), 0);
  EXPECT_NEAR(*earlier[0]["restart_at_ms"].value<double>(), 1200, 1e-6);  // the same 1200 ms down
  const std::vector<toml::table> shorter = shorter_faults(kill);
  ASSERT_FALSE(shorter.empty());
  EXPECT_LT(*shorter[0]["restart_at_ms"].value<double>(), 4705.361735);
  EXPECT_GT(*shorter[0]["restart_at_ms"].value<double>(), 3505.361735);
  const std::vector<toml::table> milder = milder_faults(kill);
  ASSERT_EQ(milder.size(), 2u);
  EXPECT_EQ(milder[0]["kind"].value<std::string>(), "crash");
  EXPECT_EQ(milder[1]["kind"].value<std::string>(), "pause");
  EXPECT_NE(milder[1]["resume_at_ms"].node(), nullptr);
  EXPECT_EQ(milder[1]["restart_at_ms"].node(), nullptr);
  EXPECT_TRUE(milder_faults(*root["faults"][1].as_table()).empty());
}

// Every example, of every workload ([job] included), is still the same valid scenario once written
// back from its tree: the shrinker's candidates are that text.
TEST(TomlEdits, EveryExampleLoadsAfterTheRoundTrip) {
  namespace fs = std::filesystem;
  const fs::path examples = fs::path(__FILE__).parent_path().parent_path() / "examples";
  size_t seen = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(examples)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    const std::string text = scenarios::read_scenario_text(entry.path().string());
    const scenarios::Scenario before = scenarios::parse_scenario(text, entry.path().string());
    const std::string again = to_text(parse_toml(text, entry.path().string()));
    try {
      const scenarios::Scenario after = scenarios::parse_scenario(again, entry.path().string());
      EXPECT_EQ(after.workload.name(), before.workload.name());
      EXPECT_EQ(after.cluster.nodes, before.cluster.nodes);
      EXPECT_EQ(after.faults.size(), before.faults.size());
      EXPECT_EQ(after.checks.size(), before.checks.size());
    } catch (const Error& e) {
      ADD_FAILURE() << e.detail() << "\n" << again;
    }
    ++seen;
  }
  EXPECT_GE(seen, 30u);
}

TEST(FaultMaterialise, DrawnFaultsBecomeTablesInTimelineOrder) {
  const char* text = R"(
[cluster]
nodes = 3

[random_faults]
kill_per_min = 30

[[faults]]
at_ms = 100
kind = "pause"
node = "worker2"
resume_at_ms = 200
)";
  const toml::table root = parse_toml(text, "t.toml");
  const nlohmann::json timeline = nlohmann::json::parse(R"([
    {"kind": "kill", "at_ms": 50.25, "node": "worker1", "until_ms": 1050.25, "fired": true},
    {"kind": "pause", "at_ms": 100, "node": "worker2", "until_ms": 200, "line": 8, "fired": true},
    {"kind": "partition", "at_ms": 300, "groups": [["worker1"], ["worker0", "worker2"]], "until_ms": 900}
  ])");
  std::string why;
  const std::optional<toml::table> out = materialise_random_faults(root, timeline, &why);
  ASSERT_TRUE(out.has_value()) << why;
  EXPECT_EQ((*out)["random_faults"].node(), nullptr);
  const toml::array& faults = *(*out)["faults"].as_array();
  ASSERT_EQ(faults.size(), 3u);
  EXPECT_EQ(faults[0].as_table()->at("restart_at_ms").value<double>(), 1050.25);
  EXPECT_EQ(faults[1].as_table()->at("resume_at_ms").value<int64_t>(), 200);
  EXPECT_EQ(faults[2].as_table()->at("heal_at_ms").value<int64_t>(), 900);
  // A job's timeline (targets, not nodes) is not written: the caller shrinks the rates instead.
  EXPECT_FALSE(materialise_random_faults(root, nlohmann::json::parse(R"([{"kind": "kill", "target": "agent1", "at_ms": 5}])"), &why));
  // A scheduled fault the timeline does not name by its line is never dropped silently.
  EXPECT_FALSE(materialise_random_faults(root, nlohmann::json::parse(R"([{"kind": "kill", "at_ms": 5, "node": "worker1"}])"), &why));
}

TEST(TomlEdits, EarlierTriesALadderOfSixteenths) {
  // 0, half, three quarters, then every sixteenth from the earliest; whole for a whole start.
  EXPECT_EQ(earlier_times(1600), std::vector<double>({0, 800, 1200, 100, 200, 300, 400, 500, 600, 700, 900, 1000, 1100,
                                                      1300, 1400, 1500}));
  EXPECT_EQ(earlier_times(11245).size(), 16u);  // 8/16 and 12/16 are the half and three quarters
  for (double t : earlier_times(11245)) EXPECT_EQ(t, std::floor(t));
  EXPECT_TRUE(earlier_times(0).empty());
  const toml::table root = parse_toml(kScenario, "t.toml");
  const std::vector<toml::table> earlier = earlier_faults(*root["faults"][1].as_table());  // the partition at 100
  ASSERT_EQ(earlier.size(), earlier_times(100).size());
  EXPECT_EQ(earlier[3]["at_ms"].value<int64_t>(), 6);  // 100/16
  EXPECT_EQ(earlier[3]["heal_at_ms"].value<int64_t>(), 206);
}

const char* kTimed = R"(name = "t"
max_virtual_time_ms = 15000

[heartbeat]
duration_ms = 15000

[[faults]]
at_ms = 0
kind = "pause"
node = "worker1"
resume_at_ms = 112

[[faults]]
at_ms = 11289
kind = "crash"
node = "worker1"
restart_at_ms = 11290

[[faults]]
at_ms = 11064
kind = "partition"
groups = [["worker1"], ["worker0"]]
heal_after_ms = 11
)";

TEST(TomlEdits, AGroupOfFaultsMovesEarlierWithTheRunsEnd) {
  const toml::table root = parse_toml(kTimed, "t.toml");
  // The gap before 11064: to the pause's end (10952), then fractions of the gap to its start.
  EXPECT_EQ(group_shifts(root, 11064), std::vector<double>({10952, 11064, 9681, 8298, 5532, 2766, 1383}));
  // Before the crash: to the partition's end (11075), then fractions of the 225 ms from its start.
  EXPECT_EQ(group_shifts(root, 11289), std::vector<double>({214, 225, 196, 168, 112, 56, 28}));
  EXPECT_TRUE(group_shifts(root, 0).empty());
  const toml::table moved = shifted_from(root, 11064, 10000);
  EXPECT_EQ(moved["faults"][0]["at_ms"].value<int64_t>(), 0);  // before the group: stays
  EXPECT_EQ(moved["faults"][0]["resume_at_ms"].value<int64_t>(), 112);
  EXPECT_EQ(moved["faults"][1]["at_ms"].value<int64_t>(), 1289);  // their spacing kept
  EXPECT_EQ(moved["faults"][1]["restart_at_ms"].value<int64_t>(), 1290);
  EXPECT_EQ(moved["faults"][2]["at_ms"].value<int64_t>(), 1064);
  EXPECT_EQ(moved["faults"][2]["heal_after_ms"].value<int64_t>(), 11);
  EXPECT_EQ(moved["max_virtual_time_ms"].value<int64_t>(), 5000);  // the run's end with them
  EXPECT_EQ(moved["heartbeat"]["duration_ms"].value<int64_t>(), 5000);
  // An end before the group does not move, and none goes to 0 or below.
  const toml::table late = shifted_from(root, 15000, 15000);
  EXPECT_EQ(late["max_virtual_time_ms"].value<int64_t>(), 15000);
  EXPECT_EQ(fault_end(*root["faults"][2].as_table()), 11075);
}

TEST(TomlEdits, AFaultEndingAfterTheRunLosesItsEndOrEndsWithIt) {
  const toml::table root = parse_toml(kTimed, "t.toml");
  const toml::table& crash = *root["faults"][1].as_table();
  EXPECT_TRUE(clipped_ends(crash, 12000).empty());  // its restart at 11290 comes within the run
  EXPECT_TRUE(clipped_ends(crash, 11000).empty());  // it never strikes
  const std::vector<toml::table> ends = clipped_ends(crash, 11289.5);
  ASSERT_EQ(ends.size(), 1u) << "the run's end floored (11289) is not after the start: no clip";
  EXPECT_EQ(ends[0].get("restart_at_ms"), nullptr);
  const std::vector<toml::table> partition = clipped_ends(*root["faults"][2].as_table(), 11070.4);  // ends at 11075
  ASSERT_EQ(partition.size(), 2u);
  EXPECT_EQ(partition[0].get("heal_after_ms"), nullptr);
  EXPECT_EQ(partition[0]["at_ms"].value<int64_t>(), 11064);
  EXPECT_EQ(partition[1]["heal_after_ms"].value<int64_t>(), 6);  // ends at 11070
  const std::vector<toml::table> pause = clipped_ends(*root["faults"][0].as_table(), 50);
  ASSERT_EQ(pause.size(), 2u);
  EXPECT_EQ(pause[0].get("resume_at_ms"), nullptr);
  EXPECT_EQ(pause[1]["resume_at_ms"].value<int64_t>(), 49);  // before the end: an end at the bound warns too
  // An end exactly at the run's end counts: the loader warns of it.
  const std::vector<toml::table> at_end = clipped_ends(*root["faults"][0].as_table(), 112);
  ASSERT_EQ(at_end.size(), 2u);
  EXPECT_EQ(at_end[1]["resume_at_ms"].value<int64_t>(), 111);
}

}  // namespace
}  // namespace dagsim::shrink
