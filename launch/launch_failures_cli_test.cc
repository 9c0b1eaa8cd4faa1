// `dagsim launch` when an agent leaves or waits, on real processes with shell workers (issue 50
// items 2 and 3): the store host leaving (a c10d store hosted by an agent: the survivor fails at
// once, naming the host and why the job cannot go on; an external `dagsim store` or etcd outlives
// it: the survivor re-forms and finishes), what an agent says while it waits, and the dates on its
// lines and events. torchrun side by side: conformance/interop/launch_failures.py.
//
// Timing: every wait is on a condition with a deadline far past what a busy 2-core machine takes;
// the one bound that is the point of a test (the survivor's failure) is 30 s, against the 60 s a
// refused store connection was retried before (and 125 s in the issue).
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "launch/launch_test_util.h"
#include "net/etcd/etcd_process.h"

namespace dagsim::cli {
namespace {

using namespace std::chrono_literals;

// A worker that writes OUT/started_<RANK>_<restart count> and runs until OUT/release exists.
const fs::path& held_worker() {
  static const fs::path path = [] {
    const fs::path p = temp_dir() / "held_worker.sh";
    std::ofstream(p) << "#!/bin/sh\n"
                        ": > \"$1/started_${RANK}_${TORCHELASTIC_RESTART_COUNT}\"\n"
                        "while [ ! -e \"$1/release\" ]; do sleep 0.1; done\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }();
  return path;
}

class LaunchFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = temp_dir() / ("failures_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(out_);
  }
  // An agent of a job of 1 to 2 agents on `backend` at `endpoint`, held workers, restarts to spare
  // (a member's leaving fails the others' group, as its workers' collectives would fail).
  std::vector<std::string> agent(const std::string& backend, const std::string& endpoint, const std::string& conf) const {
    return {"--nnodes", "1:2", "--rdzv_backend", backend, "--rdzv_endpoint", endpoint, "--rdzv_id", "job", "--rdzv_conf",
            conf, "--monitor_interval", "0.2", "--max_restarts", "3", "--no_python", held_worker().string(), out_.string()};
  }
  // SIGTERM to the first agent once both agents' groups run; the second re-forms alone (round 1)
  // and finishes once its worker is released.
  void first_agent_leaves_and_the_other_reforms(const std::string& backend, const std::string& endpoint, const std::string& conf) {
    Launch first(agent(backend, endpoint, conf + ",last_call_timeout=3"));
    ASSERT_TRUE(first.says_within("group_started", 120s)) << first.err();
    Launch second(agent(backend, endpoint, conf + ",last_call_timeout=3"));
    ASSERT_TRUE(second.says_within("group_started", 120s)) << second.err();
    ASSERT_TRUE(first.says_within("round 1: group_started", 120s)) << first.err();  // re-formed with the second
    first.signal(SIGTERM);
    ASSERT_TRUE(first.exits_within(120s));
    EXPECT_EQ(first.wait(), 128 + SIGTERM) << first.err();
    EXPECT_EQ(first.err().find("this agent served the rendezvous store"), std::string::npos) << first.err();
    ASSERT_TRUE(second.says_within("round 2: group_started as group rank 0 of 1", 120s)) << second.err();
    std::ofstream(out_ / "release").flush();
    ASSERT_TRUE(second.exits_within(120s));
    EXPECT_EQ(second.wait(), 0) << second.err();
    EXPECT_EQ(second.err().find("the store host left"), std::string::npos) << second.err();
  }

  fs::path out_;
};

// A c10d store hosted by an agent dies with it: the survivor learns it at its next store call (a
// monitor interval, 0.2 s here) and fails naming the agent that hosted it and why the job cannot go
// on, instead of retrying the refused connection for the store's timeout (60 s) per call.
TEST_F(LaunchFailures, TheStoreHostLeavingFailsTheSurvivorAtOnceNamingIt) {
  const uint16_t port = free_port();
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  Launch host(agent("c10d", endpoint, "is_host=true,last_call_timeout=3"));
  ASSERT_TRUE(host.says_within("serving the rendezvous store", 120s)) << host.err();
  const fs::path events = out_ / "events.jsonl";
  std::vector<std::string> flags = agent("c10d", endpoint, "is_host=false,last_call_timeout=3");
  flags.insert(flags.begin(), {"--events", events.string()});
  Launch survivor(flags);
  ASSERT_TRUE(survivor.says_within("round 0: group_started", 120s)) << survivor.err();
  ASSERT_TRUE(host.says_within("group_started", 120s)) << host.err();
  host.signal(SIGTERM);
  ASSERT_TRUE(host.exits_within(120s));
  EXPECT_EQ(host.wait(), 128 + SIGTERM);
  EXPECT_NE(host.err().find("this agent served the rendezvous store, which closes with it"), std::string::npos) << host.err();
  const auto gone = std::chrono::steady_clock::now();
  ASSERT_TRUE(survivor.exits_within(120s)) << survivor.err();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - gone).count();
  EXPECT_LT(seconds, 30) << "the survivor took " << seconds << " s to fail: " << survivor.err();
  EXPECT_EQ(survivor.wait(), 1) << survivor.err();
  const std::string err = survivor.err();
  const std::regex named("the store host left: agent localhost_[0-9]+_0, which hosted the c10d store at 127\\.0\\.0\\.1:" +
                         std::to_string(port) + ", is gone, and the store died with it");
  EXPECT_TRUE(std::regex_search(err, named)) << err;
  EXPECT_NE(err.find("this job cannot go on"), std::string::npos) << err;
  EXPECT_NE(err.find("dagsim store"), std::string::npos) << err;
  std::cout << "survivor failed " << seconds << " s after the store host's exit\n";
  // Every launcher line is dated, and every event carries absolute time beside t_ms.
  std::istringstream lines(err);
  const std::regex dated(R"(^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] dagsim launch: .*)");
  for (std::string line; std::getline(lines, line);) EXPECT_TRUE(std::regex_match(line, dated)) << line;
  std::istringstream jsonl(slurp(events));
  int seen = 0;
  for (std::string line; std::getline(jsonl, line); ++seen) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.contains("t_ms")) << line;
    ASSERT_TRUE(j.contains("timestamp") && j["timestamp"].is_number_integer()) << line;
    EXPECT_GT(j["timestamp"].get<int64_t>(), 1'600'000'000'000) << "milliseconds since the epoch: " << line;
    ASSERT_TRUE(j.contains("time") && j["time"].is_string()) << line;
    EXPECT_TRUE(std::regex_match(j["time"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << line;
  }
  EXPECT_GT(seen, 0);
}

// An external `dagsim store` outlives any agent: the first agent's SIGTERM is any agent's leaving.
TEST_F(LaunchFailures, AnExternalStoreOutlivesTheFirstAgentAndTheOtherReforms) {
  const fs::path port_file = out_ / "store.port";
  const std::string command = std::string("exec ") + DAGSIM_BINARY + " store --port 0 > " + port_file.string() + " 2>/dev/null";
  pid_t store = 0;
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  ASSERT_EQ(posix_spawnp(&store, "sh", nullptr, nullptr, const_cast<char* const*>(argv), environ), 0);
  std::string port;
  for (const auto until = std::chrono::steady_clock::now() + 60s; port.empty() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(50ms);
    std::istringstream(slurp(port_file)) >> port;
  }
  ASSERT_FALSE(port.empty()) << "dagsim store printed no port";
  first_agent_leaves_and_the_other_reforms("c10d", "127.0.0.1:" + port, "is_host=false");
  ::kill(store, SIGTERM);
  int status = 0;
  ::waitpid(store, &status, 0);
}

// etcd outlives any agent too (Debian's etcd-server; skipped without it).
TEST_F(LaunchFailures, EtcdOutlivesTheFirstAgentAndTheOtherReforms) {
  if (const auto why = net::etcd::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  net::etcd::EtcdProcess etcd;
  first_agent_leaves_and_the_other_reforms("etcd", etcd.endpoint().host + ":" + std::to_string(etcd.endpoint().port), "read_timeout=60");
}

// While it waits, an agent says for whom and until when, every few seconds.
TEST_F(LaunchFailures, AWaitingAgentSaysForWhomAndUntilWhen) {
  const uint16_t port = free_port();
  std::vector<std::string> flags = agent("c10d", "127.0.0.1:" + std::to_string(port), "is_host=true,join_timeout=600");
  flags[1] = "3";  // --nnodes 3: it waits for two more
  Launch alone(flags);
  const std::regex waiting(R"(\] dagsim launch: waiting for the rendezvous of run job, round 0: 2 more agents needed \(have 1 of 3\.\.3: localhost_[0-9]+_0\); joining times out at \d\d:\d\d:\d\d)");
  EXPECT_TRUE(alone.says_within(waiting, 120s)) << alone.err();
  alone.signal(SIGTERM);
  EXPECT_TRUE(alone.exits_within(120s));
}

// A member killed with its host is otherwise silent until its heartbeat expires: the survivor says
// whose heartbeat stopped, since when, and when the rendezvous declares it dead.
TEST_F(LaunchFailures, ASurvivorSaysWhichMemberFellSilentAndWhenItExpires) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  Launch host(agent("c10d", endpoint, "is_host=true,last_call_timeout=3"));
  ASSERT_TRUE(host.says_within("serving the rendezvous store", 120s)) << host.err();
  Launch doomed(agent("c10d", endpoint, "is_host=false,last_call_timeout=3"));
  ASSERT_TRUE(doomed.says_within("group_started as group rank 1 of 2", 120s)) << doomed.err();
  doomed.signal(SIGKILL);
  const std::regex silent(R"(\] dagsim launch: no heartbeat from member localhost_)" + std::to_string(doomed.pid()) +
                          R"(_0 \(group rank 1\) of round \d+ since \d\d:\d\d:\d\d; the rendezvous declares it dead at \d\d:\d\d:\d\d)");
  EXPECT_TRUE(host.says_within(silent, 120s)) << host.err();
  host.signal(SIGTERM);
  EXPECT_TRUE(host.exits_within(120s));
}

}  // namespace
}  // namespace dagsim::cli
