// record_job with rdzv_backend = "etcd" (job_etcd.cc): the run starts etcd, `dagsim launch` agents
// (shell workers, no torch) rendezvous on it, store faults strike etcd, and the store's record is
// written from etcd's revisions and judged. Skipped where /usr/bin/etcd is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/base/error.h"
#include "scenarios/job/job_run.h"
#include "scenarios/job/job_runner.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

struct TempDir {
  std::string path;
  TempDir() {
    std::string p = (fs::temp_directory_path() / "job-etcd-test-XXXXXX").string();
    path = ::mkdtemp(p.data());
  }
  ~TempDir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(path, ec);
  }
};

std::string script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/worker.sh";
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

constexpr const char* kSteps = "i=0\nwhile [ $i -lt 30 ]; do i=$((i+1)); echo \"step $i rank $RANK\"; sleep 0.1; done\n";

JobSpec etcd_spec(const std::string& worker) {
  JobSpec s;
  s.command = {worker};
  s.no_python = true;
  s.agents = 2;
  s.min_nodes = 2;
  s.max_nodes = 2;
  s.nproc_per_node = 1;
  s.rdzv_backend = JobRdzvBackend::etcd;
  s.rdzv_conf = {{"last_call_timeout", "1"}, {"join_timeout", "60"}};
  s.monitor_interval = milliseconds(200);
  s.timeout = std::chrono::seconds(60);
  return s;
}

Scenario scenario_of(const JobSpec& spec) {
  Scenario s;
  s.name = "etcdjob";
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

// The store's record: every line, parsed.
std::vector<nlohmann::json> record_lines(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/store/store.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// What every etcd run shows: the agents' argv names etcd, the record was written from etcd and
// judged without error, and nothing of the run (etcd included) is left.
void expect_etcd_run(const RunRecords& r, const std::string& run_dir) {
  EXPECT_EQ(r.job["rdzv_backend"], "etcd");
  const NodeRecord* first = record_of(r, 0, 0);
  ASSERT_NE(first, nullptr);
  const std::string argv = first->data["argv"].dump();
  EXPECT_NE(argv.find("\"--rdzv_backend\",\"etcd\""), std::string::npos) << argv;
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();
  EXPECT_EQ(r.job["store"]["format"], "dagsim") << r.job["store"].dump();
  EXPECT_TRUE(r.job["store"]["violations"].empty()) << r.job["store"]["violations"].dump(1);
  EXPECT_TRUE(r.job["orphans"].empty()) << r.job["orphans"].dump();
  const std::vector<nlohmann::json> lines = record_lines(run_dir);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.front()["op"], "start");
  EXPECT_EQ(lines.back()["op"], "stop");
  size_t state_sets = 0;
  for (const nlohmann::json& l : lines) {
    if (l["op"] == "set" && l["key"].get<std::string>().find("torch.rendezvous.job") != std::string::npos) ++state_sets;
  }
  EXPECT_GE(state_sets, 2u);
  // etcd is gone (not even a zombie: the run reaped it).
  const pid_t etcd = lines.front()["pid"].get<pid_t>();
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(etcd))) << "etcd pid " << etcd;
  EXPECT_FALSE(fs::exists(run_dir + "/store/etcd.data"));  // its 64 MB log: removed once read
  EXPECT_TRUE(fs::exists(run_dir + "/store/etcd.log"));
}

