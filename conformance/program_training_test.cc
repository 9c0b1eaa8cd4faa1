// The program workload with parameters, RRefs and an optimizer, and the model + train workload,
// end to end through the runner: gradients through remote results, to_here and RRef arguments
// equal local autograd's and are reported under each parameter's owner; the optimizer's state
// (momentum) carries across backward calls in both runs, to the value SGD's rule gives by hand;
// a trained MLP's losses and parameters equal local training's; and params_match_local fails,
// naming the parameter, when the distributed parameters differ.
#include <gtest/gtest.h>

#include "core/tensor/ops.h"
#include "scenarios/workloads/program/model_spec.h"
#include "scenarios/workloads/program/program_workload.h"
#include "scenarios/run/runner.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using scenarios::CheckSpec;
using scenarios::Program;
using scenarios::ProgramParameter;
using scenarios::ProgramTensor;
using scenarios::Statement;
using scenarios::Via;

CheckSpec check_of(const std::string& kind) { return CheckSpec{kind, {}, std::nullopt, std::nullopt, 0}; }

const scenarios::CheckResult& result_of(const scenarios::RunResult& r, const std::string& name) {
  for (const auto& c : r.checks) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no check " + name);
}

// p on worker1 and q on the driver; c is a constant leaf. Per call:
//   r = remote(worker1, mul, c, p)     (RRef argument p on its owner)
//   s = remote(worker1, exp, r)        (a remote result as an RRef argument on its owner)
//   t = to_here(s); u = mul(t, q)      (q: the driver's own parameter, by RRef, locally)
//   loss = sum(u)
scenarios::Scenario remote_program(uint32_t calls, std::optional<scenarios::ProgramOptimizer> optimizer) {
  scenarios::Scenario s;
  s.name = "remote_program";
  s.cluster.nodes = 3;
  s.network.latency = runtime::LatencyModel::uniform(50us, 800us);
  Program p;
  p.tensors = {ProgramTensor{"c", {2, 2}, ProgramTensor::Init::values, {0.5, -1, 2, 0.25}, false}};
  p.parameters = {ProgramParameter{"p", {2, 2}, ProgramTensor::Init::uniform, {}, 0.5, 1},
                  ProgramParameter{"q", {2}, ProgramTensor::Init::values, {1, -2}, 1.0, 0}};
  p.statements = {Statement{{"r"}, "mul", {"c"}, {}, Via::remote, 1, {"p"}},
                  Statement{{"s"}, "exp", {}, {}, Via::remote, 1, {"r"}},
                  Statement{{"t"}, "to_here", {}, {}, Via::local, 0, {"s"}},
                  Statement{{"u"}, "mul", {"t"}, {}, Via::local, 0, {"q"}},
                  Statement{{"loss"}, "sum", {"u"}, {}, Via::local, 0}};
  p.roots = {"loss"};
  p.backward_calls = calls;
  p.optimizer = optimizer;
  s.workload = scenarios::WorkloadSpec("program", p);
  s.checks = {check_of("gradients_match_local"), check_of("params_match_local"), check_of("no_leaked_contexts")};
  return s;
}

TEST(ProgramTraining, GradientsThroughRemoteResultsAndToHereEqualLocalOnesByOwner) {
  const scenarios::Scenario s = remote_program(2, std::nullopt);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    scenarios::RunOptions o;
    o.seed = seed;
    const scenarios::RunResult r = scenarios::run_scenario(s, o);
    for (const auto& c : r.checks) EXPECT_TRUE(c.passed) << seed << " " << c.name << ": " << c.detail;
    const nlohmann::json& grads = r.workload.at("gradients");
    ASSERT_TRUE(grads.contains("worker1") && grads["worker1"].contains("p")) << grads.dump();
    ASSERT_TRUE(grads.contains("worker0") && grads["worker0"].contains("q")) << grads.dump();
    EXPECT_EQ(grads, r.workload.at("local_gradients"));
    EXPECT_FALSE(grads["worker0"].contains("c")) << "c needs no gradient";
    // Without an optimizer the parameters stay as they were.
    EXPECT_EQ(r.workload.at("params").at("worker0").at("q"), nlohmann::json::parse("[1.0, -2.0]"));
  }
}

