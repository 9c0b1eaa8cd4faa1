// record_job when the job turns on the runner: a FIFO in place of its agent's log and events
// file (the run must not hang on them), and the store's port taken while a store_restart has it
// down (the fault's recorded outcome, not an aborted run). Self-contained: shell-script workers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "scenarios/job/job_run.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;

struct Dir {
  std::string path;
  Dir() {
    std::string p = (fs::temp_directory_path() / "job-run-files-test-XXXXXX").string();
    path = ::mkdtemp(p.data());
  }
  ~Dir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) fs::remove_all(path, ec);
  }
};

JobSpec one_agent(const std::string& dir, const std::string& body) {
  const std::string worker = dir + "/worker.sh";
  std::ofstream(worker) << "#!/bin/sh\n" << body;
  ::chmod(worker.c_str(), 0755);
  JobSpec s;
  s.command = {worker};
  s.no_python = true;
  s.agents = 1;
  s.min_nodes = 1;
  s.max_nodes = 1;
  s.nproc_per_node = 1;
  s.rdzv_conf = {{"last_call_timeout", "1"}, {"join_timeout", "60"}};
  s.monitor_interval = std::chrono::milliseconds(200);
  s.timeout = std::chrono::seconds(40);
  return s;
}

Scenario scenario_of(const JobSpec& s) {
  Scenario sc;
  sc.name = "files";
  sc.cluster.nodes = 1;
  sc.cluster.name_prefix = "agent";
  sc.workload = WorkloadSpec("job", s);
  return sc;
}

RunRecords run(const Scenario& s, const std::string& dir) {
  JobRunOptions o;
  o.seed = 3;
  o.dagsim_binary = DAGSIM_BINARY;
  o.run_dir = dir + "/run";
  o.progress = [](std::string_view line) { std::fprintf(stderr, "  | %.*s\n", static_cast<int>(line.size()), line.data()); };
  return record_job(s, o);
}

TEST(JobRunFiles, AFifoInPlaceOfTheAgentsLogAndEventsDoesNotHangTheRun) {
  Dir d;
  // The worker swaps its agent's log and events file for FIFOs (no writer ever comes).
  const Scenario s = scenario_of(one_agent(d.path, R"(echo "step 1"
sleep 0.5
cd "$DAGSIM_JOB_DIR/agents"
rm -f agent0.0.log agent0.0.events.jsonl
mkfifo agent0.0.log agent0.0.events.jsonl
sleep 1
echo "step 2"
)"));
  const auto t0 = std::chrono::steady_clock::now();
  const RunRecords r = run(s, d.path);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_EQ(r.outcome, "finished");
  ASSERT_EQ(r.nodes.size(), 1u);
  EXPECT_EQ(r.nodes[0].data["exit"], (nlohmann::json{{"code", 0}})) << r.nodes[0].data.dump();
}

bool connects(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST(JobRunFiles, AStoreRestartWhosePortWasTakenIsTheFaultsOutcome) {
  Dir d;
  // On "ready" the store is killed for 1.5 s and agent0 crashes for 3 s (so the run lasts); this
  // test takes the store's port as soon as the store is gone, and holds it for 5 s.
  JobSpec spec = one_agent(d.path, "echo ready\nsleep 30\n");
  JobFault store;
  store.kind = JobFault::Kind::store_restart;
  store.target.kind = JobTarget::Kind::store;
  store.when.kind = JobTrigger::Kind::output;
  store.when.pattern = "^ready";
  store.restart_after = std::chrono::milliseconds(1500);
  store.keep_data = false;
  store.line = 5;
  JobFault crash = store;
  crash.kind = JobFault::Kind::crash;
  crash.target = {JobTarget::Kind::agent, 0, 0};
  crash.restart_after = std::chrono::milliseconds(3000);
  crash.line = 6;
  spec.faults = {store, crash};
  std::atomic<bool> held = false;
  std::thread holder([&] {
    const std::string port_file = d.path + "/run/store/port.0";
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    uint16_t port = 0;
    while (std::chrono::steady_clock::now() < until) {
      std::ifstream in(port_file);
      unsigned p = 0;
      if (in >> p && p > 0) {
        port = static_cast<uint16_t>(p);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    while (port != 0 && connects(port) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(port);
    if (port != 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 1) == 0) {
      held = true;
      std::this_thread::sleep_for(std::chrono::seconds(5));
    }
    ::close(fd);
  });
  RunRecords r;
  try {
    r = run(scenario_of(spec), d.path);  // before: start_store threw, and the run with it
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  holder.join();
  ASSERT_TRUE(held.load());
  ASSERT_EQ(r.fault_timeline.size(), 2u);
  const std::string detail = r.fault_timeline[0]["detail"].get<std::string>();
  EXPECT_NE(detail.find("SIGKILL to the store"), std::string::npos) << detail;
  EXPECT_NE(detail.find("could not start again: port taken"), std::string::npos) << detail;
}

}  // namespace
}  // namespace dagsim::scenarios
