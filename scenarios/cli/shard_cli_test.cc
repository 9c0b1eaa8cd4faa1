// A sharded sweep through the binary, without a scheduler: `dagsim check --shard I/N --results`
// for every I, then `dagsim merge`, must report what the unsharded `dagsim check` reports: the
// same JSON (but for the seeds' wall times), the same JUnit (but for its times), the same failing
// seeds and replay lines, the same probe table. And every refusal exits 2 naming the file.
// On a real Slurm job array: conformance/slurm/check_array.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli::testing {
namespace {

// heartbeat_chaos, shortened, with a check that some seeds fail: worker3 never declared dead.
std::string mixed_scenario() {
  std::string text = slurp(fs::path(DAGSIM_EXAMPLES) / "heartbeat_chaos.toml");
  const std::string from = "duration_ms = 60000";
  text.replace(text.find(from), from.size(), "duration_ms = 4000");
  return text + "\n[[checks]]\nkind = \"never_declared_dead\"\nnodes = [\"worker3\"]\n";
}

nlohmann::json without_times(nlohmann::json summary) {
  for (auto& seed : summary["results"]) seed.erase("seconds");
  return summary;
}

std::string without_times(const std::string& xml) {
  return std::regex_replace(xml, std::regex(R"re( (time|timestamp)="[^"]*")re"), "");
}

// The lines a text summary names failing seeds and replays with.
std::string failing_lines(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("seed ", 0) == 0 || line.rfind("  replay: ", 0) == 0 || line.find("seeds passed") != std::string::npos) out += line + "\n";
  }
  return out;
}

TEST(ShardCli, MergedShardsReportWhatTheUnshardedCheckReports) {
  const fs::path scenario = write_scenario("mixed.toml", mixed_scenario());
  const fs::path dir = temp_dir() / "merged";
  fs::create_directories(dir);
  const std::string check = "check " + scenario.string() + " --seeds 1..20 --no-progress --jobs 2 --probes";
  const Output whole = dagsim(check + " --json --junit " + (dir / "whole.xml").string() + " --html " + (dir / "whole.html").string());
  ASSERT_EQ(whole.exit_code, 1) << whole.err;  // some seeds fail, some pass
  const Output whole_text = dagsim(check);
  for (int i = 0; i < 3; ++i) {
    const Output shard = dagsim(check + " --shard " + std::to_string(i) + "/3 --results " + (dir / "shard-%i-of-%n.json").string());
    EXPECT_TRUE(shard.exit_code == 0 || shard.exit_code == 1) << shard.out << shard.err;
    EXPECT_NE(shard.out.find("(1..20, shard " + std::to_string(i) + "/3)"), std::string::npos) << shard.out;
  }
  const std::string shards = (dir / "shard-0-of-3.json").string() + " " + (dir / "shard-2-of-3.json").string() + " " +
                             (dir / "shard-1-of-3.json").string();
  const Output merged = dagsim("merge " + shards + " --probes --json --junit " + (dir / "merged.xml").string() + " --html " +
                               (dir / "merged.html").string());
  ASSERT_EQ(merged.exit_code, whole.exit_code) << merged.err;
  const nlohmann::json a = nlohmann::json::parse(whole.out), b = nlohmann::json::parse(merged.out);
  EXPECT_EQ(without_times(a), without_times(b)) << whole.out << "\n---\n" << merged.out;
  EXPECT_FALSE(a["failed"].empty());
  EXPECT_LT(a["failed"].size(), 20u);
  EXPECT_TRUE(a.contains("probes") && a.contains("probes_never_hit"));
  EXPECT_EQ(without_times(slurp(dir / "whole.xml")), without_times(slurp(dir / "merged.xml")));
  EXPECT_NE(slurp(dir / "merged.html").find("id=\"probe-table\""), std::string::npos);
  const Output merged_text = dagsim("merge " + shards + " --probes");
  EXPECT_EQ(merged_text.exit_code, 1);
  EXPECT_EQ(failing_lines(whole_text.out), failing_lines(merged_text.out));
  EXPECT_NE(failing_lines(merged_text.out).find("replay: dagsim run " + scenario.string() + " --seed "), std::string::npos);
  // The probe table's text, after the summary, equal too.
  const auto table = [](const std::string& text) { return text.substr(text.find("probes: ")); };
  EXPECT_EQ(table(whole_text.out), table(merged_text.out));
}

TEST(ShardCli, TheIndexComesFromTheSchedulersVariables) {
  const fs::path scenario = fs::path(DAGSIM_EXAMPLES) / "heartbeat_basic.toml";
  const fs::path dir = temp_dir() / "env";
  fs::create_directories(dir);
  const std::string check = "check " + scenario.string() + " --seeds 1..6 --no-progress --shard 2 --results " + (dir / "s%i.json").string();
  const Output a = shell("env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 " + std::string(DAGSIM_BINARY) + " " + check);
  EXPECT_EQ(a.exit_code, 0) << a.out;
  EXPECT_NE(a.out.find("3/3 seeds passed (1..6, shard 1/2)"), std::string::npos) << a.out;
  const Output b = shell("env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=0 " + std::string(DAGSIM_BINARY) + " " + check);
  EXPECT_EQ(b.exit_code, 0) << b.out;
  const nlohmann::json s1 = nlohmann::json::parse(slurp(dir / "s1.json"));
  EXPECT_EQ(s1["shard"]["source"], "SLURM_ARRAY_TASK_ID");
  EXPECT_EQ(s1["results"].size(), 3u);
  EXPECT_EQ(s1["results"][0]["seed"], 2);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "s0.json"))["shard"]["source"], "JOB_COMPLETION_INDEX");
  EXPECT_EQ(dagsim("merge " + (dir / "s0.json").string() + " " + (dir / "s1.json").string()).exit_code, 0);
  // Neither variable: exit 2 before any seed runs, saying what to give.
  const Output none = shell("env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX " + std::string(DAGSIM_BINARY) + " " + check);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.out.find("--shard 2 needs this shard's index"), std::string::npos) << none.out;
  const Output beyond = dagsim("check " + scenario.string() + " --seeds 1..6 --shard 2/2");
  EXPECT_EQ(beyond.exit_code, 2);
  EXPECT_NE(beyond.err.find("shard index 2 (from --shard) is not below the 2 shards"), std::string::npos) << beyond.err;
}

