// The store's fault layer and a store restart that keeps its data, end to end: `dagsim store`
// itself (--restore, with dagsim's TCPStore client: a key written before a SIGKILL is answered
// after a restart that restores, and absent after one that does not), and record_job runs of
// `dagsim launch` agents whose workers are shell scripts (no torch) under store_reset,
// store_delay and store_restart with and without keep_data.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "net/process/process.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/tcp_store_client.h"
#include "scenarios/job/job_run.h"
#include "scenarios/job/job_test_util.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

using namespace job_test;

// `dagsim store ARGS...`, its port read from its first line.
struct Store {
  net::Process process;
  uint16_t port = 0;
  Store(const std::string& dir, const std::string& name, std::vector<std::string> args) {
    net::ProcessSpec spec;
    spec.argv = {DAGSIM_BINARY, "store", "--port", "0"};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.env = net::current_environment();
    spec.fds = {};
    spec.stdout_path = dir + "/" + name + ".port";
    spec.stderr_path = dir + "/" + name + ".log";
    spec.name = name;
    process = net::spawn(spec);
    for (int i = 0; i < 2000 && port == 0 && !process.poll(); ++i) {
      std::ifstream in(spec.stdout_path);
      std::string line;
      if (std::getline(in, line) && in.good() && !line.empty()) port = static_cast<uint16_t>(std::stoul(line));
      if (port == 0) std::this_thread::sleep_for(10ms);
    }
  }
  ~Store() {
    if (process.running()) {
      process.kill();
      process.wait();
    }
  }
};

// Runs `body` with a dagsim TCPStore client of the store on `port`, on a thread of its own.
void with_client(uint16_t port, const std::function<void(net::tcpstore::TcpStoreClient&)>& body) {
  std::thread thread([&] {
    net::tcpstore::StoreHost host("test", [](const std::string& line) { ADD_FAILURE() << line; });
    net::tcpstore::TcpStoreClientOptions o;
    o.port = port;
    net::tcpstore::TcpStoreClient c(host.io(), o);
    c.set_timeout(5s);
    host.run([&] { body(c); });
  });
  thread.join();
}

runtime::Bytes text(std::string_view s) { return runtime::Bytes(s.begin(), s.end()); }

TEST(StoreRestore, ARestartedStoreAnswersAKeyWrittenBeforeAndWithoutRestoreLosesIt) {
  TempDir t("job-store-faults-test");
  const std::string first = t.path + "/store.jsonl";
  {
    Store s(t.path, "first", {"--record", first});
    ASSERT_NE(s.port, 0) << read_file(t.path + "/first.log");
    with_client(s.port, [](auto& c) {
      c.set("ckpt/step", text("100"));
      c.add("count", 3);
    });
    s.process.kill();  // SIGKILL: no stop line, nothing flushed at exit
    s.process.wait();
  }
  {
    Store kept(t.path, "kept", {"--record", t.path + "/store.1.jsonl", "--restore", first});
    ASSERT_NE(kept.port, 0) << read_file(t.path + "/kept.log");
    with_client(kept.port, [](auto& c) {
      EXPECT_EQ(c.get("ckpt/step"), text("100"));
      EXPECT_EQ(c.add("count", 1), 4);
    });
    EXPECT_NE(read_file(t.path + "/kept.log").find("restored 2 keys"), std::string::npos) << read_file(t.path + "/kept.log");
  }
  {
    Store lost(t.path, "lost", {"--record", t.path + "/store.2.jsonl"});
    ASSERT_NE(lost.port, 0);
    with_client(lost.port, [](auto& c) {
      EXPECT_FALSE(c.check({"ckpt/step"}));
      EXPECT_EQ(c.add("count", 1), 1);
    });
  }
  // A record it cannot replay: exit 2 naming the file and line, before it listens.
  std::ofstream(t.path + "/bad.jsonl") << "{\"op\":\"start\",\"t\":1,\"pid\":1}\n{\"op\":\"cut\",\"t\":2,\"max_bytes\":4096}\n";
  Store bad(t.path, "bad", {"--restore", t.path + "/bad.jsonl"});
  EXPECT_EQ(bad.port, 0);
  const net::ProcessExit e = bad.process.wait();
  EXPECT_TRUE(e.exited() && e.exit_code() == 2) << e.describe();
  EXPECT_NE(read_file(t.path + "/bad.log").find("bad.jsonl:2: the record was cut"), std::string::npos) << read_file(t.path + "/bad.log");
}

