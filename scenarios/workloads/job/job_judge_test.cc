// The job judge (job_judge.h) on records built as data, no process started: each check passes on
// a good run and fails on one made wrong for it, and a malformed records.job is refused naming
// the key. The results and spans the report draws from are checked too.
#include "scenarios/workloads/job/job_judge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/base/error.h"
#include "scenarios/workloads/job/job_records.h"
#include "scenarios/workloads/job/job_records_test_util.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

using nlohmann::json;

Scenario job_scenario(uint32_t agents = 2) {
  Scenario s;
  s.name = "job_test";
  JobSpec spec;
  spec.command = {"train.py"};
  spec.agents = agents;
  spec.min_nodes = 1;
  spec.max_nodes = agents;
  spec.nproc_per_node = 2;
  s.workload = WorkloadSpec("job", spec);
  s.cluster.nodes = agents;
  s.cluster.name_prefix = "agent";
  return s;
}

// A good run of two agents (job_records_test_util.h's): agent1 is killed at 3 s and its crash
// restarts it at 4 s (incarnation 1); round 0 forms at 1 s, round 1 at 5 s after the kill. Here
// agent1's first incarnation had one worker, and a kill on round 7 never fired.
RunRecords good_run() {
  RunRecords r = job_test::two_agent_job_run({"dagsim", "launch"}, "/tmp/job-run", 1, "dagsim");
  r.nodes[1].data["workers"].erase(1);
  r.fault_timeline.push_back(
      {{"kind", "kill"}, {"target", "agent0:1"}, {"line", 26}, {"fired", false}, {"trigger", "round 7"}, {"detail", ""}});
  return r;
}

struct Judged {
  Scenario scenario;
  RunRecords records;
  CheckResult judge(const std::string& kind, json params = json::object(), const std::string& message = "") {
    CheckSpec spec;
    spec.kind = kind;
    spec.params = params;
    spec.message = message;
    scenario.checks.push_back(spec);
    const std::unique_ptr<Judge> judge = make_job_judge(scenario, records);
    for (const CheckKind& k : job_check_kinds()) {
      if (k.name == kind) return k.judge(*judge, scenario.checks.back());
    }
    ADD_FAILURE() << "no check " << kind;
    return {};
  }
};

Judged good() { return {job_scenario(), good_run()}; }

TEST(JobJudge, EveryCheckKindIsInTheTable) {
  std::vector<std::string> names;
  for (const CheckKind& k : job_check_kinds()) names.emplace_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rendezvous_invariants", "job_succeeded", "no_orphans", "reformed_within", "restarts",
                                             "command"}));
}

