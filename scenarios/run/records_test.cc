// Records round-trip through a directory exactly, and reading one trusts nothing: every kind of
// damage is Error(invalid_records) naming the file and what is wrong.
#include "scenarios/run/records.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/base/error.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;
using runtime::FaultEvent;
using runtime::TimePoint;
using namespace std::chrono_literals;

RunRecords sample() {
  RunRecords r;
  r.scenario_file = "scenarios/examples/x.toml";
  r.seed = 42;
  r.outcome = "finished";
  r.end = TimePoint{10ms + 1234567ns};
  r.node_names = {"worker0", "worker1"};
  r.final_states = {runtime::NodeState::up, runtime::NodeState::crashed};
  r.fault_history = {FaultEvent{FaultEvent::Kind::start, TimePoint{0ns}, 1, 0, 0, {}},
                     FaultEvent{FaultEvent::Kind::partition, TimePoint{5ms}, 0, 0, 3, {{0, 1}, {1, 0}}},
                     FaultEvent{FaultEvent::Kind::connection_failed, TimePoint{7ms}, 1, 0, 0, {}}};
  r.fault_timeline = nlohmann::json::array({{{"at_ms", 5.0}, {"kind", "partition"}}});
  r.failures = {FiberFailureRecord{TimePoint{3ms}, "worker1", "main", "boom"}};
  r.stats.trace_hash = 0xfedcba9876543210ULL;  // needs all 64 bits
  r.stats.messages = 17;
  r.stats.wall_ms = 1.5;
  r.nodes = {NodeRecord{0, 0, {{"x", 0.1}}}, NodeRecord{1, 0, {{"n", 3}}}, NodeRecord{1, 1, {{"n", 4}}}};
  r.probes = {{"sim.held_by_partition", 3}, {"store.cas_lost_race", uint64_t{1} << 40}};
  r.buggify = {{"enabled", {"store.cas_lost_race"}}, {"fired", {{"store.cas_lost_race", 2}}}};
  r.swarm = {{"kinds", {"kill"}}, {"summary", "kill x1.5"}};
  return r;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dagsim_records_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::string invalid_records_detail(const fs::path& dir) {
  try {
    read_records_dir(dir.string());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_records) << e.what();
    return e.detail();
  }
  return "no error";
}

TEST(Records, RoundTripThroughADirectoryExactly) {
  const fs::path dir = fresh_dir("roundtrip");
  const RunRecords r = sample();
  write_records_dir(dir.string(), r, "name = \"x\"\n");
  EXPECT_TRUE(fs::exists(dir / "nodes" / "worker1.1.json"));
  const RecordsDir back = read_records_dir(dir.string());
  EXPECT_EQ(back.scenario_text, "name = \"x\"\n");
  const RunRecords& b = back.records;
  EXPECT_EQ(b.scenario_file, r.scenario_file);
  EXPECT_EQ(b.seed, 42u);
  EXPECT_EQ(b.end, r.end);
  EXPECT_EQ(b.final_states, r.final_states);
  EXPECT_EQ(b.fault_history, r.fault_history);
  EXPECT_EQ(b.fault_timeline, r.fault_timeline);
  ASSERT_EQ(b.failures.size(), 1u);
  EXPECT_EQ(b.failures[0].what, "boom");
  EXPECT_EQ(b.failures[0].time, TimePoint{3ms});
  EXPECT_EQ(b.stats.trace_hash, r.stats.trace_hash);
  EXPECT_EQ(b.stats.messages, 17u);
  ASSERT_EQ(b.nodes.size(), 3u);
  EXPECT_EQ(b.nodes[2].node, 1u);
  EXPECT_EQ(b.nodes[2].incarnation, 1u);
  EXPECT_EQ(b.nodes[2].data, r.nodes[2].data);
  EXPECT_EQ(b.probes, r.probes);
  EXPECT_EQ(b.buggify, r.buggify);
  EXPECT_EQ(b.swarm, r.swarm);
  EXPECT_EQ(b.nodes[0].data.at("x").get<double>(), 0.1);
  EXPECT_EQ(b.records_of(1).size(), 2u);
  fs::remove_all(dir);
}

