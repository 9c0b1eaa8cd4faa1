// The rendezvous workload's edges (issue 11 items 5 and 6): the [rendezvous] table refuses what
// cannot work, naming the key and why; the judge trusts nothing in the records (a tampered state,
// rank or history is a named violation, a corrupt record a named invalid_records error); and the
// workload itself stops an agent whose call failed the way PyTorch's process does, heartbeats and
// all (the property test found spares waiting for ever on a round kept full by zombie
// keep-alives).
#include <gtest/gtest.h>

#include <limits>

#include <string>

#include "core/base/error.h"
#include "core/base/throws_error_test_util.h"
#include "core/rendezvous/rendezvous_state.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/format/scenario_test_util.h"
#include "scenarios/run/runner.h"
#include "scenarios/workloads/rendezvous/rendezvous_workload.h"

namespace dagsim::conformance {
namespace {

using scenarios::CheckResult;
using scenarios::RunRecords;
using scenarios::RunResult;

using scenarios::error_of;

const std::string kHead = "name = \"r\"\n[cluster]\nnodes = 4\nclock_skew_max_ms = 100\n";

TEST(RendezvousScenario, TheTableRefusesWhatCannotWorkNamingTheKey) {
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmax_nodes = 2\n").find("rendezvous.min_nodes"), std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmin_nodes = 4\n").find("min_nodes: 4 participants can never join: the cluster has 3"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmin_nodes = 3\nmax_nodes = 2\n").find("rendezvous.max_nodes: 2 is below min_nodes (3)"), std::string::npos);
  // 500 + 1000 + 100 ms of skew is not below the expiry of 1000 x 2.
  const std::string slow_poll = kHead +
                                "[rendezvous]\nmin_nodes = 2\nkeep_alive_interval_ms = 1000\nkeep_alive_max_attempt = 2\n"
                                "poll_interval_ms = 900\n";
  EXPECT_NE(error_of(slow_poll).find("poll_interval_ms: 900ms leaves a polling node's heartbeat up to 2s old"), std::string::npos)
      << error_of(slow_poll);
  const std::string fine_poll = kHead +
                                "[rendezvous]\nmin_nodes = 2\nkeep_alive_interval_ms = 1000\nkeep_alive_max_attempt = 3\n"
                                "poll_interval_ms = 900\n";
  EXPECT_EQ(error_of(fine_poll), "no error");
  const std::string store_action = kHead + "[rendezvous]\nmin_nodes = 2\n[[rendezvous.actions]]\naction = \"join\"\n"
                                           "node = \"worker0\"\nat_ms = 5\n";
  EXPECT_NE(error_of(store_action).find("the store node takes no rendezvous actions"), std::string::npos);
  const std::string twice = kHead + "[rendezvous]\nmin_nodes = 2\n[[rendezvous.actions]]\naction = \"leave\"\nnode = \"worker1\"\n"
                                    "at_ms = 5\n[[rendezvous.actions]]\naction = \"leave\"\nnode = \"worker1\"\nat_ms = 9\n";
  EXPECT_NE(error_of(twice).find("a second \"leave\" for worker1"), std::string::npos);
  const std::string unknown = kHead + "[rendezvous]\nmin_nodes = 2\n[[rendezvous.actions]]\naction = \"crash\"\n"
                                      "node = \"worker1\"\nat_ms = 5\n";
  EXPECT_NE(error_of(unknown).find("rendezvous.actions[0].action: unknown value \"crash\""), std::string::npos) << error_of(unknown);
  // The etcd backend's keys.
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmin_nodes = 2\nbackend = \"zookeeper\"\n").find("rendezvous.backend: unknown value"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmin_nodes = 2\netcd_endpoint = \"127.0.0.1:2379\"\n")
                .find("rendezvous.etcd_endpoint: applies only with backend = \"etcd\""),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmin_nodes = 2\nbackend = \"etcd\"\netcd_endpoint = \"localhost\"\n")
                .find("rendezvous.etcd_endpoint: \"localhost\" is not host:port"),
            std::string::npos);
  EXPECT_EQ(error_of(kHead + "[rendezvous]\nmin_nodes = 2\nbackend = \"etcd\"\netcd_endpoint = \"10.0.0.7:2379\"\n"), "no error");
  // store_restart: the etcd the store node started, by the store node, for a positive time.
  const auto restart = [](const std::string& table, const std::string& action) {
    return error_of(kHead + "[rendezvous]\nmin_nodes = 2\n" + table + "[[rendezvous.actions]]\n" + action);
  };
  const std::string etcd = "backend = \"etcd\"\n";
  EXPECT_EQ(restart(etcd, "action = \"store_restart\"\nnode = \"worker0\"\nat_ms = 500\ndown_ms = 1500\n"), "no error");
  EXPECT_EQ(restart(etcd, "action = \"store_restart\"\nnode = \"worker0\"\nat_ms = 500\n"), "no error");
  EXPECT_NE(restart("", "action = \"store_restart\"\nnode = \"worker0\"\nat_ms = 500\n")
                .find("rendezvous.actions[0].action: store_restart needs backend = \"etcd\" without etcd_endpoint"),
            std::string::npos);
  EXPECT_NE(restart(etcd + "etcd_endpoint = \"10.0.0.7:2379\"\n", "action = \"store_restart\"\nnode = \"worker0\"\nat_ms = 5\n")
                .find("store_restart needs backend = \"etcd\" without etcd_endpoint"),
            std::string::npos);
  EXPECT_NE(restart(etcd, "action = \"store_restart\"\nnode = \"worker1\"\nat_ms = 5\n")
                .find("rendezvous.actions[0].node: store_restart is the store node's (worker0)"),
            std::string::npos);
  EXPECT_NE(restart(etcd, "action = \"store_restart\"\nnode = \"worker0\"\nat_ms = 5\ndown_ms = 0\n").find("rendezvous.actions[0].down_ms"),
            std::string::npos);
  EXPECT_NE(restart(etcd, "action = \"join\"\nnode = \"worker1\"\nat_ms = 5\ndown_ms = 10\n")
                .find("rendezvous.actions[0].down_ms: applies only to action = \"store_restart\""),
            std::string::npos);
}