TEST(JobJudge, RendezvousInvariantsPassFailAndL6ByPyTorchsRule) {
  EXPECT_TRUE(good().judge("rendezvous_invariants").passed);
  Judged j = good();
  j.records.job["store"]["violations"] = {"S2 (store life 0, round 1; host_100_0): two rounds with one number",
                                          "L6 (round 1): a survivor did not re-form"};
  CheckResult c = j.judge("rendezvous_invariants");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("2 violation(s)"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("S2 (store life 0"), std::string::npos) << c.detail;
  // By PyTorch's rule L6 is the known gap: reported, not counted; S2 still fails.
  c = j.judge("rendezvous_invariants", {{"l6", "pytorch"}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("1 violation(s)"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("#111646"), std::string::npos) << c.detail;
  j.records.job["store"]["violations"] = {"L6 (round 1): a survivor did not re-form"};
  c = j.judge("rendezvous_invariants", {{"l6", "pytorch"}});
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("#111646"), std::string::npos) << c.detail;
  EXPECT_FALSE(j.judge("rendezvous_invariants", {{"l6", "dagsim"}}).passed);
  // A record judged by PyTorch's rule cannot be held to dagsim's.
  Judged p = good();
  JobSpec spec = p.scenario.workload.as<JobSpec>();
  spec.rerendezvous_on_expiry = false;
  p.scenario.workload = WorkloadSpec("job", spec);
  EXPECT_TRUE(p.judge("rendezvous_invariants").passed);
  c = p.judge("rendezvous_invariants", {{"l6", "dagsim"}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("cannot be re-judged"), std::string::npos) << c.detail;
  // A record that could not be judged fails, naming why.
  Judged e = good();
  e.records.job["store"]["error"] = "store.jsonl: line 7: not JSON";
  c = e.judge("rendezvous_invariants");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("store.jsonl: line 7: not JSON"), std::string::npos) << c.detail;
}

TEST(JobJudge, JobSucceededExcusesWhatAFaultEndedAndNothingElse) {
  CheckResult c = good().judge("job_succeeded");
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("agent1 (SIGKILL: the crash of agent1 (line 14) ended it)"), std::string::npos) << c.detail;
  // agent0 exits 1: a failure (worker faults are fine; an agent's own exit is not).
  Judged j = good();
  j.records.nodes[0].data["exit"] = {{"code", 1}};
  c = j.judge("job_succeeded");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("agent0: exit 1"), std::string::npos) << c.detail;
  // The killed agent1 was not struck by a fault here: its SIGKILL is a failure.
  Judged k = good();
  k.records.fault_timeline[0]["target"] = "agent0:0";
  c = k.judge("job_succeeded");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("agent1: SIGKILL"), std::string::npos) << c.detail;
  // An agent the run stopped at its timeout did not succeed.
  Judged t = good();
  t.records.nodes[2].data["stopped_by_run"] = true;
  t.records.nodes[2].data["exit"] = {{"signal", "SIGKILL"}};
  c = t.judge("job_succeeded");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("timeout"), std::string::npos) << c.detail;
}

TEST(JobJudge, JobSucceededWithExpectFailureWantsAFailureAndItsMessage) {
  EXPECT_FALSE(good().judge("job_succeeded", {{"expect_failure", true}}).passed);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "job_judge_logs";
  std::filesystem::create_directories(dir / "agents");
  std::ofstream(dir / "agents" / "agent.log") << "step 3\nRuntimeError: resumed from step 0, expected 3\n";
  Judged j = good();
  j.records.job["dir"] = dir.string();
  j.records.nodes[0].data["exit"] = {{"code", 1}};
  EXPECT_TRUE(j.judge("job_succeeded", {{"expect_failure", true}}).passed);
  CheckResult c = j.judge("job_succeeded", {{"expect_failure", true}}, "resumed from step 0");
  EXPECT_TRUE(c.passed) << c.detail;
  c = j.judge("job_succeeded", {{"expect_failure", true}}, "out of memory");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("no agent's log says"), std::string::npos) << c.detail;
  EXPECT_FALSE(j.judge("job_succeeded", {{"expect_failure", "yes"}}).passed);
}

TEST(JobJudge, NoOrphansListsEachPidAndCommandLine) {
  EXPECT_TRUE(good().judge("no_orphans").passed);
  Judged j = good();
  j.records.job["orphans"] = {{{"pid", 4242}, {"cmdline", "python3 train.py --resume"}}};
  const CheckResult c = j.judge("no_orphans");
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("pid 4242: python3 train.py --resume"), std::string::npos) << c.detail;
}