// A worker: a shell script printing a step every 100 ms.
constexpr const char* kSteps = "i=0\nwhile [ $i -lt 30 ]; do i=$((i+1)); echo \"step $i \"; sleep 0.1; done\n";

JobFault layer_fault(JobFault::Kind kind, std::vector<std::string> ops, Duration at, Duration heal) {
  JobFault f = store_fault(kind, at_time(at));
  f.duration = heal;
  f.store_ops = std::move(ops);
  f.line = 9;
  return f;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// agent1 joins late, so the round forms only after 800 ms, well inside the fault.
JobSpec late_join_spec(const std::string& worker, Duration join_at) {
  JobSpec spec = base_spec(worker, 60s);
  spec.agents = 1;
  JobSpec::LateJoin late;
  late.agent = 1;
  late.when = at_time(join_at);
  spec.late_joins.push_back(late);
  return spec;
}

// What holds: a reset is not survived. dagsim launch, as PyTorch 1.13's c10d backend does
// (c10d_rendezvous_backend.py's _call_store turns the store's RuntimeError into a
// RendezvousConnectionError, which ends the agent), does not retry a store call whose connection
// failed: agent0, waiting for agent1, has its next compare_set reset and fails with "Rendezvous
// store unreachable", exit 1; no round forms, and the run ends there (agent1, due at 800 ms, is
// never started: every agent the run started is done). The run still ends cleanly: the fault is healed (an empty rule set sent),
// the judge reads the record with its fault lines, and nothing is left behind.
TEST(JobStoreFaults, AStoreResetOnCompareSetDuringFormationFailsTheAgents) {
  TempDir t("job-store-faults-test");
  JobSpec spec = late_join_spec(script(t.path, kSteps), 800ms);
  spec.faults.push_back(layer_fault(JobFault::Kind::store_reset, {"compare_set"}, 0ms, 20000ms));
  const RunRecords r = run(scenario_of(spec), t.path);
  const std::string log = read_file(t.path + "/run/store/store.log");
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  EXPECT_TRUE(r.fault_timeline[0]["fired"].get<bool>());
  EXPECT_EQ(r.fault_timeline[0]["kind"], "store_reset");
  EXPECT_EQ(r.fault_timeline[0]["target"], "store");
  const std::string detail = r.fault_timeline[0]["detail"].get<std::string>();
  EXPECT_NE(detail.find("reset of compare_set; 1 rule(s) in store/faults.json, SIGUSR1 to the store"), std::string::npos) << detail;
  EXPECT_NE(detail.find("healed: 0 rule(s)"), std::string::npos) << detail;
  EXPECT_GE(count_of(log, "fault reset (line 9) on COMPARE_SET"), 1u) << log;
  EXPECT_EQ(count_of(log, "on GET"), 0u) << log;  // only the named query
  EXPECT_GE(count_of(read_file(t.path + "/run/store/store.jsonl"), "\"fault\":\"reset\""), 1u);
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();  // the judge reads a record with fault lines
  EXPECT_TRUE(r.job["rounds"].empty()) << r.job["rounds"].dump();
  ASSERT_EQ(r.nodes.size(), 1u);
  for (const NodeRecord& n : r.nodes) {
    EXPECT_EQ(n.data["exit"], nlohmann::json({{"code", 1}})) << n.data.dump();
    const std::string agent_log = read_file(t.path + "/run/" + n.data["log"].get<std::string>());
    EXPECT_NE(agent_log.find("Rendezvous store unreachable"), std::string::npos) << agent_log;
  }
  EXPECT_TRUE(r.job["orphans"].empty());
}

// A delay is survived: the round forms, later than the delay, and every agent's workers finish.
TEST(JobStoreFaults, AStoreDelayOnCompareSetDuringFormationIsSurvived) {
  TempDir t("job-store-faults-test");
  JobSpec spec = late_join_spec(script(t.path, kSteps), 300ms);
  JobFault delay = layer_fault(JobFault::Kind::store_delay, {"compare_set"}, 0ms, 3000ms);
  delay.delay = 200ms;
  spec.faults.push_back(delay);
  const RunRecords r = run(scenario_of(spec), t.path);
  const std::string log = read_file(t.path + "/run/store/store.log");
  std::fprintf(stderr, "%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str());
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.fault_timeline.size(), 1u);
  const std::string detail = r.fault_timeline[0]["detail"].get<std::string>();
  EXPECT_NE(detail.find("delay by 200 ms of compare_set"), std::string::npos) << detail;
  EXPECT_GE(count_of(log, "fault delay (line 9) on COMPARE_SET"), 1u) << log;
  ASSERT_FALSE(r.job["rounds"].empty());
  EXPECT_GE(r.job["rounds"][0]["at_ms"].get<double>(), 300.0);  // at least the late join
  for (const NodeRecord& n : r.nodes) EXPECT_EQ(n.data["exit"], nlohmann::json({{"code", 0}})) << n.data.dump();
  EXPECT_EQ(r.job["store"]["error"], "") << r.job["store"].dump();
  EXPECT_TRUE(r.job["store"]["violations"].empty()) << r.job["store"]["violations"].dump();
  EXPECT_TRUE(r.job["orphans"].empty());
}

// The first line of `record` on the rendezvous state key, or null.
nlohmann::json first_state_line(const std::string& record) {
  std::ifstream in(record);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("key") && j["key"] == "/torch.rendezvous.job") return j;
  }
  return nullptr;
}

