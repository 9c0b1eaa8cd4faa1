// Tests of RRefs in the program workload's scenario format (scenario_program.h,
// scenario_optimizer.h): parameters, `via = "remote"`, to_here, RRef arguments and the optimizer
// load with every value and their documented defaults, and every misuse of a name's type (an RRef
// where a tensor is needed, an RRef passed to a call that does not run on its owner, a tensor after
// an RRef) fails with "FILE:LINE: KEY: problem" saying why.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scenarios/format/scenario_test_util.h"

namespace dagsim::scenarios {
namespace {

using Init = ProgramTensor::Init;

TEST(ScenarioRRef, ParametersRemoteToHereRRefArgsAndTheOptimizerLoad) {
  const Scenario s = parse_scenario(R"(name = "rrefs"
tensors = [{ name = "x", shape = [2], requires_grad = false }]
parameters = [
  { name = "w", shape = [2], on = "worker1", init = "normal", scale = 0.5 },
  { name = "v", shape = [2], values = [1, 2] },
]
program = [
  { out = "r", call = "mul", args = ["x", "w"], via = "remote", on = "worker1" },
  { out = "q", call = "add", args = ["x", "r", "w"], via = "rpc_sync", on = "worker1" },
  { out = "t", call = "to_here", args = ["r"] },
  { out = "u", call = "mul", args = ["t", "v"] },
  { out = "loss", call = "sum", args = ["u"], via = "local" },
]
backward = { roots = ["loss", "q"], calls = 2 }
optimizer = { kind = "sgd", lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 }
[cluster]
nodes = 2
[[checks]]
kind = "params_match_local"
rtol = 1e-6
)",
                                    "r.toml");
  ASSERT_FALSE(s.workload.empty());
  const Program& p = program_of(s);
  ASSERT_EQ(p.parameters.size(), 2u);
  EXPECT_EQ(p.parameters[0].name, "w");
  EXPECT_EQ(p.parameters[0].on, 1u);
  EXPECT_EQ(p.parameters[0].init, Init::normal);
  EXPECT_EQ(p.parameters[0].scale, 0.5);
  EXPECT_EQ(p.parameters[1].on, 0u);  // the driver, by default
  EXPECT_EQ(p.parameters[1].init, Init::values);
  EXPECT_EQ(p.parameters[1].values, (std::vector<double>{1, 2}));
  EXPECT_EQ(p.parameters[1].scale, 1.0);
  EXPECT_EQ(p.owner_of("w"), 1u);
  EXPECT_EQ(p.owner_of("x"), 0u);

  ASSERT_EQ(p.statements.size(), 5u);
  EXPECT_EQ(p.statements[0].via, Via::remote);
  EXPECT_EQ(p.statements[0].args, (std::vector<std::string>{"x"}));
  EXPECT_EQ(p.statements[0].rrefs, (std::vector<std::string>{"w"}));
  EXPECT_EQ(p.statements[1].args, (std::vector<std::string>{"x"}));
  EXPECT_EQ(p.statements[1].rrefs, (std::vector<std::string>{"r", "w"}));  // a remote result, then a parameter
  EXPECT_EQ(p.statements[2].call, "to_here");
  EXPECT_EQ(p.statements[2].rrefs, (std::vector<std::string>{"r"}));
  EXPECT_TRUE(p.statements[2].args.empty());
  EXPECT_EQ(p.statements[3].args, (std::vector<std::string>{"t"}));
  EXPECT_EQ(p.statements[3].rrefs, (std::vector<std::string>{"v"}));  // local, and v lives on the driver

  ASSERT_TRUE(p.optimizer.has_value());
  EXPECT_EQ(p.optimizer->kind, ProgramOptimizer::Kind::sgd);
  EXPECT_EQ(p.optimizer->sgd.lr, 0.1);
  EXPECT_EQ(p.optimizer->sgd.momentum, 0.9);
  EXPECT_EQ(p.optimizer->sgd.dampening, 0);
  EXPECT_TRUE(p.optimizer->sgd.nesterov);
  EXPECT_EQ(p.optimizer->sgd.weight_decay, 0.01);
  EXPECT_TRUE(p.loss.empty());
  EXPECT_FALSE((s.workload.name() == "model"));
  ASSERT_EQ(s.checks.size(), 1u);
  EXPECT_EQ(s.checks[0].rtol, 1e-6);
}

// One line per key: 2 tensors, 3 parameters, 4 program, 5 backward, 6 optimizer (when given);
// three nodes. p1 lives on worker1, p0 on the driver.
constexpr std::string_view kParameters = R"({ name = "p1", shape = [2], on = "worker1" }, { name = "p0", shape = [2] })";
std::string rrefs(std::string_view statements, std::string_view backward = R"({ roots = ["y"] })",
                  std::string_view parameters = kParameters, std::string_view rest = "") {
  return "name = \"p\"\ntensors = [{ name = \"x\", shape = [2] }]\nparameters = [" + std::string(parameters) +
         "]\nprogram = [" + std::string(statements) + "]\nbackward = " + std::string(backward) + "\n" +
         std::string(rest) + "[cluster]\nnodes = 3\n";
}

TEST(ScenarioRRef, TheHelperScenarioLoads) {
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p1"] })")), "no error");
  // A program may have parameters and no tensors.
  EXPECT_EQ(error_of(R"(name = "p"
parameters = [{ name = "p", shape = [2], on = "worker1" }]
program = [{ out = "y", call = "to_here", args = ["p"] }]
backward = { roots = ["y"] }
)"),
            "no error");
}

