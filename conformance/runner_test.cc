// End-to-end behaviour of the runner: a run that cannot finish ends with its stuck report, a
// failing node fiber fails that node's workload without stopping the world, and every check of
// the heartbeat workload can fail when the records contradict it (checks that cannot fail prove
// nothing).
#include <gtest/gtest.h>

#include "conformance/scenario_gen.h"
#include "scenarios/workloads/heartbeat/heartbeat_workload.h"
#include "scenarios/run/runner.h"
#include "scenarios/format/scenario_loader.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using scenarios::CheckSpec;
using scenarios::Declaration;
using scenarios::FaultSpec;
using scenarios::HeartbeatWorkload;
using scenarios::RunOptions;
using scenarios::RunResult;
using scenarios::Scenario;

Scenario small_scenario() {
  Scenario s;
  s.name = "small";
  s.cluster.nodes = 3;
  s.network.latency = runtime::LatencyModel::uniform(100us, 900us);
  scenarios::HeartbeatSpec hb;
  hb.duration = 5s;
  s.workload = scenarios::WorkloadSpec("heartbeat", hb);
  return s;
}

const scenarios::CheckResult* find_check(const RunResult& r, const std::string& name) {
  for (const auto& c : r.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(Runner, AScenarioThatCannotFinishEndsAtMaxVirtualTimeWithAStuckReport) {
  Scenario s = small_scenario();
  s.workload.as<scenarios::HeartbeatSpec>().duration = 120s;
  s.max_virtual_time = 10s;
  const RunResult r = scenarios::run_scenario(s, {});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.outcome, "time_limit");
  EXPECT_DOUBLE_EQ(r.virtual_time_ms, 10000.0);
  const auto* completed = find_check(r, "run_completed");
  ASSERT_NE(completed, nullptr);
  EXPECT_FALSE(completed->passed);
  EXPECT_NE(completed->detail.find("max_virtual_time (10000 ms)"), std::string::npos) << completed->detail;
  // Each blocked fiber, its node and what it waits on.
  EXPECT_NE(r.stuck_report.find("node worker0 (incarnation 0, up), fiber main: waiting on Channel::pop"), std::string::npos)
      << r.stuck_report;
  EXPECT_NE(r.stuck_report.find("node worker1 (incarnation 0, up), fiber main: waiting on Clock::sleep_until"),
            std::string::npos)
      << r.stuck_report;
}

// The heartbeat workload, with a saboteur fiber on worker2 that throws after a second.
class Sabotaged final : public scenarios::Workload {
 public:
  explicit Sabotaged(const Scenario& s) : inner_(s) {}
  void node_main(scenarios::NodeContext& node) override {
    if (node.index() == 2) {
      runtime::Env& env = node.env();
      env.spawner.spawn("saboteur", [&env] {
        env.clock.sleep(1s);
        throw std::logic_error("invariant broken in worker2");
      });
    }
    inner_.node_main(node);
  }
  std::optional<runtime::TimePoint> end_time() const override { return inner_.end_time(); }

 private:
  HeartbeatWorkload inner_;
};

TEST(Runner, AnExceptionInANodeFiberFailsThatNodesWorkloadNotTheWorld) {
  Scenario s = small_scenario();
  s.checks.push_back(CheckSpec{"declared_dead", {2}, std::nullopt, std::nullopt, 0});
  Sabotaged workload(s);
  const scenarios::RunRecords records = scenarios::record_workload(s, workload, {});
  EXPECT_EQ(records.outcome, "finished");
  ASSERT_EQ(records.failures.size(), 1u);
  EXPECT_EQ(records.failures[0].node, "worker2");
  EXPECT_EQ(records.failures[0].fiber, "saboteur");
  EXPECT_EQ(records.failures[0].what, "invariant broken in worker2");
  const RunResult r = scenarios::judge_run(s, records);
  EXPECT_FALSE(find_check(r, "no_fiber_failures")->passed);
  EXPECT_NE(find_check(r, "no_fiber_failures")->detail.find("node worker2, fiber saboteur at 1000"), std::string::npos);
  // The world ran on: worker1 kept heartbeating to the end, and worker2's main too.
  EXPECT_GE(r.workload.at("heartbeat").at("heartbeats_received").get<uint64_t>(), 95u);
  EXPECT_FALSE(find_check(r, "declared_dead")->passed) << "worker2's main kept heartbeating";
}

// Runs `s`, tampering with the monitor's recorded declarations before they are judged.
RunResult run_tampered(const Scenario& s, std::function<void(std::vector<Declaration>&)> tamper) {
  RunOptions options;
  options.before_checks = [&](scenarios::RunRecords& records) {
    const uint32_t monitor = s.workload.as<scenarios::HeartbeatSpec>().monitor;
    for (scenarios::NodeRecord& r : records.nodes) {
      if (r.node != monitor || r.incarnation != 0) continue;
      std::vector<Declaration> declarations;
      for (const nlohmann::json& d : r.data.at("declarations")) {
        declarations.push_back({runtime::TimePoint{runtime::Duration{d.at("time_ns").get<int64_t>()}},
                                d.at("node").get<uint32_t>(), d.at("dead").get<bool>(), 0});
      }
      tamper(declarations);
      r.data["declarations"] = nlohmann::json::array();
      for (const Declaration& d : declarations) {
        r.data["declarations"].push_back({{"time_ns", d.time.ns()}, {"node", d.node}, {"dead", d.dead}});
      }
    }
  };
  return scenarios::run_scenario(s, options);
}

TEST(Runner, DetectsFailuresFailsWhenAnOutageGoesUndeclared) {
  Scenario s = small_scenario();
  s.faults.push_back(FaultSpec{FaultSpec::Kind::kill, 1s, 1, 3s, {}, {}, {}, 0});
  s.checks.push_back(CheckSpec{"detects_failures", {}, std::nullopt, std::nullopt, 0});
  const RunResult honest = scenarios::run_scenario(s, {});
  ASSERT_TRUE(honest.passed) << find_check(honest, "detects_failures")->detail;
  const RunResult r = run_tampered(s, [](std::vector<Declaration>& d) { d.clear(); });
  const auto* check = find_check(r, "detects_failures");
  EXPECT_FALSE(check->passed);
  EXPECT_NE(check->detail.find("worker1 down from 1000"), std::string::npos) << check->detail;
}

TEST(Runner, DetectsFailuresFailsWhenTheDeclarationComesTooLate) {
  Scenario s = small_scenario();
  s.faults.push_back(FaultSpec{FaultSpec::Kind::crash, 1s, 1, 3s, {}, {}, {}, 0});
  s.checks.push_back(CheckSpec{"detects_failures", {}, std::nullopt, std::nullopt, 0});
  const RunResult r = run_tampered(s, [](std::vector<Declaration>& d) {
    for (Declaration& x : d) x.time = x.time + 200ms;  // past interval × max_attempts + latency max
  });
  EXPECT_FALSE(find_check(r, "detects_failures")->passed);
}

TEST(Runner, NoFalseSuspicionFailsOnADeclarationOfAHealthyNode) {
  Scenario s = small_scenario();
  s.checks.push_back(CheckSpec{"no_false_suspicion", {}, std::nullopt, std::nullopt, 0});
  s.checks.push_back(CheckSpec{"never_declared_dead", {1, 2}, std::nullopt, std::nullopt, 0});
  const RunResult r = run_tampered(s, [](std::vector<Declaration>& d) {
    d.push_back(Declaration{runtime::TimePoint{2s}, 2, true, 0});
  });
  const auto* check = find_check(r, "no_false_suspicion");
  EXPECT_FALSE(check->passed);
  EXPECT_NE(check->detail.find("worker2 declared dead at 2000"), std::string::npos) << check->detail;
  EXPECT_FALSE(find_check(r, "never_declared_dead")->passed);
}

TEST(Runner, NoFalseSuspicionFailsOnASuspicionThatOutlivesItsCause) {
  // The monitor's justified verdict during a partition, never withdrawn once worker1 was reachable
  // again: what a sender stuck "not learned" after its notice looked like (issue 14).
  Scenario s = small_scenario();
  s.faults.push_back(FaultSpec{FaultSpec::Kind::partition, 2s, 0, 3s, {}, {1}, {0}, 0});
  s.checks.push_back(CheckSpec{"no_false_suspicion", {}, std::nullopt, std::nullopt, 0});
  const RunResult honest = scenarios::run_scenario(s, {});
  ASSERT_TRUE(honest.passed) << find_check(honest, "no_false_suspicion")->detail;
  const RunResult r = run_tampered(s, [](std::vector<Declaration>& d) {
    std::erase_if(d, [](const Declaration& x) { return x.node == 1 && !x.dead; });
  });
  const auto* check = find_check(r, "no_false_suspicion");
  EXPECT_FALSE(check->passed);
  EXPECT_NE(check->detail.find("was still declared dead at"), std::string::npos) << check->detail;
  EXPECT_NE(check->detail.find("up and reachable since 3000"), std::string::npos) << check->detail;
}

TEST(Runner, NoFalseSuspicionIsNotApplicableWhenLatencyExceedsTheSlack) {
  Scenario s = small_scenario();
  s.network.latency = runtime::LatencyModel::uniform(1ms, 400ms);  // slack is 200 ms
  s.checks.push_back(CheckSpec{"no_false_suspicion", {}, std::nullopt, std::nullopt, 0});
  const RunResult r = scenarios::run_scenario(s, {});
  const auto* check = find_check(r, "no_false_suspicion");
  EXPECT_TRUE(check->passed);
  EXPECT_NE(check->detail.find("not applicable"), std::string::npos) << check->detail;
}

TEST(Runner, PartitionDetectedAfterStartFailsOnAnEarlyDeclaration) {
  Scenario s = small_scenario();
  FaultSpec partition{FaultSpec::Kind::partition, 2s, 0, 4s, {}, {1}, {0}, 0};
  s.faults.push_back(partition);
  s.checks.push_back(CheckSpec{"partition_detected_after_start", {}, std::nullopt, std::nullopt, 0});
  s.checks.push_back(CheckSpec{"declared_dead", {1}, std::nullopt, std::nullopt, 0});
  const RunResult honest = scenarios::run_scenario(s, {});
  ASSERT_TRUE(honest.passed);
  // Claim the monitor declared worker1 dead 10 ms into the partition: impossible by heartbeats.
  const RunResult r = run_tampered(s, [](std::vector<Declaration>& d) {
    for (Declaration& x : d) {
      if (x.node == 1 && x.dead) x.time = runtime::TimePoint{2010ms};
    }
  });
  const auto* check = find_check(r, "partition_detected_after_start");
  EXPECT_FALSE(check->passed);
  EXPECT_NE(check->detail.find("into its partition"), std::string::npos) << check->detail;
}

TEST(Runner, GeneratedScenariosPrintAsTomlTheLoaderAccepts) {
  // The replay path of a failing property: its printed scenario must load and run the same.
  rc::Random random(7);
  for (int i = 0; i < 20; ++i) {
    const Scenario s = gen_heartbeat_scenario()(random.split(), 30).value();
    const std::string text = to_toml(s);
    SCOPED_TRACE(text);
    Scenario loaded;
    ASSERT_NO_THROW(loaded = scenarios::parse_scenario(text, "generated.toml"));
    RunOptions o;
    o.seed = 3;
    EXPECT_EQ(scenarios::run_scenario(s, o).trace_hash, scenarios::run_scenario(loaded, o).trace_hash);
  }
}

}  // namespace
}  // namespace dagsim::conformance
