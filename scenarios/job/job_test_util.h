// Header-only helpers for the tests that run record_job on real processes (job_run_test,
// job_etcd_test, job_store_faults_test): a scratch folder, shell-script workers, a tiny job
// Scenario built as data, the run itself, and readers of what it recorded. DAGSIM_BINARY is the
// test target's compile definition (dagsim_binary_test).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenarios/job/job_run.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios::job_test {

// A temporary folder, removed at the end unless the test failed or KEEP is set in the environment.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix) {
    std::string p = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path = ::mkdtemp(p.data());
  }
  ~TempDir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure() && !std::getenv("KEEP")) std::filesystem::remove_all(path, ec);
  }
};

// A worker: an executable shell script `dir/name` running `body`.
inline std::string script(const std::string& dir, const std::string& body, const std::string& name = "worker.sh") {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

// Two `dagsim launch` agents of one worker each running `worker` (no python), a quick rendezvous.
inline JobSpec base_spec(const std::string& worker, std::chrono::seconds timeout) {
  JobSpec s;
  s.command = {worker};
  s.no_python = true;
  s.agents = 2;
  s.min_nodes = 2;
  s.max_nodes = 2;
  s.nproc_per_node = 1;
  s.rdzv_conf = {{"last_call_timeout", "1"}, {"join_timeout", "60"}};
  s.monitor_interval = std::chrono::milliseconds(200);
  s.timeout = timeout;
  return s;
}

// The job as a Scenario named `name`, its nodes the agents "agent0", "agent1", ...
inline Scenario scenario_of(const JobSpec& spec, const std::string& name = "jobtest") {
  Scenario s;
  s.name = name;
  s.cluster.nodes = spec.total_agents();
  s.cluster.name_prefix = "agent";
  s.workload = WorkloadSpec("job", spec);
  return s;
}

// record_job with seed 7 in `dir`/run, its progress lines on stderr.
inline RunRecords run(const Scenario& s, const std::string& dir) {
  JobRunOptions o;
  o.seed = 7;
  o.dagsim_binary = DAGSIM_BINARY;
  o.run_dir = dir + "/run";
  o.progress = [](std::string_view line) { std::fprintf(stderr, "  | %.*s\n", static_cast<int>(line.size()), line.data()); };
  return record_job(s, o);
}

// Triggers: at `at` after the run's start; when a line matching `pattern` is printed (by anyone);
// `after` past round `round`'s forming.
inline JobTrigger at_time(Duration at) {
  JobTrigger t;
  t.kind = JobTrigger::Kind::at;
  t.at = at;
  return t;
}

inline JobTrigger on_output(const std::string& pattern) {
  JobTrigger t;
  t.kind = JobTrigger::Kind::output;
  t.pattern = pattern;
  return t;
}

inline JobTrigger on_round(uint64_t round, Duration after = Duration(0)) {
  JobTrigger t;
  t.kind = JobTrigger::Kind::round;
  t.round = round;
  t.after = after;
  return t;
}

// A fault of `kind` on the store, struck `when`.
inline JobFault store_fault(JobFault::Kind kind, const JobTrigger& when) {
  JobFault f;
  f.kind = kind;
  f.target.kind = JobTarget::Kind::store;
  f.when = when;
  return f;
}

// A kill of agent `agent`'s worker 0 when that worker prints a line matching `pattern`.
inline JobFault worker_kill_on_output(uint32_t agent, const std::string& pattern) {
  JobFault kill;
  kill.kind = JobFault::Kind::kill;
  kill.target = {JobTarget::Kind::worker, agent, 0};
  kill.when = on_output(pattern);
  kill.when.from = JobTarget{JobTarget::Kind::worker, agent, 0};
  return kill;
}

inline const NodeRecord* record_of(const RunRecords& r, uint32_t node, uint32_t inc) {
  for (const NodeRecord& n : r.nodes) {
    if (n.node == node && n.incarnation == inc) return &n;
  }
  return nullptr;
}

// Each of the first `agents` agents' first incarnation is recorded and exited 0. Fatal failures
// stay in here: call it through ASSERT_NO_FATAL_FAILURE.
inline void expect_agents_exited_0(const RunRecords& r, uint32_t agents) {
  for (uint32_t a = 0; a < agents; ++a) {
    const NodeRecord* n = record_of(r, a, 0);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->data["exit"], nlohmann::json({{"code", 0}})) << n->data.dump();
  }
}

// Nothing was left behind by an agent that exited on its own: any orphan recorded belongs to an
// incarnation a signal ended (a SIGKILLed agent leaves what ran below it to its guard, which the
// judge does not count), and every one names its agent and incarnation.
inline void expect_no_orphans_but_of_killed_agents(const RunRecords& r) {
  for (const nlohmann::json& o : r.job["orphans"]) {
    ASSERT_TRUE(o.contains("agent") && o.contains("incarnation")) << "an orphan of no agent: " << o.dump();
    const NodeRecord* n = record_of(r, o["agent"].get<uint32_t>(), o["incarnation"].get<uint32_t>());
    ASSERT_NE(n, nullptr) << o.dump();
    EXPECT_TRUE(n->data["exit"].contains("signal")) << "left behind by an agent that exited: " << o.dump() << " " << n->data.dump();
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The store's record (`run_dir`/store/store.jsonl): every line, parsed.
inline std::vector<nlohmann::json> record_lines(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/store/store.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The run's store/job.json lists the store's pause and then its resume. Fatal failures stay in
// here: call it through ASSERT_NO_FATAL_FAILURE.
inline void expect_store_paused_and_resumed(const std::string& run_dir) {
  std::ifstream in(run_dir + "/store/job.json");
  const nlohmann::json job = nlohmann::json::parse(in);
  ASSERT_EQ(job["faults"].size(), 2u);
  EXPECT_EQ(job["faults"][0]["kind"], "store_pause");
  EXPECT_EQ(job["faults"][1]["kind"], "store_resume");
}

}  // namespace dagsim::scenarios::job_test