TEST(ScenarioRRef, ParameterKeys) {
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2], requires_grad = false })")),
            "bad.toml:3: parameters[0].requires_grad: unknown key (requires_grad is a key of tensors); allowed keys in "
            "parameters: name, shape, values, init, scale, on, dtype, device");
  // A parameter on a GPU of its owner's needs the nodes to have one ([devices], gpu_parameters.toml).
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2], on = "worker1", device = "cuda:0" })")),
            "bad.toml:3: parameters[0].device: cuda:0 is not a GPU the nodes have: [devices] gpus = 0 (give the nodes "
            "GPUs with [devices] gpus = N)");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2], device = "gpu" })")),
            "bad.toml:3: parameters[0].device: Expected one of cpu, cuda device type at start of device string: gpu");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2], values = [1, 2], scale = 2 })")),
            "bad.toml:3: parameters[0].scale: scales seeded values (init) only; not allowed with values");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2], scale = nan })")),
            "bad.toml:3: parameters[0].scale: nan is out of range (-inf, inf)");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2], on = "worker3" })")),
            "bad.toml:3: parameters[0].on: unknown node \"worker3\"; nodes are worker0..worker2");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["x"] })", R"({ roots = ["y"] })",
                           R"({ name = "x", shape = [2] })")),
            "bad.toml:3: parameters[0].name: \"x\" is already defined by tensors[0]");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p"] })", R"({ roots = ["y"] })",
                           R"({ name = "p", shape = [2, 2], values = [1, 2] })")),
            "bad.toml:3: parameters[0].values: 2 values; shape [2, 2] needs 4");
}

TEST(ScenarioRRef, RRefArgumentsGoToCallsOnAnyWorker) {
  // On the owner the value is read in place; anywhere else the callee gets a fork and fetches it:
  // locally on the driver, by RPC to a third worker, and by remote call.
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "mul", args = ["x", "p1"] },
    { out = "a", call = "mul", args = ["x", "p1"], via = "rpc_async", on = "worker2" },
    { out = "b", call = "mul", args = ["x", "p0"], via = "rpc_sync", on = "worker1" },
    { out = "r", call = "neg", args = ["x"], via = "remote", on = "worker2" },
    { out = "c", call = "mul", args = ["x", "r"], via = "remote", on = "worker1" })")),
            "no error");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "mul", args = ["x", "p1"], via = "rpc_sync", on = "worker1" },
    { out = "r", call = "mul", args = ["x", "p1"], via = "remote", on = "worker1" },
    { out = "z", call = "mul", args = ["y", "p0"] })")),
            "no error");
}

TEST(ScenarioRRef, RRefArgumentsComeAfterTheTensors) {
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "mul", args = ["p1", "x"], via = "rpc_sync", on = "worker1" })")),
            "bad.toml:4: program[0].args: \"x\" is a tensor after the RRef argument \"p1\"; RRef arguments come after "
            "all tensors (the callee appends their values to the tensors)");
}

TEST(ScenarioRRef, ToHereTakesOneRRefOnTheDriver) {
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["x"] })")),
            "bad.toml:4: program[0].args: \"x\" is a tensor; to_here takes an RRef (a parameter or a remote result)");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p1", "p0"] })")),
            "bad.toml:4: program[0].args: to_here takes exactly one argument, an RRef; got 2");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p1"], via = "rpc_sync", on = "worker1" })")),
            "bad.toml:4: program[0].via: \"rpc_sync\" does not apply to call \"to_here\" (the driver fetches the value)");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p1"], on = "worker1" })")),
            "bad.toml:4: program[0].on: does not apply to via \"local\" (a local call runs on the driver)");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p1"], dim = 0 })")),
            "bad.toml:4: program[0].dim: does not apply to call \"to_here\" (it takes no attributes)");
  // Its result is a tensor: a tensor argument, and a root.
  EXPECT_EQ(error_of(rrefs(R"({ out = "t", call = "to_here", args = ["p1"] }, { out = "y", call = "neg", args = ["t"] })")),
            "no error");
}