TEST(JobJudge, ReformedWithinNamesTheFaultItsLineAndTheGap) {
  CheckResult c = good().judge("reformed_within", {{"ms", 2000}});
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("crash of agent1 (line 14) at 3000 ms: round 1 formed 2000 ms later"), std::string::npos) << c.detail;
  c = good().judge("reformed_within", {{"ms", 1500}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("crash of agent1 (line 14) at 3000 ms: round 1 formed 2000 ms later, more than 1500 ms"),
            std::string::npos)
      << c.detail;
  // No round after the store's pause: it never re-formed.
  Judged j = good();
  j.records.job["rounds"].erase(2);
  c = j.judge("reformed_within", {{"ms", 100000}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("store_pause of store (line 20) at 6000 ms: no round formed after it"), std::string::npos) << c.detail;
  EXPECT_FALSE(good().judge("reformed_within").passed);  // ms is required
}

TEST(JobJudge, RestartsCountsWorkerGroupRestartsAgainstMinAndMax) {
  EXPECT_TRUE(good().judge("restarts", {{"max", 1}}).passed);
  EXPECT_TRUE(good().judge("restarts", {{"min", 1}, {"max", 3}}).passed);
  CheckResult c = good().judge("restarts", {{"max", 0}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("1 worker-group restart(s) (agent0 1), more than max = 0"), std::string::npos) << c.detail;
  c = good().judge("restarts", {{"min", 2}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("fewer than min = 2"), std::string::npos) << c.detail;
}

TEST(JobJudge, CommandIsItsExitStatusWithItsOutputAsTheDetail) {
  Judged j = good();
  CheckSpec first;
  first.kind = "no_orphans";
  j.scenario.checks.push_back(first);  // the command is check 1
  j.records.job["commands"] = {{{"check", 1}, {"argv", {"compare.py"}}, {"exit", 0}, {"output", "  final step 100 equals the reference\n"}}};
  CheckResult c = j.judge("command", {{"run", {"compare.py"}}});
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_EQ(c.detail, "final step 100 equals the reference");
  j.scenario.checks.pop_back();
  j.records.job["commands"][0]["exit"] = 3;
  j.records.job["commands"][0]["output"] = "step 57 was repeated\n";
  c = j.judge("command", {{"run", {"compare.py"}}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("compare.py: exit 3\nstep 57 was repeated"), std::string::npos) << c.detail;
  // No record of it: a failure, not a pass.
  j.scenario.checks.pop_back();
  j.records.job["commands"] = json::array();
  c = j.judge("command", {{"run", {"compare.py"}}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("no result"), std::string::npos) << c.detail;
}

TEST(JobJudge, MalformedRecordsAreRefusedNamingTheKey) {
  auto refused = [](RunRecords r) -> std::string {
    try {
      make_job_judge(job_scenario(), r);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_records);
      return e.detail();
    }
    return "accepted";
  };
  RunRecords r = good_run();
  r.job["rounds"][1]["at_ms"] = "soon";
  EXPECT_NE(refused(r).find("job.rounds[1].at_ms"), std::string::npos) << refused(r);
  r = good_run();
  r.job.erase("orphans");
  EXPECT_NE(refused(r).find("job.orphans: missing"), std::string::npos) << refused(r);
  r = good_run();
  r.job["store"]["violations"] = {42};
  EXPECT_NE(refused(r).find("job.store.violations[0]"), std::string::npos) << refused(r);
  r = good_run();
  r.job = nullptr;
  EXPECT_NE(refused(r).find("job:"), std::string::npos) << refused(r);
  r = good_run();
  r.nodes[1].data["workers"][0]["pid"] = -1.5;
  EXPECT_NE(refused(r).find("nodes/agent1.0.json: data.workers[0].pid"), std::string::npos) << refused(r);
  r = good_run();
  r.nodes[0].data["exit"] = {{"status", 0}};
  EXPECT_NE(refused(r).find("nodes/agent0.0.json: data.exit"), std::string::npos) << refused(r);
  r = good_run();
  r.fault_timeline[0].erase("kind");
  EXPECT_NE(refused(r).find("fault_timeline[0].kind"), std::string::npos) << refused(r);
  r = good_run();
  r.job["commands"] = {{{"check", -1}, {"argv", json::array()}, {"exit", 0}, {"output", ""}}};
  EXPECT_NE(refused(r).find("job.commands[0].check"), std::string::npos) << refused(r);
}

TEST(JobJudge, ResultsCarryTheSeedNoteAndSpansDrawAgentsWorkersRoundsFaultsAndRestarts) {
  Judged j = good();
  const std::unique_ptr<Judge> judge = make_job_judge(j.scenario, j.records);
  const json results = judge->results({});
  EXPECT_EQ(results["job"]["note"], job_records::kSeedNote);
  EXPECT_EQ(results["timeline"][0], std::string("note: ") + job_records::kSeedNote);
  EXPECT_EQ(results["job"]["agents"].size(), 3u);
  EXPECT_EQ(results["job"]["faults_fired"].size(), 2u);
  EXPECT_EQ(results["rendezvous"].size(), 3u);
  std::map<std::string, int> by_category;
  for (const WorkloadSpan& s : judge->spans()) {
    ++by_category[s.category];
    EXPECT_LE(s.begin_ns, s.end_ns) << s.name;
  }
  EXPECT_EQ(by_category["agent"], 3);
  EXPECT_EQ(by_category["worker"], 7);
  EXPECT_EQ(by_category["round"], 6);  // round 1's participants found by their pids
  EXPECT_EQ(by_category["restart"], 1);
  EXPECT_EQ(by_category["fault"], 2);
  bool store_row = false, worker_named = false;
  for (const WorkloadSpan& s : judge->spans()) {
    store_row = store_row || (s.category == "fault" && s.node == 2);
    worker_named = worker_named || s.name == "agent1:0 pid 201";
  }
  EXPECT_TRUE(store_row);
  EXPECT_TRUE(worker_named);
}

// Review of issue 51: a job whose every agent a fault ended did not complete, and an agent the
// run stopped at the timeout is never excused, even when a fault struck it first.
TEST(JobJudge, JobSucceededWantsTheJobCompletedAndNeverExcusesTheTimeout) {
  // agent1 is not restarted and agent0 is killed at 8 s: every agent a fault ended.
  Judged all = good();
  all.records.nodes.erase(all.records.nodes.begin() + 2);
  all.records.nodes[0].data["exit"] = {{"signal", "SIGKILL"}};
  all.records.nodes[0].data["ended_ms"] = 8000.0;
  all.records.fault_timeline.push_back({{"kind", "kill"}, {"target", "agent0"}, {"line", 30}, {"at_ms", 8000.0}, {"fired", true},
                                        {"trigger", "at_ms = 8000"}, {"detail", "SIGKILL to pid 100"}});
  CheckResult c = all.judge("job_succeeded");
  EXPECT_FALSE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("no agent's last incarnation exited 0"), std::string::npos) << c.detail;
  EXPECT_TRUE(all.judge("job_succeeded", {{"expect_failure", true}}).passed);
  // A leave struck agent1 (incarnation 1) at 7 s, and it hung until the run stopped it.
  Judged hung = good();
  hung.records.nodes[2].data["stopped_by_run"] = true;
  hung.records.nodes[2].data["exit"] = {{"signal", "SIGKILL"}};
  hung.records.fault_timeline.push_back({{"kind", "leave"}, {"target", "agent1"}, {"line", 32}, {"at_ms", 7000.0}, {"fired", true},
                                         {"trigger", "at_ms = 7000"}, {"detail", "SIGTERM to pid 300"}});
  c = hung.judge("job_succeeded");
  EXPECT_FALSE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("agent1 (incarnation 1): still running at the job's timeout"), std::string::npos) << c.detail;
  // Every agent exited 0, but the run hit its time limit: not completed.
  Judged limit = good();
  limit.records.outcome = "time_limit";
  c = limit.judge("job_succeeded");
  EXPECT_FALSE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("the job did not complete"), std::string::npos) << c.detail;
}

// What an agent left alive below it when it exited (its guard's leftovers) is the job's orphan;
// below an agent a signal ended (it could not clean up) it is named, not counted.
TEST(JobJudge, NoOrphansCountsWhatAnAgentLeftBehindWhenItExited) {
  Judged left = good();
  left.records.job["orphans"] = {{{"pid", 4243}, {"cmdline", "python3 ddp_job.py"}, {"agent", 1}, {"incarnation", 1}}};
  CheckResult c = left.judge("no_orphans");
  EXPECT_FALSE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("pid 4243: python3 ddp_job.py (left behind by agent1 (incarnation 1) when it exited; killed by its guard)"),
            std::string::npos)
      << c.detail;
  Judged killed = good();
  killed.records.job["orphans"] = {{{"pid", 4244}, {"cmdline", "python3 ddp_job.py"}, {"agent", 1}, {"incarnation", 0}}};
  c = killed.judge("no_orphans");
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("pid 4244: python3 ddp_job.py (below agent1, which SIGKILL ended)"), std::string::npos) << c.detail;
  Judged bad = good();
  bad.records.job["orphans"] = {{{"pid", 1}, {"cmdline", "x"}, {"agent", "agent1"}}};
  EXPECT_THROW(bad.judge("no_orphans"), Error);
}