TEST(JobEtcd, FormsAndAWorkerKillRestartsTheGroup) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t;
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  JobFault kill;
  kill.kind = JobFault::Kind::kill;
  kill.target = {JobTarget::Kind::worker, 1, 0};
  kill.when.kind = JobTrigger::Kind::output;
  kill.when.pattern = "^step 5 ";
  kill.when.from = JobTarget{JobTarget::Kind::worker, 1, 0};
  spec.faults.push_back(kill);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  for (uint32_t a = 0; a < 2; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->data["exit"], nlohmann::json({{"code", 0}})) << n->data.dump();
  }
  EXPECT_GE(record_of(r, 1, 0)->data["restarts"].get<uint32_t>(), 1u);
  ASSERT_GE(r.job["rounds"].size(), 2u) << r.job.dump();
  EXPECT_EQ(r.job["rounds"][0]["participants"], nlohmann::json({"agent0", "agent1"})) << r.job["rounds"];
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, AStorePauseOnARoundIsSurvived) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t;
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  JobFault pause;  // a round trigger: read from the record written from etcd
  pause.kind = JobFault::Kind::store_pause;
  pause.target.kind = JobTarget::Kind::store;
  pause.when.kind = JobTrigger::Kind::round;
  pause.when.round = 0;
  pause.when.after = milliseconds(300);
  pause.duration = milliseconds(1500);
  spec.faults.push_back(pause);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n", r.fault_timeline.dump(1).c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  EXPECT_TRUE(r.fault_timeline[0].contains("until_ms"));
  for (uint32_t a = 0; a < 2; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->data["exit"], nlohmann::json({{"code", 0}})) << n->data.dump();
  }
  std::ifstream in(t.path + "/run/store/job.json");
  const nlohmann::json job = nlohmann::json::parse(in);
  ASSERT_EQ(job["faults"].size(), 2u);
  EXPECT_EQ(job["faults"][0]["kind"], "store_pause");
  EXPECT_EQ(job["faults"][1]["kind"], "store_resume");
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, AStoreRestartKeepsItsData) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t;
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  JobFault restart;
  restart.kind = JobFault::Kind::store_restart;
  restart.target.kind = JobTarget::Kind::store;
  restart.when.kind = JobTrigger::Kind::output;
  restart.when.pattern = "^step 3 ";
  restart.restart_after = milliseconds(500);
  spec.faults.push_back(restart);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n", r.fault_timeline.dump(1).c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  const std::string detail = r.fault_timeline[0]["detail"].get<std::string>();
  EXPECT_NE(detail.find("SIGKILL to etcd"), std::string::npos) << detail;
  EXPECT_NE(detail.find("started again"), std::string::npos) << detail;
  // The data kept: etcd's revisions go on rising across the restart.
  uint64_t highest = 0;
  for (const nlohmann::json& l : record_lines(t.path + "/run")) {
    if (!l.contains("etcd_revision")) continue;
    EXPECT_GE(l["etcd_revision"].get<uint64_t>(), highest) << l.dump();  // a txn writes keys at one revision
    highest = l["etcd_revision"].get<uint64_t>();
  }
  for (uint32_t a = 0; a < 2; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->data["exit"], nlohmann::json({{"code", 0}})) << n->data.dump();
  }
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, AStoreRestartWithoutItsDataStartsFromRevisionOne) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t;
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  spec.timeout = std::chrono::seconds(30);
  JobFault restart;
  restart.kind = JobFault::Kind::store_restart;
  restart.target.kind = JobTarget::Kind::store;
  restart.when.kind = JobTrigger::Kind::round;
  restart.when.round = 0;
  restart.when.after = milliseconds(300);
  restart.restart_after = milliseconds(300);
  restart.keep_data = false;
  spec.faults.push_back(restart);
  const RunRecords r = run(scenario_of(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["store"]["violations"].dump(1).c_str());
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  const std::string detail = r.fault_timeline[0]["detail"].get<std::string>();
  EXPECT_NE(detail.find("its data dir wiped (keep_data = false)"), std::string::npos) << detail;
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();
  // The revisions start again: a later line reads a smaller revision than an earlier one.
  uint64_t highest = 0;
  bool restarted = false;
  for (const nlohmann::json& l : record_lines(t.path + "/run")) {
    if (!l.contains("etcd_revision")) continue;
    const uint64_t rev = l["etcd_revision"].get<uint64_t>();
    restarted = restarted || rev < highest;
    highest = std::max(highest, rev);
  }
  EXPECT_TRUE(restarted);
  EXPECT_TRUE(r.job["orphans"].empty()) << r.job["orphans"].dump();
}

TEST(JobEtcd, AgentsInNamespacesReachEtcdAtTheBridge) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  if (::geteuid() != 0 || ::access("/usr/sbin/ip", X_OK) != 0) GTEST_SKIP() << "needs root and ip";
  TempDir t;
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  spec.namespaces = true;
  RunRecords r;
  try {
    r = run(scenario_of(spec), t.path);
  } catch (const Error& e) {
    if (std::string(e.what()).find("namespaces:") != std::string::npos) GTEST_SKIP() << e.what();
    throw;
  }
  EXPECT_EQ(r.outcome, "finished");
  const std::string argv = record_of(r, 0, 0)->data["argv"].dump();
  EXPECT_EQ(argv.find("127.0.0.1:"), std::string::npos) << argv;  // the bridge's address, not loopback
  ASSERT_GE(r.job["rounds"].size(), 1u) << r.job.dump();
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, TorchrunOnEtcdV2WithAWorkerKill) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  if (std::system("/usr/bin/python3 -c 'import torch, etcd' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with torch and python-etcd (Debian's python3-torch, python3-etcd)";
  }
  TempDir t;
  JobSpec spec = etcd_spec(script(t.path, kSteps));
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
  const std::string argv = record_of(r, 0, 0)->data["argv"].dump();
  EXPECT_NE(argv.find("\"--rdzv_backend\",\"etcd-v2\""), std::string::npos) << argv;
  EXPECT_GE(record_of(r, 0, 0)->data["restarts"].get<uint32_t>(), 1u) << record_of(r, 0, 0)->data.dump();
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();
  EXPECT_EQ(r.job["store"]["format"], "pytorch") << r.job["store"].dump();
  EXPECT_TRUE(r.job["store"]["violations"].empty()) << r.job["store"]["violations"].dump(1);
  ASSERT_GE(r.job["rounds"].size(), 2u) << r.job.dump();
  EXPECT_TRUE(r.job["orphans"].empty()) << r.job["orphans"].dump();
  const std::vector<nlohmann::json> lines = record_lines(t.path + "/run");
  ASSERT_FALSE(lines.empty());
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(lines.front()["pid"].get<pid_t>())));
}

}  // namespace
}  // namespace dagsim::scenarios