// Values that validated and could never work (issue 23, item 8): each refused at its key and line.
// torchrun's --nnodes as it writes it, and the store node that torchrun users forget to count.
TEST(RendezvousScenario, NnodesIsTorchrunsMinMaxAndTheStoreNodeIsNamedWhenForgotten) {
  auto settings = [](const std::string& table) {
    const scenarios::Scenario s = scenarios::parse_scenario(kHead + "[rendezvous]\n" + table, "n.toml");
    const auto& spec = s.workload.as<scenarios::RendezvousSpec>();
    return std::make_pair(spec.settings.min_nodes, spec.settings.max_nodes);
  };
  EXPECT_EQ(settings("nnodes = \"2:3\"\n"), std::make_pair(2u, 3u));
  EXPECT_EQ(settings("nnodes = \"3\"\n"), std::make_pair(3u, 3u));
  EXPECT_EQ(settings("nnodes = 2\n"), std::make_pair(2u, 2u));
  EXPECT_NE(error_of(kHead + "[rendezvous]\nnnodes = \"2:x\"\n").find("rendezvous.nnodes: \"2:x\": expected \"MIN:MAX\" or \"N\""),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nnnodes = \"3:2\"\n").find("MAX is below MIN"), std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nnnodes = \"0:2\"\n").find("each in [1, "), std::string::npos);
  EXPECT_NE(error_of(kHead + "[rendezvous]\nnnodes = \"2:3\"\nmin_nodes = 2\n").find("give nnodes or min_nodes, not both"),
            std::string::npos);
  // Four nodes are three agents and the store: four agents need five nodes, and the message says so.
  EXPECT_NE(error_of(kHead + "[rendezvous]\nnnodes = \"4:8\"\n")
                .find("rendezvous.nnodes: 4 participants can never join: the cluster has 3 besides the store node, which "
                      "takes a node of its own; write [cluster] nodes = 5 (or more) for 4 agents"),
            std::string::npos)
      << error_of(kHead + "[rendezvous]\nnnodes = \"4:8\"\n");
  EXPECT_NE(error_of(kHead + "[rendezvous]\nmax_nodes = 2\n").find("(or nnodes = \"MIN:MAX\", as torchrun's --nnodes)"),
            std::string::npos);
}

