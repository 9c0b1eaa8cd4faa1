// Sharded sweeps without a scheduler: how seeds are dealt (shard_plan.h), where the index comes
// from, the shard's results written and read back (shard_results.h), the probe table
// (sweep_probes.h), and every refusal of a merge (shard_merge.h). The merge against a real
// unsharded check is shard_cli_test.cc; on a real Slurm, conformance/slurm/check_array.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "core/base/error.h"
#include "scenarios/cli/shard_merge.h"
#include "scenarios/cli/shard_plan.h"
#include "scenarios/cli/shard_results.h"
#include "scenarios/cli/sweep_probes.h"

namespace dagsim::cli {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string refusal(const std::string& spec, const EnvLookup& env) {
  try {
    (void)resolve_shard(spec, env);
    return "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.detail();
  }
}

// Every seed of the range in exactly one shard, the shards' sizes within one of each other.
TEST(ShardPlan, DealsEverySeedOnceRoundRobin) {
  for (const auto& [first, last] : std::vector<std::pair<uint64_t, uint64_t>>{{1, 20}, {0, 0}, {5, 7}, {100, 1099}}) {
    for (uint64_t count : {1, 2, 3, 4, 7, 32}) {
      std::map<uint64_t, int> seen;
      uint64_t smallest = UINT64_MAX, largest = 0;
      for (uint64_t index = 0; index < count; ++index) {
        const SeedShard shard{index, count, "--shard"};
        bool every = true;
        const uint64_t n = shard_seed_count(first, last, shard, &every);
        EXPECT_FALSE(every);
        smallest = std::min(smallest, n);
        largest = std::max(largest, n);
        for (uint64_t k = 0; k < n; ++k) {
          const uint64_t seed = shard_seed(first, shard, k);
          EXPECT_TRUE(in_shard(first, last, shard, seed)) << seed;
          EXPECT_EQ((seed - first) % count, index);
          ++seen[seed];
        }
      }
      EXPECT_EQ(seen.size(), last - first + 1) << first << ".." << last << " in " << count;
      for (const auto& [seed, times] : seen) EXPECT_EQ(times, 1) << seed;
      EXPECT_LE(largest - smallest, 1u);
    }
  }
  // Shard 1 of 4 over 1..20: 2, 6, 10, 14, 18.
  const SeedShard one{1, 4, "--shard"};
  bool every = false;
  ASSERT_EQ(shard_seed_count(1, 20, one, &every), 5u);
  EXPECT_EQ(shard_seed(1, one, 0), 2u);
  EXPECT_EQ(shard_seed(1, one, 4), 18u);
}

TEST(ShardPlan, CountsAllTwoToTheSixtyFourSeedsWithoutOverflow) {
  bool every = false;
  EXPECT_EQ(shard_seed_count(0, UINT64_MAX, SeedShard{0, 1, ""}, &every), 0u);
  EXPECT_TRUE(every);
  EXPECT_EQ(shard_seed_count(0, UINT64_MAX, SeedShard{0, 2, ""}, &every), uint64_t{1} << 63);
  EXPECT_FALSE(every);
  EXPECT_EQ(shard_seed_count(0, UINT64_MAX, SeedShard{1, 2, ""}, &every), uint64_t{1} << 63);
  const uint64_t in_three = shard_seed_count(0, UINT64_MAX, SeedShard{0, 3, ""}, &every) +
                            shard_seed_count(0, UINT64_MAX, SeedShard{1, 3, ""}, &every) +
                            shard_seed_count(0, UINT64_MAX, SeedShard{2, 3, ""}, &every);
  EXPECT_EQ(in_three, 0u);  // 2^64, wrapped: every seed counted once
  // The last seed of the range, from the last shard, without overflow.
  EXPECT_EQ(shard_seed(UINT64_MAX - 2, SeedShard{2, 3, ""}, 0), UINT64_MAX);
}

TEST(ShardPlan, TheIndexComesFromTheFlagOrTheScheduler) {
  const SeedShard given = resolve_shard("2/5", env_of({{"SLURM_ARRAY_TASK_ID", "4"}}));
  EXPECT_EQ(given.index, 2u);
  EXPECT_EQ(given.count, 5u);
  EXPECT_EQ(given.source, "--shard");
  const SeedShard slurm = resolve_shard("4", env_of({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                                     {"SLURM_ARRAY_TASK_COUNT", "4"}, {"JOB_COMPLETION_INDEX", "0"}}));
  EXPECT_EQ(slurm.index, 3u);
  EXPECT_EQ(slurm.source, "SLURM_ARRAY_TASK_ID");
  // An array of 1-4 (sbatch --array=1-4): its index is the id less the array's first.
  EXPECT_EQ(resolve_shard("4", env_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "1"}})).index, 0u);
  // --array=10-16:2: 10, 12, 14, 16 are shards 0..3.
  EXPECT_EQ(resolve_shard("4", env_of({{"SLURM_ARRAY_TASK_ID", "14"}, {"SLURM_ARRAY_TASK_MIN", "10"}, {"SLURM_ARRAY_TASK_STEP", "2"}})).index,
            2u);
  const SeedShard k8s = resolve_shard("3", env_of({{"JOB_COMPLETION_INDEX", "2"}}));
  EXPECT_EQ(k8s.index, 2u);
  EXPECT_EQ(k8s.source, "JOB_COMPLETION_INDEX");
  EXPECT_EQ(resolve_shard("", env_of({})).count, 1u);
}