TEST(ScenarioRRef, RootsAreTensors) {
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "neg", args = ["x"], via = "remote", on = "worker1" })")),
            "bad.toml:5: backward.roots: \"y\" is an RRef; roots must be tensors (fetch it with to_here)");
  EXPECT_EQ(error_of(rrefs(R"({ out = "y", call = "to_here", args = ["p1"] })", R"({ roots = ["y", "p0"] })")),
            "bad.toml:5: backward.roots: \"p0\" is an RRef; roots must be tensors (fetch it with to_here)");
}

TEST(ScenarioRRef, OptimizerKeysFollowTheKind) {
  const std::string to_here = R"({ out = "y", call = "to_here", args = ["p1"] })";
  auto with = [&](std::string_view optimizer) {
    return error_of(rrefs(to_here, R"({ roots = ["y"] })", kParameters, "optimizer = " + std::string(optimizer) + "\n"));
  };
  EXPECT_EQ(with(R"({ kind = "adam" })"), "no error");
  EXPECT_EQ(with(R"({ kind = "rmsprop", lr = 1 })"),
            "bad.toml:6: optimizer.kind: unknown value \"rmsprop\"; allowed: sgd, adam");
  EXPECT_EQ(with(R"({ lr = 1 })"), "bad.toml:6: optimizer.kind: required");
  EXPECT_EQ(with(R"({ kind = "sgd" })"), "bad.toml:6: optimizer.lr: required for kind \"sgd\"");
  EXPECT_EQ(with(R"({ kind = "sgd", lr = 0.1, beta1 = 0.5 })"),
            "bad.toml:6: optimizer.beta1: does not apply to kind \"sgd\"; allowed: kind, lr, momentum, dampening, "
            "nesterov, weight_decay");
  EXPECT_EQ(with(R"({ kind = "adam", momentum = 0.5 })"),
            "bad.toml:6: optimizer.momentum: does not apply to kind \"adam\"; allowed: kind, lr, beta1, beta2, eps, "
            "weight_decay");
  EXPECT_EQ(with(R"({ kind = "adam", amsgrad = true })"),
            "bad.toml:6: optimizer.amsgrad: unknown key; allowed keys for kind \"adam\": kind, lr, beta1, beta2, eps, "
            "weight_decay");
  EXPECT_EQ(with(R"({ kind = "sgd", lr = -0.1 })"), "bad.toml:6: optimizer.lr: -0.1 is out of range [0, inf)");
  EXPECT_EQ(with(R"({ kind = "sgd", lr = 0.1, nesterov = true })"),
            "bad.toml:6: optimizer.nesterov: Nesterov momentum needs momentum > 0 and dampening = 0 (as PyTorch's SGD)");
  EXPECT_EQ(with(R"({ kind = "adam", beta2 = 1 })"), "bad.toml:6: optimizer.beta2: 1 is out of range [0, 1)");
  EXPECT_EQ(with(R"(0.1)"), "bad.toml:6: optimizer: expected a table, got a float");
}

TEST(ScenarioRRef, AdamDefaultsArePyTorchs) {
  const Scenario s = parse_scenario(rrefs(R"({ out = "y", call = "to_here", args = ["p1"] })", R"({ roots = ["y"] })",
                                          kParameters, "optimizer = { kind = \"adam\" }\n"),
                                    "a.toml");
  ASSERT_TRUE(program_of(s).optimizer.has_value());
  const optim::AdamOptions& o = program_of(s).optimizer->adam;
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.weight_decay, 0);
}

TEST(ScenarioRRef, AnOptimizerOrParamsCheckNeedsParameters) {
  constexpr std::string_view kNoParameters = R"(name = "p"
tensors = [{ name = "x", shape = [2] }]
program = [{ out = "y", call = "neg", args = ["x"] }]
backward = { roots = ["y"] }
)";
  EXPECT_EQ(error_of(std::string(kNoParameters) + "optimizer = { kind = \"adam\" }\n"),
            "bad.toml:5: optimizer: steps parameters, and this program has none (add parameters = [...])");
  EXPECT_EQ(error_of(std::string(kNoParameters) + "[[checks]]\nkind = \"params_match_local\"\n"),
            "bad.toml:6: checks[0].kind: kind \"params_match_local\" compares parameters, and this program has none");
}

}  // namespace
}  // namespace dagsim::scenarios