TEST(RendezvousScenario, ValuesThatCanNeverWorkAreRefusedAtTheirKeyAndLine) {
  const std::string etcd = kHead + "[rendezvous]\nmin_nodes = 2\nbackend = \"etcd\"\n";
  for (const char* port : {"99999", "0", "123456789012345678901234567890"}) {
    const std::string e = error_of(etcd + "etcd_endpoint = \"127.0.0.1:" + port + "\"\n");
    EXPECT_NE(e.find(":8: rendezvous.etcd_endpoint: \"127.0.0.1:" + std::string(port) + "\": port"), std::string::npos) << e;
    EXPECT_NE(e.find("is outside 1..65535"), std::string::npos) << e;
  }
  EXPECT_EQ(error_of(etcd + "etcd_endpoint = \"127.0.0.1:65535\"\n"), "no error");
  // An empty run id at its own line and key, in the loader's words (not the table's line).
  const std::string empty = error_of(kHead + "[rendezvous]\nmin_nodes = 2\nrun_id = \"\"\n");
  EXPECT_NE(empty.find(":7: rendezvous.run_id: must not be empty"), std::string::npos) << empty;
  const std::string long_id = error_of(kHead + "[rendezvous]\nmin_nodes = 2\nrun_id = \"" + std::string(100000, 'r') + "\"\n");
  EXPECT_NE(long_id.find(":7: rendezvous.run_id: 100000 bytes, more than the 256 a run id may have"), std::string::npos)
      << long_id.substr(0, 300);
  EXPECT_EQ(error_of(kHead + "[rendezvous]\nmin_nodes = 2\nrun_id = \"" + std::string(256, 'r') + "\"\n"), "no error");
  // A poll interval of a nanosecond: billions of polls, a run that never ends in wall time.
  const std::string tiny = error_of(kHead + "[rendezvous]\nmin_nodes = 2\npoll_interval_ms = 0.000001\n");
  EXPECT_NE(tiny.find(":7: rendezvous.poll_interval_ms: 1ns is below the 1 ms a poll interval may be (0: no polling)"),
            std::string::npos)
      << tiny;
  EXPECT_EQ(error_of(kHead + "[rendezvous]\nmin_nodes = 2\npoll_interval_ms = 1\n"), "no error");
  EXPECT_EQ(error_of(kHead + "[rendezvous]\nmin_nodes = 2\npoll_interval_ms = 0\n"), "no error");
}

// Runs `scenario`, lets `tamper` change the records, and returns the invariants check.
CheckResult invariants_after(const scenarios::Scenario& scenario, const std::function<void(RunRecords&)>& tamper) {
  scenarios::RunOptions options;
  options.before_checks = tamper;
  const RunResult result = scenarios::run_scenario(scenario, options);
  for (const CheckResult& c : result.checks) {
    if (c.name == "invariants") return c;
  }
  ADD_FAILURE() << "no invariants check";
  return {};
}

// The same for the formation example.
CheckResult invariants_after(const std::function<void(RunRecords&)>& tamper) {
  return invariants_after(scenarios::load_scenario_file(std::string(DAGSIM_EXAMPLES) + "/rendezvous_formation.toml"), tamper);
}

nlohmann::json& record_of(RunRecords& records, uint32_t node) {
  for (scenarios::NodeRecord& r : records.nodes) {
    if (r.node == node) return r.data;
  }
  throw std::runtime_error("no record of node " + std::to_string(node));
}

TEST(RendezvousJudge, UntouchedRecordsPassAndEachTamperingIsNamed) {
  EXPECT_TRUE(invariants_after([](RunRecords&) {}).passed);

  // A returned rank that the committed state does not hold: S8, naming the node.
  CheckResult rank = invariants_after([](RunRecords& r) {
    for (nlohmann::json& e : record_of(r, 2)["events"]) {
      if (e["op"] == "next_rendezvous") e["rank"] = 3;
    }
  });
  EXPECT_FALSE(rank.passed);
  EXPECT_NE(rank.detail.find("S8 (store life 0, round 0; worker2_0_0): next_rendezvous returned rank 3 of 4"), std::string::npos)
      << rank.detail;

  // Two nodes told the same rank: S2 as well.
  CheckResult twice = invariants_after([](RunRecords& r) {
    for (nlohmann::json& e : record_of(r, 2)["events"]) {
      if (e["op"] == "next_rendezvous") e["rank"] = 0;
    }
  });
  EXPECT_FALSE(twice.passed);
  EXPECT_NE(twice.detail.find("S8"), std::string::npos) << twice.detail;

  // A committed state dropped from the store's history: a write a node saw succeed is no commit (S1).
  CheckResult lost = invariants_after([](RunRecords& r) {
    nlohmann::json& history = record_of(r, 0)["history"];
    history.erase(history.begin() + 1);
  });
  EXPECT_FALSE(lost.passed);
  EXPECT_NE(lost.detail.find("S1"), std::string::npos) << lost.detail;
}