// dagsim launch's agents, as PyTorch's, fail when the store they were served by goes away (agent1
// exits 1 at the kill), so a run needs something due to outlive the kill: agent0 crashes just
// before it and starts again after the store is back, and its new incarnation reads the
// rendezvous state from the restarted store; the run ends at its 4 s timeout.
RunRecords restart_run(const std::string& dir, bool keep_data) {
  JobSpec spec = base_spec(script(dir, kSteps), 60s);
  spec.timeout = 4000ms;
  JobFault crash;
  crash.kind = JobFault::Kind::crash;
  crash.target.agent = 0;
  crash.when = at_time(900ms);
  crash.restart_after = 600ms;
  spec.faults.push_back(crash);
  JobFault restart = store_fault(JobFault::Kind::store_restart, at_time(1000ms));
  restart.restart_after = 300ms;
  restart.keep_data = keep_data;
  spec.faults.push_back(restart);
  return run(scenario_of(spec), dir);
}

TEST(JobStoreFaults, AStoreRestartKeepingItsDataAnswersWhatWasWrittenBefore) {
  TempDir t("job-store-faults-test");
  const RunRecords r = restart_run(t.path, true);
  const std::string log = read_file(t.path + "/run/store/store.log");
  std::fprintf(stderr, "%s\n%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str(), log.c_str());
  const std::string detail = r.fault_timeline[1]["detail"].get<std::string>();
  EXPECT_NE(detail.find("it starts again from its records (keep_data)"), std::string::npos) << detail;
  EXPECT_NE(log.find("restored "), std::string::npos) << log;
  const nlohmann::json first = first_state_line(t.path + "/run/store/store.1.jsonl");
  std::fprintf(stderr, "after the restart: %s\n", first.dump().c_str());
  ASSERT_FALSE(first.is_null());
  EXPECT_FALSE(first["value"].is_null()) << first.dump();  // the state written before the restart
  std::fprintf(stderr, "judged: error %s, violations %s\n", r.job["store"]["error"].dump().c_str(),
               r.job["store"]["violations"].dump().c_str());
  for (const NodeRecord& n : r.nodes) std::fprintf(stderr, "agent%u.%u exit %s\n", n.node, n.incarnation, n.data["exit"].dump().c_str());
  ASSERT_NO_FATAL_FAILURE(expect_no_orphans_but_of_killed_agents(r));  // agent0 is crashed before the store's restart
}

TEST(JobStoreFaults, AStoreRestartLosingItsDataStartsEmpty) {
  TempDir t("job-store-faults-test");
  const RunRecords r = restart_run(t.path, false);
  const std::string log = read_file(t.path + "/run/store/store.log");
  std::fprintf(stderr, "%s\n%s\n%s\n", r.fault_timeline.dump(1).c_str(), r.job["rounds"].dump().c_str(), log.c_str());
  const std::string detail = r.fault_timeline[1]["detail"].get<std::string>();
  EXPECT_NE(detail.find("it starts again empty (keep_data = false)"), std::string::npos) << detail;
  EXPECT_EQ(log.find("restored "), std::string::npos) << log;
  const nlohmann::json first = first_state_line(t.path + "/run/store/store.1.jsonl");
  std::fprintf(stderr, "after the restart: %s\n", first.dump().c_str());
  ASSERT_FALSE(first.is_null());
  EXPECT_TRUE(first["value"].is_null()) << first.dump();  // the state is gone
  for (const NodeRecord& n : r.nodes) std::fprintf(stderr, "agent%u.%u exit %s\n", n.node, n.incarnation, n.data["exit"].dump().c_str());
  ASSERT_NO_FATAL_FAILURE(expect_no_orphans_but_of_killed_agents(r));  // agent0 is crashed before the store's restart
}

}  // namespace
}  // namespace dagsim::scenarios
