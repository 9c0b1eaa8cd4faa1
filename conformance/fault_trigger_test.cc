// Faults that strike on workload events (issue 22, item 3), in the simulator and over TCP.
//
// A trigger (`when = { member = "worker2" }`, `{ step = 100 }`, `{ backward = "worker0" }`,
// `{ store_round = 1 }`) strikes at the moment it names, whatever the machine's load: in the
// simulator at the virtual instant of the report (plus `after_ms`), over TCP before the reporting
// node goes on (it waits for the launcher's answer). So what must hold is exact on both:
//  - a store killed once step 100 is committed: rank 0 committed exactly steps 1..100;
//  - a peer killed as the driver's backward pass begins: the pass fails, naming the dead peer;
//  - worker2 killed 500 ms into each round it is a member of: in the simulator exactly 500 ms after
//    its worker group started, over TCP no sooner (and the same two rounds form);
//  - a trigger whose event never comes: the report marks the fault not fired and says why.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "conformance/transport_test_util.h"

namespace dagsim::cli::testing {
namespace {

std::string with_faults(const std::string& example_name, const std::string& from, const std::string& to) {
  std::string text = slurp(example(example_name));
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// `dagsim run FILE --transport T --json --records DIR`: the report, and DIR for the records.
struct RunOutput {
  json report;
  fs::path records;
};

RunOutput run(const std::string& name, const std::string& text, const std::string& transport, int expected_exit = 0) {
  const fs::path file = write_scenario(name + ".toml", text);
  const fs::path records = temp_dir() / (name + "-" + transport);
  const Output o = dagsim("run " + file.string() + " --json --transport " + transport + " --records " + records.string());
  EXPECT_EQ(o.exit_code, expected_exit) << transport << " " << name << "\n" << o.out << o.err;
  return {json::parse(o.out, nullptr, false), records};
}

json node_record(const RunOutput& r, const std::string& node, int incarnation) {
  const fs::path path = r.records / "nodes" / (node + "." + std::to_string(incarnation) + ".json");
  const json j = json::parse(slurp(path), nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("data")) << path;
  return j.is_object() ? j.value("data", json::object()) : json::object();
}

// The scenario times (ns) of the history's events of `kind` on `node`.
std::vector<int64_t> history_times(const RunOutput& r, const std::string& kind, int node) {
  std::vector<int64_t> out;
  const json history = json::parse(slurp(r.records / "faults.json"), nullptr, false);
  if (!history.is_array()) return out;
  for (const json& e : history) {
    if (e.value("kind", "") == kind && e.value("node", -1) == node) out.push_back(e.value("time_ns", int64_t{0}));
  }
  return out;
}

class FaultTriggers : public ::testing::TestWithParam<std::string> {};

TEST_P(FaultTriggers, AStoreKilledOnceStep100IsCommittedLeavesExactly100Steps) {
  const RunOutput r = run("step_trigger", slurp(example("elastic_store_death")), GetParam());
  ASSERT_TRUE(r.report.is_object());
  EXPECT_TRUE(r.report["passed"].get<bool>()) << r.report["checks"].dump(1);
  // worker1 is rank 0 throughout (one round): its commits are the job's.
  std::vector<uint64_t> steps;
  const json rank0 = node_record(r, "worker1", 0);
  for (const json& c : rank0["commits"]) steps.push_back(c["step"].get<uint64_t>());
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.back(), 100u) << "the store died once step 100 was committed, and no later";
  EXPECT_EQ(steps.size(), 100u);
  ASSERT_EQ(r.report["faults"].size(), 1u);
  EXPECT_TRUE(r.report["faults"][0]["fired"].get<bool>());
}

// Which of two true reports ends the pass is a race over TCP: the backward's own call to the dead
// peer failing ("backward pass of context 0:1 ...") or the peer's death reaching the context first
// ("worker1, which takes part in autograd context 0:1, failed ..."); the kill has struck before the
// pass goes on either way (net::Process::signal(SIGKILL) returns once the node is dead). Both name
// the context, and the peer.
TEST_P(FaultTriggers, APeerKilledAsTheBackwardPassBeginsFailsThatPass) {
  const std::string text = with_faults("seed_example", "[[checks]]\nkind = \"gradients_match_local\"\nrtol = 1e-9\n",
                                       "[[faults]]\nwhen = { backward = \"worker0\" }\nkind = \"kill\"\nnode = \"worker1\"\n\n"
                                       "[[checks]]\nkind = \"expect_error\"\nmessage = \"context 0:1\"\n");
  const RunOutput r = run("backward_trigger", text, GetParam());
  ASSERT_TRUE(r.report.is_object());
  EXPECT_TRUE(r.report["passed"].get<bool>()) << r.report["checks"].dump(1);
  EXPECT_NE(r.report["checks"].dump().find("worker1"), std::string::npos) << r.report["checks"].dump(1);
}

TEST_P(FaultTriggers, AMemberKilledHalfASecondIntoItsRounds) {
  const RunOutput r = run("member_trigger", slurp(example("elastic_max_restarts")), GetParam());
  ASSERT_TRUE(r.report.is_object());
  EXPECT_TRUE(r.report["passed"].get<bool>()) << r.report["checks"].dump(1);
  const std::vector<int64_t> kills = history_times(r, "kill", 2);
  ASSERT_EQ(kills.size(), 2u) << "worker2 killed once in each of its rounds";
  for (int life = 0; life < 2; ++life) {
    // Life 0 trains in round 0; life 1, restarted, in round 1.
    const json groups = node_record(r, "worker2", life)["groups"];
    ASSERT_FALSE(groups.empty()) << "worker2's life " << life << " was a member of a round";
    EXPECT_EQ(groups[0]["round"].get<int>(), life);
    const int64_t member_ns = groups[0]["t"].get<int64_t>();
    const int64_t after_ms = (kills[life] - member_ns) / 1'000'000;
    if (GetParam() == "sim") {
      EXPECT_EQ(kills[life] - member_ns, 500'000'000) << "life " << life;
    } else {
      // The node's clock and the launcher's are one host's; 10 ms covers their two readings.
      EXPECT_GE(after_ms, 490) << "life " << life;
      EXPECT_LT(after_ms, 2000) << "life " << life;
    }
  }
  EXPECT_EQ(r.report["rendezvous"].size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Transports, FaultTriggers, ::testing::Values("sim", "tcp"));

TEST(FaultTriggersReport, AFaultWhoseEventNeverComesIsMarkedNotFiredAndNamed) {
  // A round so late the run never forms it (a step past [elastic] steps would be refused at load).
  const std::string text =
      with_faults("elastic_store_outage", "when = { step = 100 }", "when = { member = \"worker2\", round = 100000 }");
  const RunOutput r = run("never_fires", text, "sim");
  ASSERT_TRUE(r.report.is_object());
  ASSERT_EQ(r.report["faults"].size(), 1u);
  EXPECT_FALSE(r.report["faults"][0]["fired"].get<bool>());
  EXPECT_FALSE(r.report["faults"][0].contains("at_ms"));
  ASSERT_EQ(r.report["warnings"].size(), 1u) << r.report["warnings"].dump();
  EXPECT_NE(r.report["warnings"][0].get<std::string>().find(
                "the pause of worker0 when worker2 is a member of a formed round (round 100000 or later) (line 34) never "
                "fired: its event never came"),
            std::string::npos)
      << r.report["warnings"][0];
  // The text report says it too.
  const Output o = dagsim("run " + (temp_dir() / "never_fires.toml").string());
  EXPECT_NE(o.out.find("WARNING the pause of worker0 when worker2 is a member of a formed round"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace dagsim::cli::testing
