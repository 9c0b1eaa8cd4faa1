// Code probes, BUGGIFY and swarm faults (issue 52 items 2, 3 and 5) through whole simulated runs:
// the probes a run hits reach its result and `dagsim run --json`; counting them and turning
// [buggify] on without firing leave the trace as it was; BUGGIFY's perturbations are seeded and
// legal (a run with them passes its checks); a swarm mix is a function of the seed, differs across
// seeds and shapes the faults drawn.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/base/buggify.h"
#include "core/base/bounded_file.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/run/records.h"
#include "scenarios/run/runner.h"
#include "scenarios/run/swarm.h"

namespace dagsim::scenarios {
namespace {

std::string example_text(const std::string& name) {
  return read_bounded_file(std::string(DAGSIM_EXAMPLES) + "/" + name, size_t{1} << 20, ErrorCode::invalid_argument, "an example");
}

Scenario with(const std::string& example, const std::string& extra) {
  return parse_scenario(example_text(example) + "\n" + extra, example);
}

RunResult run(const Scenario& s, uint64_t seed) {
  RunOptions options;
  options.seed = seed;
  return run_scenario(s, options);
}

std::string run_binary(const std::string& args) {
  const std::string command = std::string(DAGSIM_BINARY) + " " + args + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buffer;
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  pclose(pipe);
  return out;
}

TEST(Probes, ARunsJsonCarriesTheProbesItHit) {
  const nlohmann::json j = nlohmann::json::parse(
      run_binary("run " + std::string(DAGSIM_EXAMPLES) + "/heartbeat_chaos.toml --seed 42 --json"));
  ASSERT_TRUE(j.contains("probes")) << j.dump();
  ASSERT_TRUE(j.at("probes").is_object());
  EXPECT_GT(j.at("probes").value("sim.held_by_partition", 0), 0) << j.at("probes").dump();
  EXPECT_FALSE(j.contains("buggify"));  // off by default
  EXPECT_FALSE(j.contains("swarm"));
}

TEST(Probes, ATcpRunSumsItsProcessesProbesAndKeepsThemOutOfNodeRecords) {
  const std::string dir = ::testing::TempDir() + "/fault_mix_tcp_records";
  const nlohmann::json j = nlohmann::json::parse(run_binary(
      "run " + std::string(DAGSIM_EXAMPLES) + "/rendezvous_dead_participant.toml --transport tcp --json --records " + dir));
  ASSERT_TRUE(j.contains("probes")) << j.dump();
  EXPECT_FALSE(j.at("probes").empty()) << j.dump();
  EXPECT_EQ(run_binary("judge " + dir + " --json").find("\"probes\": {}"), std::string::npos);
  const std::string grep = run_binary("judge " + dir);  // judging reads the records back
  EXPECT_NE(grep.find("probes:"), std::string::npos) << grep;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/nodes")) {
    const std::string text = read_bounded_file(entry.path().string(), size_t{1} << 26, ErrorCode::invalid_argument, "a record");
    EXPECT_EQ(text.find(kNodeProbesKey), std::string::npos) << entry.path();
  }
}

TEST(Probes, TheSameSeedHitsTheSameProbesAndLeavesTheSameTrace) {
  const Scenario s = load_scenario_file(std::string(DAGSIM_EXAMPLES) + "/heartbeat_chaos.toml");
  const RunResult a = run(s, 42);
  const RunResult b = run(s, 42);
  ASSERT_FALSE(a.probes.empty());
  EXPECT_EQ(a.probes, b.probes);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
}

TEST(Buggify, OnWithoutFiringLeavesTheTraceAsOff) {
  // Every point enabled, none fires: the points' draws come from streams of their own, so the
  // simulator's draws, and so the trace, are those of the run without [buggify].
  const Scenario off = load_scenario_file(std::string(DAGSIM_EXAMPLES) + "/rendezvous_dead_participant.toml");
  const Scenario on = with("rendezvous_dead_participant.toml",
                           "[buggify]\nenabled = true\nenable_probability = 1.0\nfire_probability = 0.0\n");
  const RunResult a = run(off, 3);
  const RunResult b = run(on, 3);
  EXPECT_TRUE(a.buggify.is_null());
  ASSERT_TRUE(b.buggify.is_object());
  EXPECT_EQ(b.buggify.at("enabled").size(), buggify::all_point_names().size());
  EXPECT_TRUE(b.buggify.at("fired").empty());
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_TRUE(a.passed && b.passed);
}

TEST(Buggify, FiredPointsAreSeededAndTheRunStillPasses) {
  const Scenario on = with("elastic_training.toml", "[buggify]\nenabled = true\nenable_probability = 1.0\nfire_probability = 0.2\n");
  const Scenario off = load_scenario_file(std::string(DAGSIM_EXAMPLES) + "/elastic_training.toml");
  const RunResult a = run(on, 42);
  const RunResult b = run(on, 42);
  const RunResult plain = run(off, 42);
  ASSERT_TRUE(a.buggify.is_object());
  EXPECT_FALSE(a.buggify.at("fired").empty()) << a.buggify.dump();
  EXPECT_EQ(a.buggify, b.buggify);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_NE(a.trace_hash, plain.trace_hash);
  for (const CheckResult& c : a.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail << "\n" << a.buggify.dump();
}

TEST(Swarm, TheMixIsTheSeedsAndDiffersAcrossSeeds) {
  const Scenario s = with("heartbeat_chaos.toml", "");
  Scenario swarm = s;
  swarm.random_faults.swarm = true;
  std::set<std::string> mixes;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const SwarmMix mix = draw_swarm(swarm, seed);
    const nlohmann::json j = swarm_json(swarm, mix);
    EXPECT_EQ(j, swarm_json(swarm, draw_swarm(swarm, seed)));
    mixes.insert(j.dump());
    EXPECT_TRUE(mix.kinds[0] || mix.kinds[1] || mix.kinds[2] || mix.kinds[3]);
    EXPECT_TRUE(std::find(mix.targets.begin(), mix.targets.end(), true) != mix.targets.end());
    EXPECT_GE(mix.max_concurrent, 1u);
    EXPECT_LE(mix.max_concurrent, s.random_faults.max_concurrent);
    for (double f : mix.rate_factors) {
      EXPECT_GE(f, 0.25);
      EXPECT_LE(f, 4.0);
    }
    // The faults drawn follow the mix: only kinds switched on, only on targets.
    for (const FaultSpec& f : fault_timeline(swarm, seed, runtime::TimePoint{s.max_virtual_time})) {
      const size_t kind = f.kind == FaultSpec::Kind::kill ? 0 : f.kind == FaultSpec::Kind::crash ? 1
                        : f.kind == FaultSpec::Kind::pause ? 2 : 3;
      EXPECT_TRUE(mix.kinds[kind]) << "seed " << seed << ": a " << fault_kind_name(f.kind) << " drawn while off";
      EXPECT_TRUE(mix.targets[f.node]) << "seed " << seed << ": node " << f.node << " is no target";
    }
  }
  EXPECT_GT(mixes.size(), 20u);
}

TEST(Swarm, OffDrawsAsBeforeAndOnShowsItsMixInTheResult) {
  Scenario s = with("heartbeat_chaos.toml", "");
  const RunResult off = run(s, 5);
  EXPECT_TRUE(off.swarm.is_null());
  EXPECT_EQ(off.trace_hash, run(s, 5).trace_hash);
  s.random_faults.swarm = true;
  const RunResult on = run(s, 5);
  ASSERT_TRUE(on.swarm.is_object());
  EXPECT_TRUE(on.swarm.contains("summary"));
  EXPECT_EQ(on.swarm, swarm_json(s, draw_swarm(s, 5)));
  EXPECT_NE(on.faults, off.faults);
}

TEST(Swarm, WithBuggifyItSwitchesThePoints) {
  const Scenario s = with("rendezvous_dead_participant.toml",
                          "[buggify]\nenabled = true\nenable_probability = 0.0\n");
  Scenario swarm = s;
  swarm.random_faults.swarm = true;
  swarm.random_faults.kill_per_min = 1;
  std::set<std::vector<std::string>> choices;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const SwarmMix mix = draw_swarm(swarm, seed);
    ASSERT_TRUE(mix.buggify_points.has_value());
    EXPECT_FALSE(mix.buggify_points->empty());
    choices.insert(*mix.buggify_points);
  }
  EXPECT_GT(choices.size(), 3u);
  const RunResult r = run(swarm, 4);
  ASSERT_TRUE(r.buggify.is_object());
  EXPECT_EQ(r.buggify.at("enabled"), nlohmann::json(*draw_swarm(swarm, 4).buggify_points));
}

}  // namespace
}  // namespace dagsim::scenarios