// L1 judges a round that filled to max_nodes too (issue 24): min 2, max 3, and the commit that
// completes the round, with all three, moved 10 s past the last call. The checker once skipped
// full rounds, and passed a late joiner's 5-node round formed with agents long gone.
TEST(RendezvousJudge, AFullRoundThatCompletedAfterTheLastCallIsLate) {
  const std::string text = R"(name = "full_late"
max_virtual_time_ms = 30000
[cluster]
nodes = 4
[network]
latency = { dist = "uniform", min_us = 100, max_us = 500 }
[rendezvous]
min_nodes = 2
max_nodes = 3
last_call_ms = 1000
duration_ms = 15000
[[checks]]
kind = "invariants"
)";
  const scenarios::Scenario scenario = scenarios::parse_scenario(text, "full_late.toml");
  EXPECT_TRUE(invariants_after(scenario, [](RunRecords&) {}).passed);
  // Everything recorded from that commit on happens 10 s later (store commits, agents' calls and
  // writes, their wall clocks alike), so the history stays whole and only the completion is late.
  bool moved = false;
  const CheckResult late = invariants_after(scenario, [&](RunRecords& r) {
    std::optional<int64_t> from;
    for (const nlohmann::json& commit : record_of(r, 0)["history"]) {
      if (from || !commit["s"].is_string()) continue;
      const std::string hex = commit["s"].get<std::string>();
      std::vector<uint8_t> bytes;
      for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      const rendezvous::RendezvousState state = rendezvous::decode(bytes);
      if (state.complete && state.participants.size() == 3) from = commit["t"].get<int64_t>();
    }
    if (!from) return;
    moved = true;
    const std::function<void(nlohmann::json&)> shift = [&](nlohmann::json& j) {
      if (j.is_array()) {
        for (nlohmann::json& e : j) shift(e);
      } else if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
          const bool time = it.key() == "t" || it.key() == "t_end" || it.key() == "start" || it.key() == "wall" ||
                            it.key() == "read_wall";
          if (time && it->is_number_integer() && it->get<int64_t>() >= *from) {
            *it = it->get<int64_t>() + int64_t{10'000'000'000};
          } else {
            shift(*it);
          }
        }
      }
    };
    for (scenarios::NodeRecord& n : r.nodes) shift(n.data);
  });
  ASSERT_TRUE(moved) << "no commit completed the round with all three";
  EXPECT_NE(late.detail.find("L1"), std::string::npos) << late.detail;
  EXPECT_NE(late.detail.find("later than last_call"), std::string::npos) << late.detail;
}

TEST(RendezvousJudge, CorruptRecordsAreAnInvalidRecordsErrorNamingTheNode) {
  const scenarios::Scenario scenario =
      scenarios::load_scenario_file(std::string(DAGSIM_EXAMPLES) + "/rendezvous_formation.toml");
  RunRecords records;
  scenarios::RunOptions options;
  options.before_checks = [&](RunRecords& r) { records = r; };
  scenarios::run_scenario(scenario, options);
  ASSERT_FALSE(records.nodes.empty());
  const RunRecords untouched = records;
  record_of(records, 0)["history"][0]["s"] = "zz";
  EXPECT_TRUE(throws_error([&] { scenarios::judge_run(scenario, records); }, ErrorCode::invalid_records, {"worker0"}));
  // A forged wall time at int64's least: the judge would subtract the expiry from it (overflow).
  RunRecords forged = untouched;
  bool forged_one = false;
  for (scenarios::NodeRecord& r : forged.nodes) {
    if (forged_one || !r.data.contains("events") || r.data["events"].empty()) continue;
    r.data["events"][0]["wall"] = std::numeric_limits<int64_t>::min();  // read wherever it is present
    forged_one = true;
  }
  ASSERT_TRUE(forged_one) << "no node recorded an event";
  EXPECT_TRUE(throws_error([&] { scenarios::judge_run(scenario, forged); }, ErrorCode::invalid_records,
                           {"is not a time (0 to 2^62 ns)"}));
}

// A participant whose agent failed (its store call timed out in a partition) stops heartbeating,
// as a process that exits does; the spare that joined meanwhile then gets its place instead of
// waiting on a round held full by a zombie keep-alive until the run's time limit.
TEST(RendezvousWorkload, AnAgentThatFailedStopsItsHeartbeats) {
  const std::string text = R"(name = "zombie"
max_virtual_time_ms = 60000
[cluster]
nodes = 4
[network]
latency = { dist = "uniform", min_us = 100, max_us = 500 }
[rendezvous]
min_nodes = 1
max_nodes = 2
last_call_ms = 500
keep_alive_interval_ms = 1000
keep_alive_max_attempt = 4
store_timeout_ms = 600
monitor_interval_ms = 200
duration_ms = 15000
[[rendezvous.actions]]
action = "join"
node = "worker3"
at_ms = 5000
[[faults]]
kind = "partition"
groups = [["worker0"], ["worker1", "worker2", "worker3"]]
at_ms = 1000
heal_at_ms = 3500
[[checks]]
kind = "invariants"
[[checks]]
kind = "formed"
nodes = ["worker1", "worker2"]
[[checks]]
kind = "expect_error"
nodes = ["worker1", "worker2"]
message = "store unreachable"
[[checks]]
kind = "formed"
nodes = ["worker3"]
)";
  const RunResult result = scenarios::run_scenario(scenarios::parse_scenario(text, "zombie.toml"), {});
  for (const CheckResult& c : result.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  EXPECT_EQ(result.outcome, "finished");
}

}  // namespace
}  // namespace dagsim::conformance
