// The program workload end to end through the runner: the seed example's distributed gradients
// equal local autograd's (and are reported per worker as nested lists), contexts are released
// everywhere, a network with latency and a healing partition changes nothing, and an unused RPC
// result fails the program cleanly (expect_error) instead of hanging.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "scenarios/run/runner.h"
#include "sim/trace.h"
#include "scenarios/workloads/program/program_workload.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using scenarios::CheckSpec;
using scenarios::Program;
using scenarios::ProgramTensor;
using scenarios::Statement;
using scenarios::Via;

scenarios::Scenario seed_example() {
  scenarios::Scenario s;
  s.name = "seed_example";
  s.cluster.nodes = 2;
  Program p;
  p.tensors = {ProgramTensor{"t1", {3, 3}, ProgramTensor::Init::uniform, {}, true},
               ProgramTensor{"t2", {3, 3}, ProgramTensor::Init::normal, {}, true},
               ProgramTensor{"t4", {3, 3}, ProgramTensor::Init::values, {1, 2, 3, 4, 5, 6, 7, 8, 9}, true}};
  p.statements = {Statement{{"t3"}, "add", {"t1", "t2"}, {}, Via::rpc_sync, 1},
                  Statement{{"t5"}, "mul", {"t3", "t4"}, {}, Via::local, 0},
                  Statement{{"loss"}, "sum", {"t5"}, {}, Via::local, 0}};
  p.roots = {"loss"};
  s.workload = scenarios::WorkloadSpec("program", p);
  s.checks = {CheckSpec{"gradients_match_local", {}, std::nullopt, std::nullopt, 0},
              CheckSpec{"no_leaked_contexts", {}, std::nullopt, std::nullopt, 0}};
  return s;
}

const scenarios::CheckResult& check(const scenarios::RunResult& r, const std::string& name) {
  for (const auto& c : r.checks) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no check " + name);
}

// Profiling in the trace (issue 13, item 12): the distributed backward's work on each node, as
// autograd slices named after what ran, between its pass's begin and end, beside the send and
// deliver events of the gradient messages.
TEST(ProgramWorkload, TheTraceShowsEachNodesBackwardFunctionByFunction) {
  const scenarios::Scenario s = seed_example();
  scenarios::RunOptions o;
  o.seed = 42;
  o.keep_trace = true;
  std::map<uint32_t, std::vector<std::string>> ran;  // node -> autograd details, in order
  o.inspect_trace = [&](const sim::Trace& trace, const std::vector<std::string>&) {
    for (const sim::TraceEvent& e : trace.events()) {
      if (e.kind == sim::TraceKind::autograd) ran[e.node].push_back(e.detail.substr(0, e.detail.find(" context")));
    }
  };
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  ASSERT_TRUE(r.passed);
  // worker0: its backward from the loss down to the recv function, which sends t3's gradient to
  // worker1; then, when worker1 answers, its send function and the leaves t1 and t2.
  EXPECT_EQ(ran[0], (std::vector<std::string>{"pass begins,", "GraphRoot", "SumBackward", "MulBackward", "AccumulateGrad",
                                                "RecvRpcBackward", "SendRpcBackward", "AccumulateGrad", "AccumulateGrad",
                                                "pass ends,"}));
  // worker1: a pass for the gradients from worker0: its send function, the add, its recv function.
  EXPECT_EQ(ran[1], (std::vector<std::string>{"pass begins,", "SendRpcBackward", "AddBackward", "RecvRpcBackward",
                                                "pass ends,"}));
}