TEST(ShardCli, AMergeOfShardsThatAreNotOneSweepExitsTwoNamingTheFile) {
  const fs::path dir = temp_dir() / "refused";
  fs::create_directories(dir);
  const fs::path basic = fs::path(DAGSIM_EXAMPLES) / "heartbeat_basic.toml";
  const fs::path other = write_scenario("other.toml", slurp(basic) + "\n# another text, another hash\n");
  const auto run_shard = [&](const fs::path& scenario, const std::string& shard, const std::string& out) {
    const Output r = dagsim("check " + scenario.string() + " --seeds 1..6 --no-progress --shard " + shard + " --results " + (dir / out).string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return (dir / out).string();
  };
  const std::string s0 = run_shard(basic, "0/3", "s0.json"), s1 = run_shard(basic, "1/3", "s1.json"), s2 = run_shard(basic, "2/3", "s2.json");
  const std::string o2 = run_shard(other, "2/3", "o2.json"), r2 = run_shard(basic, "2/3", "r2.json");
  const std::string of2 = run_shard(basic, "1/2", "of2.json");
  EXPECT_EQ(dagsim("merge " + s0 + " " + s1 + " " + s2).exit_code, 0);
  const auto refused = [&](const std::string& files, const std::string& says) {
    const Output r = dagsim("merge " + files);
    EXPECT_EQ(r.exit_code, 2) << files;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  };
  refused(s0 + " " + s1 + " " + o2, o2 + ": another scenario");
  refused(s0 + " " + s1 + " " + s2 + " " + r2, r2 + ": shard 2/3 again (also " + s2 + ")");
  refused(s0 + " " + s2, "missing shard 1 of 3 (seeds 1..6)");
  refused(s0 + " " + s1 + " " + of2, of2 + ": one of 2 shards, another count (3)");
  std::ofstream(dir / "cut.json") << slurp(s2).substr(0, 100);
  refused(s0 + " " + s1 + " " + (dir / "cut.json").string(), (dir / "cut.json").string() + ": not JSON");
  refused(s0 + " " + s1 + " " + (dir / "none.json").string(), (dir / "none.json").string() + ": cannot open");
  EXPECT_EQ(dagsim("merge").exit_code, 2);
}

}  // namespace
}  // namespace dagsim::cli::testing