TEST(ProgramTraining, MomentumCarriesAcrossBackwardCallsInBothRuns) {
  // loss = sum(k * p) for a constant k: every call's gradient is k, so SGD with momentum 0.9 and
  // lr 0.1 moves p by 0.1 k (1 + 1.9 + 2.71) = 0.561 k over three calls (0.3 k if the momentum
  // buffer were lost between calls).
  scenarios::Scenario s;
  s.name = "momentum";
  s.cluster.nodes = 2;
  Program p;
  p.tensors = {ProgramTensor{"k", {2}, ProgramTensor::Init::values, {1, -2}, false}};
  p.parameters = {ProgramParameter{"p", {2}, ProgramTensor::Init::values, {3, 4}, 1.0, 1}};
  p.statements = {Statement{{"m"}, "mul", {"k"}, {}, Via::rpc_sync, 1, {"p"}},
                  Statement{{"loss"}, "sum", {"m"}, {}, Via::local, 0}};
  p.roots = {"loss"};
  p.backward_calls = 3;
  p.optimizer = scenarios::ProgramOptimizer{.kind = scenarios::ProgramOptimizer::Kind::sgd,
                                            .sgd = {.lr = 0.1, .momentum = 0.9}};
  s.workload = scenarios::WorkloadSpec("program", p);
  s.checks = {check_of("params_match_local"), check_of("gradients_match_local")};
  const scenarios::RunResult r = scenarios::run_scenario(s, {});
  for (const auto& c : r.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  for (const char* key : {"params", "local_params"}) {
    const std::vector<double> trained = r.workload.at(key).at("worker1").at("p").get<std::vector<double>>();
    ASSERT_EQ(trained.size(), 2u);
    EXPECT_NEAR(trained[0], 3 - 0.561 * 1, 1e-12) << key;
    EXPECT_NEAR(trained[1], 4 - 0.561 * -2, 1e-12) << key;
  }
  EXPECT_EQ(r.workload.at("gradients").at("worker1").at("p"), nlohmann::json::parse("[3.0, -6.0]"));
}

TEST(ProgramTraining, AdamOverRemoteResultsTrainsLikeLocalTraining) {
  const scenarios::Scenario s =
      remote_program(4, scenarios::ProgramOptimizer{.kind = scenarios::ProgramOptimizer::Kind::adam, .adam = {.lr = 0.05}});
  scenarios::RunOptions o;
  o.seed = 7;
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  for (const auto& c : r.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  EXPECT_NE(r.workload.at("params").at("worker0").at("q"), nlohmann::json::parse("[1.0, -2.0]")) << "q moved";
}

TEST(ProgramTraining, ParamsMatchLocalFailsNamingTheParameterThatDiffers) {
  const scenarios::Scenario s =
      remote_program(2, scenarios::ProgramOptimizer{.kind = scenarios::ProgramOptimizer::Kind::sgd, .sgd = {.lr = 0.1}});
  scenarios::RunOptions o;
  // The driver's record holds what distributed autograd produced; the judge reads only that.
  o.before_checks = [](scenarios::RunRecords& records) {
    nlohmann::json& params = records.nodes.at(0).data.at("params");
    const Tensor p = scenarios::tensor_from_record(params.at("p"), "p");
    params["p"] = scenarios::tensor_record(add(p, 1e-6));  // one step off by a little
  };
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  const scenarios::CheckResult& params = result_of(r, "params_match_local");
  EXPECT_FALSE(params.passed);
  EXPECT_EQ(params.detail.rfind("p: ", 0), 0u) << params.detail;
  EXPECT_EQ(params.detail.find("q:"), std::string::npos) << "q still matches: " << params.detail;
  EXPECT_TRUE(result_of(r, "gradients_match_local").passed);
  EXPECT_FALSE(r.passed);

  o.before_checks = [](scenarios::RunRecords& records) { records.nodes.at(0).data.at("params").erase("q"); };
  const scenarios::RunResult without_q = scenarios::run_scenario(s, o);
  const scenarios::CheckResult& missing = result_of(without_q, "params_match_local");
  EXPECT_FALSE(missing.passed);
  EXPECT_EQ(missing.detail, "q: no distributed parameter; ");
}

TEST(ProgramTraining, AnMlpTrainsLikeLocalTrainingAndReportsItsLosses) {
  scenarios::ModelSpec model;
  model.input = 4;
  model.layers = {{6, 1, scenarios::Activation::tanh}, {5, 0, scenarios::Activation::sigmoid},
                  {3, 2, scenarios::Activation::relu}, {2, 1, scenarios::Activation::none}};
  model.steps = 6;
  model.batch = 5;
  model.optimizer = {.kind = scenarios::ProgramOptimizer::Kind::sgd, .sgd = {.lr = 0.2, .momentum = 0.5}};
  scenarios::Scenario s;
  s.name = "mlp";
  s.cluster.nodes = 3;
  s.network.latency = runtime::LatencyModel::uniform(50us, 500us);
  s.workload = scenarios::WorkloadSpec("model", scenarios::ModelProgram{model, scenarios::compile_model(model)});
  s.checks = {check_of("params_match_local"), check_of("gradients_match_local"), check_of("no_leaked_contexts")};
  scenarios::RunOptions o;
  o.seed = 11;
  const scenarios::RunResult r = scenarios::run_scenario(s, o);
  for (const auto& c : r.checks) EXPECT_TRUE(c.passed) << c.name << ": " << c.detail;
  EXPECT_EQ(r.workload.at("workload"), "model");
  const std::vector<double> losses = r.workload.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 6u);
  EXPECT_EQ(r.workload.at("local_losses").get<std::vector<double>>(), losses);
  EXPECT_LT(losses.back(), losses.front()) << "training lowers the loss";
  // Parameters are reported under their owners: layers 1 and 4 on worker1, 2 on the driver.
  const nlohmann::json& params = r.workload.at("params");
  EXPECT_TRUE(params.at("worker1").contains("w1") && params.at("worker1").contains("b4"));
  EXPECT_TRUE(params.at("worker0").contains("w2"));
  EXPECT_TRUE(params.at("worker2").contains("b3"));
}

}  // namespace
}  // namespace dagsim::conformance