TEST(Records, NonFiniteNumbersRoundTrip) {
  for (double v : {0.1, -0.0, 1e-308, HUGE_VAL, -HUGE_VAL}) {
    const nlohmann::json j = nlohmann::json::parse(number_record(v).dump());
    EXPECT_EQ(number_from_record(j, "v"), v);
  }
  EXPECT_TRUE(std::isnan(number_from_record(nlohmann::json::parse(number_record(std::nan("")).dump()), "v")));
  EXPECT_THROW(number_from_record("infinity", "v"), Error);
  EXPECT_THROW(number_from_record(nullptr, "v"), Error);
}

TEST(Records, IntegersAreCheckedForKindAndRange) {
  EXPECT_EQ(integer_from_record<uint32_t>(7, "n"), 7u);
  EXPECT_EQ(integer_from_record<int64_t>(-7, "n"), -7);
  EXPECT_THROW(integer_from_record<uint32_t>(-1, "n"), Error);
  EXPECT_THROW(integer_from_record<uint32_t>(1.5, "n"), Error);
  EXPECT_THROW(integer_from_record<uint32_t>(uint64_t{1} << 32, "n"), Error);
  EXPECT_THROW(integer_from_record<int64_t>(std::numeric_limits<uint64_t>::max(), "n"), Error);
  EXPECT_THROW(integer_from_record<uint16_t>("3", "n"), Error);
}