TEST(ShardPlan, AMissingOrWrongIndexIsRefusedSayingWhatToGive) {
  EXPECT_EQ(refusal("4", env_of({})),
            "--shard 4 needs this shard's index: give --shard I/4, or run it as a task of a Slurm job array "
            "(SLURM_ARRAY_TASK_ID) or a pod of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX); neither is set");
  EXPECT_EQ(refusal("4/4", env_of({})), "shard index 4 (from --shard) is not below the 4 shards: indices run from 0 to 3");
  EXPECT_EQ(refusal("3", env_of({{"JOB_COMPLETION_INDEX", "3"}})),
            "shard index 3 (from JOB_COMPLETION_INDEX) is not below the 3 shards: indices run from 0 to 2");
  EXPECT_EQ(refusal("4", env_of({{"SLURM_ARRAY_TASK_ID", "x1"}})), "SLURM_ARRAY_TASK_ID=\"x1\" is not a whole number");
  EXPECT_EQ(refusal("4", env_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}})),
            "--shard 4 in a job array of 2 tasks (SLURM_ARRAY_TASK_COUNT): give the array 4 tasks (sbatch --array=0-3), or --shard 2");
  EXPECT_EQ(refusal("4", env_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "2"}})),
            "SLURM_ARRAY_TASK_ID=1 is not on the array's steps (SLURM_ARRAY_TASK_MIN=2, SLURM_ARRAY_TASK_STEP=1)");
  for (const char* bad : {"0", "-1", "1/0", "a/4", "1/", "/4", "1/4/2", "100001", " 4", "4 "}) {
    EXPECT_NE(refusal(bad, env_of({{"JOB_COMPLETION_INDEX", "0"}})).find("expected I/N or N"), std::string::npos) << bad;
  }
}

TEST(ShardPlan, ResultsPathsNameTheShard) {
  const SeedShard shard{3, 8, "--shard"};
  EXPECT_EQ(expand_shard_pattern("out/shard-%i-of-%n.json", shard), "out/shard-3-of-8.json");
  EXPECT_EQ(expand_shard_pattern("100%%.json", shard), "100%.json");
  EXPECT_THROW(expand_shard_pattern("shard-%a.json", shard), Error);
  EXPECT_THROW(expand_shard_pattern("shard-%", shard), Error);
}

// A sweep of seeds 1..N over `count` shards, seed s failing when s % 5 == 0, each seed hitting
// probe "a.every" once and "b.fives" on failing seeds.
std::vector<std::pair<std::string, ShardResults>> shards_of(uint64_t last, uint64_t count) {
  std::vector<std::pair<std::string, ShardResults>> out;
  for (uint64_t index = 0; index < count; ++index) {
    ShardResults r;
    r.file = "a.toml";
    r.scenario_sha256 = std::string(64, 'a');
    r.seeds = "1.." + std::to_string(last);
    r.first = 1;
    r.last = last;
    r.shard = {index, count, "--shard"};
    r.provenance = {{"git_commit", "abc"}};
    r.probe_names = {"a.every", "b.fives", "c.never"};
    r.started = "2026-11-29T15:0" + std::to_string(index) + ":00";
    bool every = false;
    for (uint64_t k = 0; k < shard_seed_count(1, last, r.shard, &every); ++k) {
      const uint64_t seed = shard_seed(1, r.shard, k);
      const bool fails = seed % 5 == 0;
      SeedOutcome o{seed, fails ? 1 : 0, fails ? "c: broke" : "", 0.5, {{"c", !fails, fails ? "broke\nat once" : "fine"}}, false, {}};
      o.probes["a.every"] = 1;
      if (fails) o.probes["b.fives"] = 2;
      r.outcomes.push_back(std::move(o));
    }
    out.emplace_back("shard-" + std::to_string(index) + ".json", std::move(r));
  }
  return out;
}

