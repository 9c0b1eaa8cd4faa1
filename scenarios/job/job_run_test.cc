// record_job on real processes: `dagsim launch` agents whose workers are shell scripts (no torch),
// faults struck by signals, triggers on output and rounds, orphans, the time limit, namespaces.
#include "scenarios/job/job_run.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "scenarios/job/job_test_util.h"
#include "scenarios/job/job_triggers.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using namespace job_test;

constexpr std::chrono::seconds kTimeout(50);

constexpr const char* kSteps = "i=0\nwhile [ $i -lt 25 ]; do i=$((i+1)); echo \"step $i rank $RANK seed $DAGSIM_SEED\"; sleep 0.1; done\n";

TEST(JobTriggers, GlobAndPrefix) {
  EXPECT_TRUE(job::glob_matches("ckpt/*", "/ckpt/step100"));
  EXPECT_TRUE(job::glob_matches("ck?t*", "ckpt"));
  EXPECT_FALSE(job::glob_matches("ckpt/*/done", "ckpt/1"));
  const job::AgentLine w = job::split_agent_line("[default1]:step 3");
  ASSERT_TRUE(w.local_rank.has_value());
  EXPECT_EQ(*w.local_rank, 1u);
  EXPECT_EQ(w.text, "step 3");
  EXPECT_FALSE(job::split_agent_line("[launch] round 0").local_rank.has_value());
}

TEST(JobRun, WorkerKilledOnItsOutputAndTheGroupRestarts) {
  TempDir t("job-run-test");
  JobSpec spec = base_spec(script(t.path, kSteps), kTimeout);
  JobFault kill = worker_kill_on_output(1, "^step 5 ");
  kill.line = 10;
  spec.faults.push_back(kill);
  JobFault pause;  // on the first round formed
  pause.kind = JobFault::Kind::pause;
  pause.target = {JobTarget::Kind::agent, 0, 0};
  pause.when = on_round(0);
  pause.duration = milliseconds(300);
  pause.line = 11;
  spec.faults.push_back(pause);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.node_names.size(), 2u);
  EXPECT_EQ(r.node_names[1], "agent1");
  ASSERT_EQ(r.fault_timeline.size(), 2u);
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  EXPECT_EQ(r.fault_timeline[0]["target"], "agent1:0");
  EXPECT_NE(r.fault_timeline[0]["detail"].get<std::string>().find("SIGKILL to worker pid"), std::string::npos);
  EXPECT_TRUE(r.fault_timeline[1]["fired"].get<bool>());
  EXPECT_TRUE(r.fault_timeline[1].contains("until_ms"));
  ASSERT_NO_FATAL_FAILURE(expect_agents_exited_0(r, 2));
  for (uint32_t a = 0; a < 2; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    EXPECT_GE(n->data["workers"].size(), 2u) << n->data.dump();  // the first group's and the restarted one's
  }
  EXPECT_GE(record_of(r, 1, 0)->data["restarts"].get<uint32_t>(), 1u);
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();
  ASSERT_GE(r.job["rounds"].size(), 2u);
  EXPECT_EQ(r.job["rounds"][0]["participants"], nlohmann::json({"agent0", "agent1"})) << r.job["rounds"];
  EXPECT_TRUE(r.job["orphans"].empty());
  EXPECT_TRUE(fs::exists(t.path + "/run/records/run.json"));
  EXPECT_TRUE(fs::exists(t.path + "/run/store/job.json"));
}

TEST(JobRun, CrashAndRestartIsANewIncarnation) {
  TempDir t("job-run-test");
  // Long enough that agent0's monitor sees the new incarnation waiting and re-forms with it (a
  // worker group that ended first would wait at the exit barrier for the dead incarnation's).
  JobSpec spec = base_spec(script(t.path,
                                  "i=0\nwhile [ $i -lt 60 ]; do i=$((i+1)); echo \"step $i \"; sleep 0.1; done\n"),
                           kTimeout);
  spec.min_nodes = 1;
  spec.max_nodes = 3;  // room to spare: the new incarnation waits (a full round makes it a spare)
  JobFault crash;
  crash.kind = JobFault::Kind::crash;
  crash.target = {JobTarget::Kind::agent, 1, 0};
  crash.when = on_output("step 3 ");
  crash.restart_after = milliseconds(300);
  spec.faults.push_back(crash);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n", r.fault_timeline.dump(1).c_str());
  EXPECT_EQ(r.outcome, "finished");
  const NodeRecord* first = record_of(r, 1, 0);
  const NodeRecord* second = record_of(r, 1, 1);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->data["exit"], nlohmann::json({{"signal", "SIGKILL"}}));
  EXPECT_EQ(second->data["exit"], nlohmann::json({{"code", 0}})) << second->data.dump();
  EXPECT_GT(second->data["started_ms"].get<double>(), first->data["ended_ms"].get<double>());
  ASSERT_NO_FATAL_FAILURE(expect_no_orphans_but_of_killed_agents(r));
}

