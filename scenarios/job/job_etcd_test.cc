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
#include "scenarios/job/job_test_util.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using namespace job_test;

constexpr const char* kSteps = "i=0\nwhile [ $i -lt 30 ]; do i=$((i+1)); echo \"step $i rank $RANK\"; sleep 0.1; done\n";

JobSpec etcd_spec(const std::string& worker) {
  JobSpec s = base_spec(worker, std::chrono::seconds(60));
  s.rdzv_backend = JobRdzvBackend::etcd;
  return s;
}

Scenario etcd_scenario(const JobSpec& spec) { return scenario_of(spec, "etcdjob"); }

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
  TempDir t("job-etcd-test");
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  spec.faults.push_back(worker_kill_on_output(1, "^step 5 "));
  const RunRecords r = run(etcd_scenario(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  ASSERT_NO_FATAL_FAILURE(expect_agents_exited_0(r, 2));
  EXPECT_GE(record_of(r, 1, 0)->data["restarts"].get<uint32_t>(), 1u);
  ASSERT_GE(r.job["rounds"].size(), 2u) << r.job.dump();
  EXPECT_EQ(r.job["rounds"][0]["participants"], nlohmann::json({"agent0", "agent1"})) << r.job["rounds"];
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, AStorePauseOnARoundIsSurvived) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t("job-etcd-test");
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  // A round trigger: read from the record written from etcd.
  JobFault pause = store_fault(JobFault::Kind::store_pause, on_round(0, milliseconds(300)));
  pause.duration = milliseconds(1500);
  spec.faults.push_back(pause);
  const RunRecords r = run(etcd_scenario(spec), t.path);
  std::fprintf(stderr, "%s\n", r.fault_timeline.dump(1).c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  EXPECT_TRUE(r.fault_timeline[0].contains("until_ms"));
  ASSERT_NO_FATAL_FAILURE(expect_agents_exited_0(r, 2));
  ASSERT_NO_FATAL_FAILURE(expect_store_paused_and_resumed(t.path + "/run"));
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, AStoreRestartKeepsItsData) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t("job-etcd-test");
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  JobFault restart = store_fault(JobFault::Kind::store_restart, on_output("^step 3 "));
  restart.restart_after = milliseconds(500);
  spec.faults.push_back(restart);
  const RunRecords r = run(etcd_scenario(spec), t.path);
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
  ASSERT_NO_FATAL_FAILURE(expect_agents_exited_0(r, 2));
  expect_etcd_run(r, t.path + "/run");
}

TEST(JobEtcd, AStoreRestartWithoutItsDataStartsFromRevisionOne) {
  if (const auto why = job::etcd_unavailable()) GTEST_SKIP() << *why;
  TempDir t("job-etcd-test");
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  spec.timeout = std::chrono::seconds(30);
  JobFault restart = store_fault(JobFault::Kind::store_restart, on_round(0, milliseconds(300)));
  restart.restart_after = milliseconds(300);
  restart.keep_data = false;
  spec.faults.push_back(restart);
  const RunRecords r = run(etcd_scenario(spec), t.path);
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
  TempDir t("job-etcd-test");
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  spec.namespaces = true;
  RunRecords r;
  try {
    r = run(etcd_scenario(spec), t.path);
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
  TempDir t("job-etcd-test");
  JobSpec spec = etcd_spec(script(t.path, kSteps));
  spec.launcher = JobLauncher::torchrun;
  spec.faults.push_back(worker_kill_on_output(0, "^step 4 "));
  const RunRecords r = run(etcd_scenario(spec), t.path);
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  ASSERT_NO_FATAL_FAILURE(expect_agents_exited_0(r, 2));
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
