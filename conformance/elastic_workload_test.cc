// The elastic workload's edges (issue 12): the [elastic] table refuses what cannot work, naming
// the key; the checkpoint refuses bytes that are not this job's; the judge trusts nothing in the
// records (a step committed twice, a lost commit, a changed parameter, a miscounted restart are each
// named); a store that restarts empty is reported, never trained over from scratch; and a SIGTERM'd
// agent leaves without closing the rendezvous, so the others finish the job.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/base/error.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/format/scenario_test_util.h"
#include "scenarios/run/runner.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/elastic/elastic_training.h"
#include "conformance/examples.h"

namespace dagsim::conformance {
namespace {

using scenarios::CheckResult;
using scenarios::RunRecords;
using scenarios::RunResult;

using scenarios::error_of;

std::string example(const std::string& name) { return testing::example_text(name); }

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

const std::string kHead = "name = \"e\"\n[cluster]\nnodes = 4\n";
const std::string kJob = "[elastic]\nsteps = 5\ninput = 2\nlayers = [{ out = 2 }]\noptimizer = { kind = \"sgd\", lr = 0.1 }\n";

TEST(ElasticScenario, TheTableRefusesWhatCannotWorkNamingTheKey) {
  EXPECT_EQ(error_of(kHead + kJob + "[elastic.rendezvous]\nmin_nodes = 2\n"), "no error");
  EXPECT_NE(error_of(kHead + kJob).find("elastic.rendezvous: required"), std::string::npos) << error_of(kHead + kJob);
  EXPECT_NE(error_of(kHead + kJob + "[elastic.rendezvous]\nmin_nodes = 2\nduration_ms = 5\n").find("elastic.rendezvous.duration_ms: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + kJob + "[elastic.rendezvous]\nmin_nodes = 4\n").find("elastic.rendezvous.min_nodes: 4 participants can never join"),
            std::string::npos);
  const std::string close = kHead + kJob + "[elastic.rendezvous]\nmin_nodes = 2\n[[elastic.rendezvous.actions]]\naction = \"close\"\n"
                                          "node = \"worker1\"\nat_ms = 5\n";
  EXPECT_NE(error_of(close).find("elastic.rendezvous.actions[0].action: unknown value \"close\""), std::string::npos) << error_of(close);
  EXPECT_NE(error_of(kHead + replaced(kJob, "layers = [{ out = 2 }]", "layers = []") + "[elastic.rendezvous]\nmin_nodes = 2\n")
                .find("elastic.layers: must have at least one layer"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + replaced(kJob, "steps = 5", "steps = 0") + "[elastic.rendezvous]\nmin_nodes = 2\n").find("elastic.steps"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + kJob + "max_restart = 2\n[elastic.rendezvous]\nmin_nodes = 2\n").find("elastic.max_restart: unknown key"),
            std::string::npos);
}

TEST(ElasticCheckpoint, BytesThatAreNotThisJobsCheckpointAreRefusedByName) {
  const scenarios::Scenario scenario = scenarios::parse_scenario(kHead + kJob + "[elastic.rendezvous]\nmin_nodes = 2\n", "e.toml");
  const auto& spec = scenario.workload.as<scenarios::ElasticSpec>();
  const scenarios::ElasticModel model(spec, 7);
  scenarios::Checkpoint c;
  c.step = 3;
  c.round = 1;
  c.params = model.initial_params();
  c.optimizer = {{}, {dagsim::from_values({2}, {1, 2})}};
  const rpc::Bytes bytes = scenarios::encode_checkpoint(c);
  const scenarios::Checkpoint back = scenarios::decode_checkpoint(bytes, spec);
  EXPECT_EQ(back.step, 3u);
  EXPECT_EQ(back.params[0].to_vector(), c.params[0].to_vector());
  EXPECT_EQ(back.optimizer[1][0].to_vector(), (std::vector<double>{1, 2}));

  const auto refused = [&](const rpc::Bytes& b, const std::string& why) {
    try {
      scenarios::decode_checkpoint(b, spec);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::checkpoint_invalid) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(rpc::Bytes(bytes.begin(), bytes.begin() + 20), "is no checkpoint");
  refused({'h', 'i'}, "is no checkpoint");
  scenarios::Checkpoint other = c;
  other.format = 9;
  refused(scenarios::encode_checkpoint(other), "checkpoint format 9");
  other = c;
  other.params[0] = from_values({1, 2}, {1, 2});
  refused(scenarios::encode_checkpoint(other), "parameter 0 has shape [1, 2]");
  other = c;
  other.step = 6;
  refused(scenarios::encode_checkpoint(other), "6 steps committed of 5");
}

// Runs `text`, lets `tamper` change the records, and returns the check `kind`.
CheckResult check_after(const std::string& text, const std::string& kind, const std::function<void(RunRecords&)>& tamper) {
  scenarios::RunOptions options;
  options.before_checks = tamper;
  const RunResult result = scenarios::run_scenario(scenarios::parse_scenario(text, "elastic.toml"), options);
  for (const CheckResult& c : result.checks) {
    if (c.name == kind) return c;
  }
  ADD_FAILURE() << "no check " << kind;
  return {};
}

nlohmann::json& record_of(RunRecords& records, uint32_t node, uint32_t incarnation = 0) {
  for (scenarios::NodeRecord& r : records.nodes) {
    if (r.node == node && r.incarnation == incarnation) return r.data;
  }
  throw std::runtime_error("no record of node " + std::to_string(node));
}

TEST(ElasticJudge, UntouchedRecordsPassAndEachTamperingIsNamed) {
  const std::string text = example("elastic_max_restarts.toml");
  const auto untouched = [](RunRecords&) {};
  EXPECT_TRUE(check_after(text, "no_step_twice", untouched).passed);
  EXPECT_TRUE(check_after(text, "params_match_local", untouched).passed);
  EXPECT_TRUE(check_after(text, "restarts", untouched).passed);

  CheckResult twice = check_after(text, "no_step_twice", [](RunRecords& r) {
    nlohmann::json& commits = record_of(r, 0)["checkpoints"];
    commits.insert(commits.begin() + 5, commits[4]);
  });
  EXPECT_FALSE(twice.passed);
  EXPECT_NE(twice.detail.find("committed step 5 after step 5: a step applied twice"), std::string::npos) << twice.detail;

  CheckResult lost = check_after(text, "no_step_twice", [](RunRecords& r) {
    nlohmann::json& commits = record_of(r, 0)["checkpoints"];
    commits.erase(commits.begin() + 2);
  });
  EXPECT_FALSE(lost.passed);
  EXPECT_NE(lost.detail.find("committed step 4 after step 2: steps lost"), std::string::npos) << lost.detail;

  // A commit rank 0 was told of that the store's history lacks (the history ends later).
  CheckResult unrecorded = check_after(text, "no_step_twice", [](RunRecords& r) {
    nlohmann::json& commits = record_of(r, 1)["commits"];
    commits[3]["step"] = 1000;
  });
  EXPECT_FALSE(unrecorded.passed) << unrecorded.detail;

  CheckResult changed = check_after(text, "params_match_local", [](RunRecords& r) {
    nlohmann::json& w = record_of(r, 0)["final"]["params"][2]["values"][0];
    w = w.get<double>() + 1e-6;
  });
  EXPECT_FALSE(changed.passed);
  EXPECT_NE(changed.detail.find("w2: "), std::string::npos) << changed.detail;

  CheckResult miscounted = check_after(text, "restarts", [](RunRecords& r) { record_of(r, 1)["result"]["restarts"] = 0; });
  EXPECT_FALSE(miscounted.passed);
  EXPECT_NE(miscounted.detail.find("worker1 reports 0 restarts; its events count 1"), std::string::npos) << miscounted.detail;
}

// A store that dies and comes back at once, empty: the agents find their round gone and rejoin,
// and rank 0 finds no checkpoint in a store that restarted. Starting over would apply the
// committed steps twice, so it refuses by name until max_restarts is spent; the job ends failed
// with nothing applied twice.
TEST(ElasticWorkload, AStoreThatRestartedEmptyIsReportedNeverTrainedOverFromScratch) {
  std::string text = example("elastic_store_death.toml");
  text = replaced(text, "node = \"worker0\"\n", "node = \"worker0\"\nrestart_after_ms = 1\n");
  text = replaced(text, "message = \"Rendezvous store unreachable\"", "message = \"the store restarted empty and lost it\"");
  for (uint64_t seed : {1, 2, 3}) {
    scenarios::RunOptions options;
    options.seed = seed;
    const RunResult result = scenarios::run_scenario(scenarios::parse_scenario(text, "empty.toml"), options);
    for (const CheckResult& c : result.checks) EXPECT_TRUE(c.passed) << "seed " << seed << ": " << c.name << ": " << c.detail;
    EXPECT_EQ(result.outcome, "finished");
  }
}

// SIGTERM to one agent (a leave action): its group stops, it leaves without closing the rendezvous
// (PyTorch #67742), and the others re-form and finish the job with the same result.
TEST(ElasticWorkload, ASigtermedAgentLeavesWithoutEndingTheJob) {
  std::string text = example("elastic_store_outage.toml");
  text = replaced(text,
                  "[[faults]]\nwhen = { step = 100 }           # once step 100 is committed\nkind = \"pause\"\n"
                  "node = \"worker0\"\nresume_after_ms = 3000\n",
                  "[[elastic.rendezvous.actions]]\naction = \"leave\"\nnode = \"worker2\"\nat_ms = 1000\n");
  scenarios::RunOptions options;
  RunRecords records;
  options.before_checks = [&](RunRecords& r) { records = r; };
  const RunResult result = scenarios::run_scenario(scenarios::parse_scenario(text, "leave.toml"), options);
  for (const CheckResult& c : result.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  EXPECT_EQ(record_of(records, 2)["result"]["outcome"], "left");
  EXPECT_EQ(record_of(records, 1)["result"]["outcome"], "succeeded");
  bool round_without_worker2 = false;
  for (const nlohmann::json& g : record_of(records, 1)["groups"]) {
    if (g["world"] == 3) round_without_worker2 = true;
  }
  EXPECT_TRUE(round_without_worker2) << "the others re-formed without it";
}

}  // namespace
}  // namespace dagsim::conformance