TEST(JobRun, LateJoinerOnARoundAndAStorePause) {
  TempDir t("job-run-test");
  JobSpec spec = base_spec(script(t.path,
                                  "i=0\nwhile [ $i -lt 40 ]; do i=$((i+1)); echo \"step $i \"; sleep 0.1; done\n"),
                           kTimeout);
  spec.max_nodes = 3;
  JobSpec::LateJoin late;
  late.agent = 2;
  late.when = on_round(0, milliseconds(300));
  spec.late_joins.push_back(late);
  JobFault pause = store_fault(JobFault::Kind::store_pause, on_output("step 2 "));
  pause.duration = milliseconds(500);
  spec.faults.push_back(pause);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.node_names.size(), 3u);
  const NodeRecord* joiner = record_of(r, 2, 0);
  ASSERT_NE(joiner, nullptr);
  EXPECT_EQ(joiner->data["exit"], nlohmann::json({{"code", 0}})) << joiner->data.dump();
  EXPECT_EQ(r.fault_timeline[0]["target"], "store");
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();
  EXPECT_GE(r.job["rounds"].size(), 2u);
  ASSERT_NO_FATAL_FAILURE(expect_store_paused_and_resumed(t.path + "/run"));
  EXPECT_TRUE(r.job["orphans"].empty());
}

TEST(JobRun, TorchrunAgentsWithAWorkerKill) {
  if (::access("/usr/bin/python3", X_OK) != 0 || std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with torch";
  }
  TempDir t("job-run-test");
  JobSpec spec = base_spec(script(t.path, kSteps), kTimeout);
  spec.launcher = JobLauncher::torchrun;
  spec.faults.push_back(worker_kill_on_output(0, "^step 4 "));
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  ASSERT_NO_FATAL_FAILURE(expect_agents_exited_0(r, 2));
  EXPECT_GE(record_of(r, 0, 0)->data["restarts"].get<uint32_t>(), 1u) << record_of(r, 0, 0)->data.dump();
  EXPECT_EQ(r.job["store"]["format"], "pytorch") << r.job["store"].dump();
  EXPECT_TRUE(r.job["orphans"].empty());
}

TEST(JobRun, TimeLimitStopsTheAgentsAndCommandChecksRun) {
  TempDir t("job-run-test");
  JobSpec spec = base_spec(script(t.path, "echo started; sleep 1000\n"), kTimeout);
  spec.timeout = std::chrono::seconds(4);
  Scenario s = scenario_of(spec);
  CheckSpec c;
  c.kind = "command";
  c.params = {{"run", "echo dir=$JOB_DIR; ls \"$JOB_DIR/store\"; exit 3"}};
  s.checks.push_back(c);
  const RunRecords r = run(s, t.path);
  EXPECT_EQ(r.outcome, "time_limit");
  for (const NodeRecord& n : r.nodes) EXPECT_TRUE(n.data["stopped_by_run"].get<bool>()) << n.data.dump();
  ASSERT_EQ(r.job["commands"].size(), 1u);
  EXPECT_EQ(r.job["commands"][0]["exit"], 3);
  EXPECT_NE(r.job["commands"][0]["output"].get<std::string>().find("store.jsonl"), std::string::npos) << r.job["commands"];
  EXPECT_TRUE(r.job["orphans"].empty()) << r.job["orphans"];
}

TEST(JobRun, ADetachedGrandchildDoesNotOutliveTheRun) {
  TempDir t("job-run-test");
  // A worker that starts `sleep 1000` in a session of its own and says where.
  JobSpec spec = base_spec(script(t.path,
                                  "setsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho $! > \"$DAGSIM_JOB_DIR/sleeper.$RANK\"\nsleep 1\n"),
                           kTimeout);
  const RunRecords r = run(scenario_of(spec), t.path);
  EXPECT_EQ(r.outcome, "finished");
  std::fprintf(stderr, "orphans: %s\n", r.job["orphans"].dump().c_str());
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(t.path + "/run/sleeper." + std::to_string(rank));
    pid_t pid = 0;
    ASSERT_TRUE(in >> pid);
    // Gone (the process layer's guard, or the run's orphan sweep, killed it), or a zombie at most.
    const bool alive = ::kill(pid, 0) == 0 && fs::exists("/proc/" + std::to_string(pid) + "/cmdline") &&
                       std::ifstream("/proc/" + std::to_string(pid) + "/cmdline").peek() != EOF;
    EXPECT_FALSE(alive) << pid;
  }
}

TEST(JobRun, PartitionInNamespaces) {
  if (::geteuid() != 0 || ::access("/usr/sbin/ip", X_OK) != 0) GTEST_SKIP() << "needs root and ip";
  TempDir t("job-run-test");
  JobSpec spec = base_spec(script(t.path, kSteps), kTimeout);
  spec.namespaces = true;
  JobFault part;
  part.kind = JobFault::Kind::partition;
  part.groups = {{0}, {1}};
  part.when = at_time(milliseconds(500));
  part.duration = milliseconds(500);
  spec.faults.push_back(part);
  RunRecords r;
  try {
    r = run(scenario_of(spec), t.path);
  } catch (const Error& e) {
    if (std::string(e.what()).find("namespaces:") != std::string::npos) GTEST_SKIP() << e.what();
    throw;
  }
  std::fprintf(stderr, "%s\n", r.fault_timeline.dump(1).c_str());
  EXPECT_EQ(r.outcome, "finished");
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  EXPECT_EQ(r.fault_timeline[0]["target"], "agent0|agent1");
  EXPECT_TRUE(r.job["orphans"].empty());
}

}  // namespace
}  // namespace dagsim::scenarios