std::string merge_refusal(std::vector<std::pair<std::string, ShardResults>> shards) {
  try {
    (void)merge_shards(std::move(shards));
    return "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.detail();
  }
}

TEST(ShardResults, WrittenAndReadBackAsThemselves) {
  const auto shards = shards_of(20, 3);
  const ShardResults& r = shards[1].second;
  const std::string text = shard_results_json(r).dump();
  const ShardResults back = parse_shard_results(text, "s.json");
  EXPECT_EQ(shard_results_json(back), shard_results_json(r));
  EXPECT_EQ(back.outcomes.size(), 7u);  // 2, 5, 8, 11, 14, 17, 20
  EXPECT_EQ(back.outcomes[1].seed, 5u);
  EXPECT_EQ(back.outcomes[1].probes.at("b.fives"), 2u);
  EXPECT_EQ(back.shard.text(), "1/3");
  // Written whole through a temporary, then read from the file.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("shard_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_shard_results((dir / "s.json").string(), r);
  EXPECT_EQ(shard_results_json(read_shard_results((dir / "s.json").string())), shard_results_json(r));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  EXPECT_THROW(write_shard_results((dir / "no" / "such" / "s.json").string(), r), Error);
  std::filesystem::remove_all(dir);
}

TEST(ShardResults, AWrongFieldIsNamedByItsPath) {
  const nlohmann::json good = shard_results_json(shards_of(20, 3)[1].second);
  const auto error_of = [](const nlohmann::json& j) {
    try {
      (void)parse_shard_results(j.dump(), "s.json");
      return std::string("no error");
    } catch (const Error& e) {
      return e.detail();
    }
  };
  nlohmann::json j = good;
  j["results"][3]["exit_code"] = "1";
  EXPECT_EQ(error_of(j), "s.json: results[3].exit_code: expected an unsigned integer, got a string");
  j = good;
  j["results"][0]["seed"] = 3;
  EXPECT_EQ(error_of(j), "s.json: results[0]: seed 3 is not one of shard 1/3 of seeds 1..20");
  j = good;
  j["results"][1]["seed"] = 2;
  EXPECT_EQ(error_of(j), "s.json: results[1]: seed 2 again");
  j = good;
  j["results"][0]["probes"]["x"] = -1;
  EXPECT_EQ(error_of(j), "s.json: results[0].probes.x: expected an unsigned integer, got a negative integer");
  j = good;
  j["shard"]["index"] = 3;
  EXPECT_EQ(error_of(j), "s.json: shard: 3/3 is not a shard (0 <= index < count <= 100000)");
  j = good;
  j["scenario"]["sha256"] = "abc";
  EXPECT_EQ(error_of(j), "s.json: scenario.sha256: expected 64 lowercase hex digits");
  j = good;
  j["version"] = 2;
  EXPECT_EQ(error_of(j), "s.json: format version 2, but this dagsim reads version 1");
  j = good;
  j.erase("results");
  EXPECT_EQ(error_of(j), "s.json: results: missing (expected an array)");
  EXPECT_EQ(error_of(nlohmann::json{{"results", nlohmann::json::array()}}),
            "s.json: not the results of a shard (dagsim check --shard I/N --results FILE)");
  j = good;
  nlohmann::json deep = 1;
  for (int i = 0; i < 20; ++i) deep = nlohmann::json::array({deep});
  j["results"][0]["checks"] = deep;
  EXPECT_EQ(error_of(j), "s.json: nested deeper than 16 arrays or objects, the limit of this file");
}

TEST(ShardMerge, TheShardsInAnyOrderAreTheWholeSweep) {
  auto shards = shards_of(20, 4);
  std::swap(shards[0], shards[3]);
  const MergedSweep merged = merge_shards(shards);
  ASSERT_EQ(merged.outcomes.size(), 20u);
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(merged.outcomes[i].seed, i + 1);
  EXPECT_EQ(merged.file, "a.toml");
  EXPECT_EQ(merged.seeds, "1..20");
  EXPECT_EQ(merged.count, 20u);
  EXPECT_EQ(merged.timestamp, "2026-11-29T15:00:00");
  EXPECT_EQ(merged.origin.provenance, (nlohmann::json{{"git_commit", "abc"}}));
  // The probe table over the merged seeds equals the one over the same seeds unsharded.
  const ProbeTable table = probe_table(merged.outcomes, merged.origin.probe_names);
  EXPECT_EQ(table.seeds, 20u);
  ASSERT_EQ(table.hit.size(), 2u);
  EXPECT_EQ(table.hit[0].name, "a.every");
  EXPECT_EQ(table.hit[0].seeds, 20u);
  EXPECT_EQ(table.hit[1].name, "b.fives");
  EXPECT_EQ(table.hit[1].seeds, 4u);
  EXPECT_EQ(table.hit[1].hits, 8u);
  EXPECT_EQ(table.never_hit, std::vector<std::string>{"c.never"});
  // A shard with no seeds at all (more shards than seeds) still counts.
  EXPECT_EQ(merge_shards(shards_of(3, 5)).outcomes.size(), 3u);
}

