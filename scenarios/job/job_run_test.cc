// record_job on real processes: `dagsim launch` agents whose workers are shell scripts (no torch),
// faults struck by signals, triggers on output and rounds, orphans, the time limit, namespaces.
#include "scenarios/job/job_run.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "scenarios/job/job_triggers.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

struct TempDir {
  std::string path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "job-run-test-XXXXXX").string();
    path = ::mkdtemp(p.data());
  }
  ~TempDir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(path, ec);
  }
};

// A worker: a shell script, printing "step I" every 100 ms for `steps` steps.
std::string script(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

JobSpec base_spec(const std::string& worker) {
  JobSpec s;
  s.command = {worker};
  s.no_python = true;
  s.agents = 2;
  s.min_nodes = 2;
  s.max_nodes = 2;
  s.nproc_per_node = 1;
  s.rdzv_conf = {{"last_call_timeout", "1"}, {"join_timeout", "60"}};
  s.monitor_interval = milliseconds(200);
  s.timeout = std::chrono::seconds(50);
  return s;
}

Scenario scenario_of(const JobSpec& spec) {
  Scenario s;
  s.name = "jobtest";
  s.cluster.nodes = spec.total_agents();
  s.cluster.name_prefix = "agent";
  s.workload = WorkloadSpec("job", spec);
  return s;
}

RunRecords run(const Scenario& s, const std::string& dir) {
  JobRunOptions o;
  o.seed = 7;
  o.dagsim_binary = DAGSIM_BINARY;
  o.run_dir = dir + "/run";
  o.progress = [](std::string_view line) { std::fprintf(stderr, "  | %.*s\n", static_cast<int>(line.size()), line.data()); };
  return record_job(s, o);
}

const NodeRecord* record_of(const RunRecords& r, uint32_t node, uint32_t inc) {
  for (const NodeRecord& n : r.nodes) {
    if (n.node == node && n.incarnation == inc) return &n;
  }
  return nullptr;
}

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
  TempDir t;
  JobSpec spec = base_spec(script(t.path, "worker.sh", kSteps));
  JobFault kill;
  kill.kind = JobFault::Kind::kill;
  kill.target = {JobTarget::Kind::worker, 1, 0};
  kill.when.kind = JobTrigger::Kind::output;
  kill.when.pattern = "^step 5 ";
  kill.when.from = JobTarget{JobTarget::Kind::worker, 1, 0};
  kill.line = 10;
  spec.faults.push_back(kill);
  JobFault pause;  // on the first round formed
  pause.kind = JobFault::Kind::pause;
  pause.target = {JobTarget::Kind::agent, 0, 0};
  pause.when.kind = JobTrigger::Kind::round;
  pause.when.round = 0;
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
  for (uint32_t a = 0; a < 2; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->data["exit"], nlohmann::json({{"code", 0}})) << n->data.dump();
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
  TempDir t;
  // Long enough that agent0's monitor sees the new incarnation waiting and re-forms with it (a
  // worker group that ended first would wait at the exit barrier for the dead incarnation's).
  JobSpec spec = base_spec(script(t.path, "worker.sh",
                                  "i=0\nwhile [ $i -lt 60 ]; do i=$((i+1)); echo \"step $i \"; sleep 0.1; done\n"));
  spec.min_nodes = 1;
  spec.max_nodes = 3;  // room to spare: the new incarnation waits (a full round makes it a spare)
  JobFault crash;
  crash.kind = JobFault::Kind::crash;
  crash.target = {JobTarget::Kind::agent, 1, 0};
  crash.when.kind = JobTrigger::Kind::output;
  crash.when.pattern = "step 3 ";
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
  EXPECT_TRUE(r.job["orphans"].empty());
}

TEST(JobRun, LateJoinerOnARoundAndAStorePause) {
  TempDir t;
  JobSpec spec = base_spec(script(t.path, "worker.sh",
                                  "i=0\nwhile [ $i -lt 40 ]; do i=$((i+1)); echo \"step $i \"; sleep 0.1; done\n"));
  spec.max_nodes = 3;
  JobSpec::LateJoin late;
  late.agent = 2;
  late.when.kind = JobTrigger::Kind::round;
  late.when.round = 0;
  late.when.after = milliseconds(300);
  spec.late_joins.push_back(late);
  JobFault pause;
  pause.kind = JobFault::Kind::store_pause;
  pause.target.kind = JobTarget::Kind::store;
  pause.when.kind = JobTrigger::Kind::output;
  pause.when.pattern = "step 2 ";
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
  std::ifstream in(t.path + "/run/store/job.json");
  const nlohmann::json job = nlohmann::json::parse(in);
  ASSERT_EQ(job["faults"].size(), 2u);
  EXPECT_EQ(job["faults"][0]["kind"], "store_pause");
  EXPECT_EQ(job["faults"][1]["kind"], "store_resume");
  EXPECT_TRUE(r.job["orphans"].empty());
}

TEST(JobRun, TorchrunAgentsWithAWorkerKill) {
  if (::access("/usr/bin/python3", X_OK) != 0 || std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with torch";
  }
  TempDir t;
  JobSpec spec = base_spec(script(t.path, "worker.sh", kSteps));
  spec.launcher = JobLauncher::torchrun;
  JobFault kill;
  kill.kind = JobFault::Kind::kill;
  kill.target = {JobTarget::Kind::worker, 0, 0};
  kill.when.kind = JobTrigger::Kind::output;
  kill.when.pattern = "^step 4 ";
  kill.when.from = JobTarget{JobTarget::Kind::worker, 0, 0};
  spec.faults.push_back(kill);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  for (uint32_t a = 0; a < 2; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->data["exit"], nlohmann::json({{"code", 0}})) << n->data.dump();
  }
  EXPECT_GE(record_of(r, 0, 0)->data["restarts"].get<uint32_t>(), 1u) << record_of(r, 0, 0)->data.dump();
  EXPECT_EQ(r.job["store"]["format"], "pytorch") << r.job["store"].dump();
  EXPECT_TRUE(r.job["orphans"].empty());
}

TEST(JobRun, TimeLimitStopsTheAgentsAndCommandChecksRun) {
  TempDir t;
  JobSpec spec = base_spec(script(t.path, "worker.sh", "echo started; sleep 1000\n"));
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
  TempDir t;
  // A worker that starts `sleep 1000` in a session of its own and says where.
  JobSpec spec = base_spec(script(t.path, "worker.sh",
                                  "setsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho $! > \"$DAGSIM_JOB_DIR/sleeper.$RANK\"\nsleep 1\n"));
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
  TempDir t;
  JobSpec spec = base_spec(script(t.path, "worker.sh", kSteps));
  spec.namespaces = true;
  JobFault part;
  part.kind = JobFault::Kind::partition;
  part.groups = {{0}, {1}};
  part.when.kind = JobTrigger::Kind::at;
  part.when.at = milliseconds(500);
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