TEST(ProgramWorkload, TheSeedExampleMatchesLocalAutogradAndReportsItsGradients) {
  const scenarios::Scenario s = seed_example();
  scenarios::RunOptions o;
  o.seed = 42;
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  for (const auto& c : r.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  const auto& grads = r.workload.at("gradients").at("worker0");
  ASSERT_EQ(grads.size(), 3u);
  // d loss / d t1 = t4, as nested lists by shape.
  EXPECT_EQ(grads.at("t1"), nlohmann::json::parse("[[1,2,3],[4,5,6],[7,8,9]]"));
  EXPECT_EQ(r.workload.at("local_gradients").at("worker0").at("t4"), grads.at("t4"));
  EXPECT_EQ(r.outcome, "finished");
  // Seeded leaves are a function of the seed.
  scenarios::RunOptions other;
  other.seed = 43;
  EXPECT_NE(scenarios::run_scenario(s, other).workload.at("gradients").at("worker0").at("t4"), grads.at("t4"));
}

TEST(ProgramWorkload, LatencyAndAHealingPartitionChangeNothing) {
  scenarios::Scenario s = seed_example();
  s.network.latency = runtime::LatencyModel::uniform(100us, 3ms);
  s.faults.push_back(scenarios::FaultSpec{scenarios::FaultSpec::Kind::partition, 0ms, 0, 200ms, {{0}, {1}}, {}, {}, 0});
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    scenarios::RunOptions o;
    o.seed = seed;
    const scenarios::RunResult r = scenarios::run_scenario(s, o);
    EXPECT_TRUE(r.passed) << seed << ": " << check(r, "gradients_match_local").detail;
  }
}

TEST(ProgramWorkload, AnUnusedRpcFailsTheProgramCleanly) {
  scenarios::Scenario s = seed_example();
  s.workload.as<scenarios::Program>().statements.insert(s.workload.as<scenarios::Program>().statements.begin() + 1,
                               Statement{{"unused"}, "neg", {"t1"}, {}, Via::rpc_sync, 1});
  s.checks = {CheckSpec{"expect_error", {}, std::nullopt, std::nullopt, 0, "never received gradients: 'unused' (autograd message id"},
              CheckSpec{"no_leaked_contexts", {}, std::nullopt, std::nullopt, 0}};
  const scenarios::RunResult r = scenarios::run_scenario(s, {});
  EXPECT_TRUE(check(r, "expect_error").passed) << check(r, "expect_error").detail;
  EXPECT_TRUE(check(r, "run_completed").passed) << check(r, "run_completed").detail;
  EXPECT_TRUE(check(r, "no_leaked_contexts").passed) << check(r, "no_leaked_contexts").detail;
  EXPECT_TRUE(r.passed);
}

// A comparison with an oracle that failed says so, instead of reporting gradient mismatches.
TEST(ProgramWorkload, AnOracleThatFailsIsReportedAsSuch) {
  scenarios::Scenario s = seed_example();
  s.workload.as<scenarios::Program>().statements[1].call = "no_such_function";
  // The distributed run fails too; judge as if it had not, so only the oracle's failure is left.
  scenarios::RunOptions o;
  o.before_checks = [](scenarios::RunRecords& records) {
    EXPECT_TRUE(records.nodes.at(0).data.contains("error"));
    records.nodes.at(0).data.erase("error");
  };
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  const scenarios::CheckResult& grads = check(r, "gradients_match_local");
  EXPECT_FALSE(grads.passed);
  EXPECT_EQ(grads.detail.rfind("the local oracle failed: ", 0), 0u) << grads.detail;
  EXPECT_NE(grads.detail.find("no_such_function"), std::string::npos) << grads.detail;
  EXPECT_NE(r.workload.at("program").at("local_error").get<std::string>().find("no_such_function"), std::string::npos);
}

// no_leaked_contexts judges each live node's last record, and only those.
TEST(ProgramWorkload, NoLeakedContextsFailsNamingTheNodeThatHoldsOne) {
  const scenarios::Scenario s = seed_example();
  scenarios::RunOptions o;
  o.before_checks = [](scenarios::RunRecords& records) {
    ASSERT_EQ(records.nodes.at(1).node, 1u);
    EXPECT_EQ(records.nodes.at(1).data.at("contexts_at_end"), 0);
    records.nodes.at(1).data["contexts_at_end"] = 2;
  };
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  EXPECT_TRUE(check(r, "gradients_match_local").passed);
  EXPECT_FALSE(check(r, "no_leaked_contexts").passed);
  EXPECT_EQ(check(r, "no_leaked_contexts").detail, "worker1 holds 2 context(s); ");
  // A node that is down at the end holds nothing, whatever its last record says.
  o.before_checks = [](scenarios::RunRecords& records) {
    records.nodes.at(1).data["contexts_at_end"] = 2;
    records.final_states.at(1) = runtime::NodeState::killed;
  };
  EXPECT_TRUE(check(scenarios::run_scenario(s, o), "no_leaked_contexts").passed);
}

}  // namespace
}  // namespace dagsim::conformance