// The recovery from a fault is a round numbered above the newest complete when it struck; a
// fault before the first round is not judged; a store-layer fault that was not struck is not
// either, and one with probability < 1 is said to maybe not have hit.
TEST(JobJudge, ReformedWithinMeasuresFromTheFaultToTheNextRoundItCaused) {
  Judged early = good();
  early.records.fault_timeline.push_back({{"kind", "kill"}, {"target", "agent0:1"}, {"line", 40}, {"at_ms", 500.0}, {"fired", true},
                                          {"trigger", "at_ms = 500"}, {"detail", "SIGKILL to pid 102"}});
  CheckResult c = early.judge("reformed_within", {{"ms", 2000}});
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("kill of agent0:1 (line 40) at 500 ms: not judged, struck before the first round formed"),
            std::string::npos)
      << c.detail;
  // Round 1 completed at 2 s, before the crash at 3 s; a second record of round 1 at 3.2 s is not
  // a re-forming: round 2 at 5 s is.
  Judged stale = good();
  stale.records.job["rounds"] = {{{"round", 0}, {"at_ms", 1000.0}, {"participants", {"agent0", "agent1"}}},
                                 {{"round", 1}, {"at_ms", 2000.0}, {"participants", {"agent0", "agent1"}}},
                                 {{"round", 1}, {"at_ms", 3200.0}, {"participants", {"agent0", "agent1"}}},
                                 {{"round", 2}, {"at_ms", 5000.0}, {"participants", {"agent0", "agent1"}}},
                                 {{"round", 3}, {"at_ms", 6800.0}, {"participants", {"agent0", "agent1"}}}};
  c = stale.judge("reformed_within", {{"ms", 1000}});
  EXPECT_FALSE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("crash of agent1 (line 14) at 3000 ms: round 2 formed 2000 ms later, more than 1000 ms (round 1 was the "
                          "newest when it struck)"),
            std::string::npos)
      << c.detail;
  Judged layer = good();
  layer.records.fault_timeline.push_back({{"kind", "store_drop"}, {"target", "store"}, {"line", 50}, {"at_ms", 8000.0},
                                          {"fired", true}, {"trigger", "at_ms = 8000"},
                                          {"detail", "not struck: the store's fault layer is dagsim store's, and this store is an etcd"}});
  c = layer.judge("reformed_within", {{"ms", 2000}});
  EXPECT_TRUE(c.passed) << c.detail;
  EXPECT_EQ(c.detail.find("store_drop"), std::string::npos) << c.detail;
  layer.records.fault_timeline.back()["detail"] = "the store's fault layer: drop of every query with probability 0.5; 1 rule(s)";
  c = layer.judge("reformed_within", {{"ms", 2000}});
  EXPECT_FALSE(c.passed) << c.detail;
  EXPECT_NE(c.detail.find("store_drop of store (line 50) at 8000 ms: no round formed after it"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("may not have hit any query"), std::string::npos) << c.detail;
  // ms is 1..10^9, as the loader reads it.
  c = good().judge("reformed_within", {{"ms", 0}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("ms: expected a whole number >= 1"), std::string::npos) << c.detail;
  c = good().judge("reformed_within", {{"ms", 2000000000}});
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.detail.find("from 1 to 1000000000"), std::string::npos) << c.detail;
}

}  // namespace
}  // namespace dagsim::scenarios