TEST(ShardMerge, RefusesShardsThatAreNotOneSweepNamingTheFile) {
  auto shards = shards_of(20, 4);
  shards[2].second.scenario_sha256 = std::string(64, 'b');
  EXPECT_EQ(merge_refusal(shards),
            "shard-2.json: another scenario (its text's SHA-256 bbbbbbbbbbbb..., not aaaaaaaaaaaa...) than shard-0.json; shards of one "
            "sweep must agree");
  shards = shards_of(20, 4);
  shards[1].second.last = 21;
  EXPECT_EQ(merge_refusal(shards), "shard-1.json: seeds 1..21, other seeds (1..20) than shard-0.json; shards of one sweep must agree");
  shards = shards_of(20, 4);
  auto three = shards_of(20, 3);
  shards[3] = three[2];
  EXPECT_EQ(merge_refusal(shards), "shard-2.json: one of 3 shards, another count (4) than shard-0.json; shards of one sweep must agree");
  shards = shards_of(20, 4);
  shards.push_back({"copy.json", shards[1].second});
  EXPECT_EQ(merge_refusal(shards), "copy.json: shard 1/4 again (also shard-1.json)");
  shards = shards_of(20, 4);
  shards.erase(shards.begin() + 3);
  shards.erase(shards.begin() + 1);
  EXPECT_EQ(merge_refusal(shards), "missing shards 1 and 3 of 4 (seeds 1..20); given 2");
  shards = shards_of(20, 4);
  shards[2].second.interrupted = "SIGTERM";
  shards[2].second.outcomes.pop_back();
  EXPECT_EQ(merge_refusal(shards), "shard-2.json: shard 2/4 was cut short by SIGTERM (4 seeds finished): run it again");
  shards = shards_of(20, 4);
  shards[0].second.outcomes.pop_back();
  EXPECT_EQ(merge_refusal(shards), "shard-0.json: shard 0/4 holds 4 seeds, not its 5");
  shards = shards_of(20, 4);
  shards[3].second.probe_names.push_back("d.new");
  EXPECT_EQ(merge_refusal(shards), "shard-3.json: run by a build with other probes than shard-0.json; shards of one sweep must agree");
  EXPECT_EQ(merge_refusal({}), "no shards to merge");
}

TEST(SweepProbes, ATableCountsSeedsAndHitsAndNamesTheProbesNeverHit) {
  std::vector<SeedOutcome> outcomes;
  outcomes.push_back({1, 0, "", 0, {}, false, {{"x.one", 3}, {"y.other", 1}}});
  outcomes.push_back({2, 0, "", 0, {}, false, {{"x.one", UINT64_MAX}}});
  outcomes.push_back({3, 0, "", 0, {}, true, {{"z.cut", 1}}});  // interrupted: counts for nothing
  outcomes.push_back({4, 0, "", 0, {}, false, {{"w.zero", 0}}});
  const ProbeTable t = probe_table(outcomes, {"y.other", "x.one", "v.unhit", "w.zero"});
  EXPECT_EQ(t.seeds, 3u);
  ASSERT_EQ(t.hit.size(), 2u);
  EXPECT_EQ(t.hit[0].name, "x.one");
  EXPECT_EQ(t.hit[0].seeds, 2u);
  EXPECT_EQ(t.hit[0].hits, UINT64_MAX);  // saturated, not wrapped
  EXPECT_EQ(t.never_hit, (std::vector<std::string>{"v.unhit", "w.zero"}));
  nlohmann::json summary;
  add_probe_table(summary, t);
  EXPECT_EQ(summary["probes"]["y.other"], (nlohmann::json{{"seeds", 1}, {"hits", 1}}));
  EXPECT_EQ(summary["probes_never_hit"], (nlohmann::json{"v.unhit", "w.zero"}));
  EXPECT_EQ(probes_of_report(nlohmann::json::parse(R"({"probes": {"a": 2}})")), (ProbeCounts{{"a", 2}}));
  EXPECT_TRUE(probes_of_report(nlohmann::json::parse(R"({"checks": []})")).empty());
  EXPECT_THROW(probes_of_report(nlohmann::json::parse(R"({"probes": {"a": "2"}})")), Error);
}

}  // namespace
}  // namespace dagsim::cli