TEST(Records, DamagedDirectoriesAreRejectedNamingTheFileAndKey) {
  const fs::path dir = fresh_dir("damaged");
  EXPECT_NE(invalid_records_detail(dir).find("not a records directory"), std::string::npos);

  write_records_dir(dir.string(), sample(), "x");
  const fs::path run = dir / "run.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(run));
  auto rewrite = [&](const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };

  nlohmann::json missing = j;
  missing.erase("seed");
  rewrite(run, missing.dump());
  EXPECT_NE(invalid_records_detail(dir).find("run.json: missing key \"seed\""), std::string::npos);

  nlohmann::json mistyped = j;
  mistyped["end_ns"] = "soon";
  rewrite(run, mistyped.dump());
  EXPECT_NE(invalid_records_detail(dir).find("key \"end_ns\" has the wrong type"), std::string::npos);

  nlohmann::json bad_state = j;
  bad_state["final_states"][0] = "zombie";
  rewrite(run, bad_state.dump());
  EXPECT_NE(invalid_records_detail(dir).find("unknown node state zombie"), std::string::npos);

  rewrite(run, "{ not json");
  EXPECT_NE(invalid_records_detail(dir).find("run.json: not JSON"), std::string::npos);

  nlohmann::json negative = j;
  negative["seed"] = -1;
  rewrite(run, negative.dump());
  EXPECT_NE(invalid_records_detail(dir).find("key \"seed\" has the wrong type"), std::string::npos);

  nlohmann::json bad_probes = j;
  bad_probes["probes"] = {{"sim.held_by_partition", -3}};
  rewrite(run, bad_probes.dump());
  EXPECT_NE(invalid_records_detail(dir).find("probes: sim.held_by_partition"), std::string::npos);
  bad_probes["probes"] = nlohmann::json::array();
  rewrite(run, bad_probes.dump());
  EXPECT_NE(invalid_records_detail(dir).find("probes: expected an object"), std::string::npos);
  bad_probes["probes"] = {{std::string(kMaxProbeNameBytes + 1, 'x'), 1}};
  rewrite(run, bad_probes.dump());
  EXPECT_NE(invalid_records_detail(dir).find("probes: a name of"), std::string::npos);
  nlohmann::json bad_buggify = j;
  bad_buggify["buggify"] = {{"enabled", 3}};
  rewrite(run, bad_buggify.dump());
  EXPECT_NE(invalid_records_detail(dir).find("buggify: expected"), std::string::npos);

  rewrite(run, j.dump());
  rewrite(dir / "faults.json", R"([{"kind": "kill", "time_ns": 99999999999, "node": 0, "peer": 0, "partition": 0, "blocked": []}])");
  EXPECT_NE(invalid_records_detail(dir).find("outside the run"), std::string::npos);
  rewrite(dir / "faults.json", R"([{"kind": "kill", "time_ns": 0, "node": 7, "peer": 0, "partition": 0, "blocked": []}])");
  EXPECT_NE(invalid_records_detail(dir).find("names a node the run does not have"), std::string::npos);
  rewrite(dir / "faults.json", R"([{"kind": "meteor", "time_ns": 0, "node": 0, "peer": 0, "partition": 0, "blocked": []}])");
  EXPECT_NE(invalid_records_detail(dir).find("unknown fault kind meteor"), std::string::npos);

  write_records_dir(dir.string(), sample(), "x");
  rewrite(dir / "nodes" / "worker9.0.json", R"({"node": "worker9", "incarnation": 0, "data": {}})");
  EXPECT_NE(invalid_records_detail(dir).find("node worker9 is not in run.json"), std::string::npos);
  // What a record chose is named escaped: no control character reaches a terminal.
  rewrite(dir / "nodes" / "worker9.0.json", R"({"node": "w\u001b[2J", "incarnation": 0, "data": {}})");
  const std::string escaped = invalid_records_detail(dir);
  EXPECT_NE(escaped.find("node \"w\\u001b[2J\" is not in run.json"), std::string::npos) << escaped;
  EXPECT_EQ(escaped.find('\x1b'), std::string::npos);
  std::filesystem::remove(dir / "nodes" / "worker9.0.json");

  // Rewriting a directory drops an earlier run's incarnations.
  write_records_dir(dir.string(), sample(), "x");
  EXPECT_FALSE(fs::exists(dir / "nodes" / "worker9.0.json"));
  EXPECT_EQ(read_records_dir(dir.string()).records.nodes.size(), 3u);
  fs::remove_all(dir);
}

// Every file of a records directory is read bounded: a FIFO (which once blocked `judge` and
// `report` for ever), a device or a socket is refused at once, naming the file; so is a file past
// the size bound, unread, and JSON nested past the depth bound.
TEST(Records, SpecialFilesAndUnboundedFilesAreRefusedAtOnce) {
  const fs::path dir = fresh_dir("special");
  write_records_dir(dir.string(), sample(), "x");
  fs::remove(dir / "run.json");
  ASSERT_EQ(::mkfifo((dir / "run.json").c_str(), 0600), 0);
  EXPECT_EQ(invalid_records_detail(dir), (dir / "run.json").string() + ": cannot read: not a regular file");
  fs::remove(dir / "run.json");  // writing the next records would wait on the FIFO for a reader

  write_records_dir(dir.string(), sample(), "x");
  fs::remove(dir / "scenario.toml");
  fs::create_symlink("/dev/zero", dir / "scenario.toml");
  EXPECT_EQ(invalid_records_detail(dir), (dir / "scenario.toml").string() + ": cannot read: not a regular file");
  fs::remove(dir / "scenario.toml");  // not /dev/zero, the link

  write_records_dir(dir.string(), sample(), "x");
  fs::resize_file(dir / "faults.json", kMaxRecordFileBytes + 1);  // sparse: nothing is written
  EXPECT_EQ(invalid_records_detail(dir), (dir / "faults.json").string() + ": is larger than 1024 MiB, the limit of a record file");

  write_records_dir(dir.string(), sample(), "x");
  std::ofstream(dir / "faults.json", std::ios::trunc) << std::string(100000, '[') << std::string(100000, ']');
  EXPECT_EQ(invalid_records_detail(dir), (dir / "faults.json").string() + ": nested deeper than 64 arrays or objects, the limit of this file");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dagsim::scenarios
