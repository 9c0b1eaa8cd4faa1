// `dagsim shrink` end to end, on the binary: a heartbeat run with dozens of random kills, where one
// kill of worker2 makes never_declared_dead fail, shrinks to a file that loads, still fails that
// check, with at least 5x fewer faults and 5x less virtual time; the same inputs give the same
// bytes; a passing seed is refused (exit 2); --max-runs stops the search and says so; and
// `dagsim check --shrink` shrinks the first failing seed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli::testing {
namespace {

// Kills at 30 a minute over 60 s on three workers (the monitor spared); worker2 must never be
// declared dead, which one kill of it is enough to break.
constexpr const char* kRandomKills = R"(# many random kills; one of worker2 is the failure
name = "hb_random_kills"
max_virtual_time_ms = 90000

[cluster]
nodes = 4

[random_faults]
kill_per_min = 30
restart_after_ms = 1000
max_concurrent = 2
exclude = ["worker0"]

[heartbeat]
monitor = "worker0"
interval_ms = 100
max_attempts = 3
duration_ms = 60000

[[checks]]
kind = "detects_failures"

[[checks]]
kind = "never_declared_dead"
nodes = ["worker2"]
)";

nlohmann::json run_json(const fs::path& file, uint64_t seed, int* exit_code) {
  const Output run = dagsim("run " + file.string() + " --seed " + std::to_string(seed) + " --json");
  *exit_code = run.exit_code;
  return nlohmann::json::parse(run.out);
}

bool check_failed(const nlohmann::json& report, const std::string& name) {
  for (const nlohmann::json& c : report["checks"]) {
    if (c["name"] == name) return !c["passed"].get<bool>();
  }
  return false;
}

TEST(ShrinkCli, RandomKillsShrinkToOneEarlyFault) {
  const fs::path file = write_scenario("random_kills.toml", kRandomKills);
  const fs::path out = temp_dir() / "random_kills.shrunk.toml";
  int code = 0;
  const nlohmann::json original = run_json(file, 1, &code);
  ASSERT_EQ(code, 1);
  ASSERT_TRUE(check_failed(original, "never_declared_dead"));

  const Output shrink = dagsim("shrink " + file.string() + " --seed 1 -o " + out.string() + " --json --no-progress --dagsim " +
                               std::string(DAGSIM_BINARY));
  ASSERT_EQ(shrink.exit_code, 0) << shrink.err;
  EXPECT_EQ(shrink.err, "");  // --no-progress
  const nlohmann::json summary = nlohmann::json::parse(shrink.out);
  const nlohmann::json& before = summary["before"];
  const nlohmann::json& after = summary["after"];
  EXPECT_EQ(before["faults"].get<size_t>(), original["faults"].size());
  EXPECT_GE(before["faults"].get<size_t>(), 10u);
  EXPECT_GE(before["faults"].get<size_t>(), 5 * after["faults"].get<size_t>()) << shrink.out;
  EXPECT_GE(before["virtual_time_ms"].get<double>(), 5 * after["virtual_time_ms"].get<double>()) << shrink.out;
  EXPECT_EQ(summary["stopped_by"], "fixpoint");
  EXPECT_EQ(summary["output"], out.string());
  EXPECT_LE(summary["runs"].get<uint64_t>(), 300u);

  // The shrunk file loads, says where it came from, and fails the same check the same way.
  EXPECT_EQ(dagsim("validate " + out.string()).exit_code, 0);
  const std::string text = slurp(out);
  EXPECT_EQ(text.rfind("# Shrunk by `dagsim shrink " + file.string() + " --seed 1` (deterministic): still fails check "
                       "never_declared_dead", 0), 0u) << text;
  EXPECT_NE(text.find("# Replay: dagsim run " + out.string() + " --seed 1"), std::string::npos);
  EXPECT_EQ(text.find("random_faults"), std::string::npos) << "the drawn faults are explicit now";
  const nlohmann::json shrunk = run_json(out, 1, &code);
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(check_failed(shrunk, "never_declared_dead"));
  EXPECT_EQ(shrunk["outcome"], original["outcome"]);
  EXPECT_EQ(shrunk["faults"].size(), after["faults"].get<size_t>());
  EXPECT_EQ(shrunk["virtual_time_ms"].get<double>(), after["virtual_time_ms"].get<double>());
}

TEST(ShrinkCli, SameInputsGiveTheSameBytes) {
  const fs::path file = write_scenario("random_kills_twice.toml", kRandomKills);
  std::string texts[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path dir = temp_dir() / ("twice" + std::to_string(i));
    fs::create_directories(dir);
    const Output shrink = shell("cd " + dir.string() + " && " + DAGSIM_BINARY + " shrink " + file.string() + " --seed 2 --no-progress");
    ASSERT_EQ(shrink.exit_code, 0) << shrink.out;
    texts[i] = slurp(dir / "random_kills_twice.seed2.shrunk.toml");  // the default name, in the current folder
  }
  EXPECT_FALSE(texts[0].empty());
  EXPECT_EQ(texts[0], texts[1]);
}

TEST(ShrinkCli, APassingSeedOrACheckThatPassedIsRefused) {
  const Output passing = dagsim("shrink " + std::string(DAGSIM_EXAMPLES) + "/heartbeat_basic.toml --seed 1 -o " +
                                (temp_dir() / "never.toml").string());
  EXPECT_EQ(passing.exit_code, 2);
  EXPECT_NE(passing.err.find("seed 1 passes: nothing to shrink"), std::string::npos) << passing.err;
  EXPECT_FALSE(fs::exists(temp_dir() / "never.toml"));

  const fs::path file = write_scenario("random_kills_other.toml", kRandomKills);
  const Output other = dagsim("shrink " + file.string() + " --seed 1 --check detects_failures --no-progress");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("check detects_failures did not fail"), std::string::npos) << other.err;

  EXPECT_EQ(dagsim("shrink " + file.string()).exit_code, 2);  // --seed is required
  EXPECT_EQ(dagsim("shrink " + file.string() + " --seed 1 --dagsim /nonexistent/dagsim").exit_code, 2);
}

TEST(ShrinkCli, MaxRunsStopsTheSearchAndSaysSo) {
  const fs::path file = write_scenario("random_kills_budget.toml", kRandomKills);
  const fs::path out = temp_dir() / "budget.toml";
  const Output shrink = dagsim("shrink " + file.string() + " --seed 1 --max-runs 3 --json --no-progress -o " + out.string());
  ASSERT_EQ(shrink.exit_code, 0) << shrink.err;
  const nlohmann::json summary = nlohmann::json::parse(shrink.out);
  EXPECT_EQ(summary["stopped_by"], "max_runs");
  EXPECT_EQ(summary["runs"], 3);
  EXPECT_NE(slurp(out).find("stopped at its budget (--max-runs 3)"), std::string::npos);
  EXPECT_EQ(dagsim("validate " + out.string()).exit_code, 0);
}

TEST(ShrinkCli, CheckShrinksItsFirstFailingSeed) {
  const fs::path file = write_scenario("random_kills_check.toml", kRandomKills);
  const fs::path dir = temp_dir() / "check";
  fs::create_directories(dir);
  const Output check = shell("cd " + dir.string() + " && " + DAGSIM_BINARY + " check " + file.string() +
                             " --seeds 1..2 --jobs 1 --shrink --no-progress");
  EXPECT_EQ(check.exit_code, 1) << check.out;
  EXPECT_NE(check.out.find("shrunk seed 1: random_kills_check.seed1.shrunk.toml"), std::string::npos) << check.out;
  EXPECT_TRUE(fs::exists(dir / "random_kills_check.seed1.shrunk.toml"));
}

}  // namespace
}  // namespace dagsim::cli::testing
