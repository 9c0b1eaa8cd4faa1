// Tests of the program workload in the scenario format (scenario_program.h): the seed example
// loads with every value, defaults are the documented ones, and each rule fails with
// "FILE:LINE: KEY: problem" naming the right line and key path.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "scenarios/format/scenario_test_util.h"
#include "scenarios/format/scenario_loader.h"

namespace dagsim::scenarios {
namespace {

using Init = ProgramTensor::Init;
using Attributes = std::map<std::string, double>;


// The seed example of DESIGN.md ("Scenarios"), as the task gives it.
constexpr std::string_view kSeed = R"(name = "seed_example"
tensors = [
  { name = "t1", shape = [3, 3], requires_grad = true, on = "worker0" },
  { name = "t2", shape = [3, 3], requires_grad = true, on = "worker0", init = "normal" },
  { name = "t4", shape = [3, 3], values = [1, 2, 3, 4, 5, 6, 7, 8, 9] },
]
program = [
  { out = "t3", call = "add", args = ["t1", "t2"], on = "worker1", via = "rpc_sync" },
  { out = "t5", call = "mul", args = ["t3", "t4"] },
  { out = "loss", call = "sum", args = ["t5"] },
]
backward = { roots = ["loss"] }
[cluster]
nodes = 2
[[checks]]
kind = "gradients_match_local"
rtol = 1e-9
)";

TEST(ScenarioProgram, SeedExampleLoads) {
  const Scenario s = parse_scenario(kSeed, "seed.toml");
  EXPECT_EQ(s.name, "seed_example");
  EXPECT_FALSE((s.workload.name() == "heartbeat"));
  ASSERT_FALSE(s.workload.empty());
  const Program& p = program_of(s);
  EXPECT_EQ(p.driver, 0u);

  ASSERT_EQ(p.tensors.size(), 3u);
  EXPECT_EQ(p.tensors[0].name, "t1");
  EXPECT_EQ(p.tensors[0].shape, (Shape{3, 3}));
  EXPECT_EQ(p.tensors[0].init, Init::uniform);  // neither values nor init
  EXPECT_TRUE(p.tensors[0].values.empty());
  EXPECT_TRUE(p.tensors[0].requires_grad);
  EXPECT_EQ(p.tensors[1].name, "t2");
  EXPECT_EQ(p.tensors[1].init, Init::normal);
  EXPECT_TRUE(p.tensors[1].values.empty());
  EXPECT_EQ(p.tensors[2].name, "t4");
  EXPECT_EQ(p.tensors[2].init, Init::values);
  EXPECT_EQ(p.tensors[2].values, (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(p.tensors[2].requires_grad);  // the default

  ASSERT_EQ(p.statements.size(), 3u);
  EXPECT_EQ(p.statements[0].out(), "t3");
  EXPECT_EQ(p.statements[0].call, "add");
  EXPECT_EQ(p.statements[0].args, (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(p.statements[0].via, Via::rpc_sync);
  EXPECT_EQ(p.statements[0].on, 1u);
  EXPECT_TRUE(p.statements[0].attributes.empty());
  EXPECT_EQ(p.statements[1].out(), "t5");
  EXPECT_EQ(p.statements[1].call, "mul");
  EXPECT_EQ(p.statements[1].args, (std::vector<std::string>{"t3", "t4"}));
  EXPECT_EQ(p.statements[1].via, Via::local);
  EXPECT_EQ(p.statements[1].on, 0u);
  EXPECT_EQ(p.statements[2].out(), "loss");
  EXPECT_EQ(p.statements[2].call, "sum");

  EXPECT_EQ(p.roots, (std::vector<std::string>{"loss"}));
  EXPECT_FALSE(p.retain_graph);
  EXPECT_EQ(p.backward_calls, 1u);

  ASSERT_EQ(s.checks.size(), 1u);
  EXPECT_EQ(s.checks[0].kind, "gradients_match_local");
  EXPECT_EQ(s.checks[0].rtol, 1e-9);
  EXPECT_EQ(s.checks[0].atol, std::nullopt);  // the check applies its own default
  EXPECT_EQ(s.checks[0].line, 15);
}

TEST(ScenarioProgram, AttributesRelaysBackwardAndChecks) {
  const Scenario s = parse_scenario(R"(name = "more"
tensors = [
  { name = "x", shape = [2, 3], requires_grad = false, init = "uniform" },
  { name = "w", shape = [3], values = [0.5, -1, 2e-3] },
  { name = "_scalar", shape = [], values = [4] },
]
program = [
  { out = "s", call = "sum", args = ["x"], dim = 0, keepdim = true },
  { out = "r", call = "relay_mul", args = ["s", "w"], via = "rpc_async", on = "worker2", to = "worker1" },
  { out = "n", call = "narrow", args = ["r"], dim = -1, start = 1, length = 2.0 },
  { out = "q", call = "pow", args = ["n"], exponent = 1.5, via = "rpc_sync", on = "worker0" },
  { out = "t", call = "transpose", args = ["x"], dim0 = 0, dim1 = false },
  { out = "local_relay", call = "relay_add", args = ["q", "q"], to = "worker2" },
]
backward = { roots = ["q", "_scalar"], retain_graph = true, calls = 3 }
[cluster]
nodes = 3
[[checks]]
kind = "gradients_match_local"
rtol = 0
atol = 1e-6
[[checks]]
kind = "no_leaked_contexts"
[[checks]]
kind = "expect_error"
message = "shape mismatch"
)",
                                    "more.toml");
  ASSERT_FALSE(s.workload.empty());
  const Program& p = program_of(s);
  EXPECT_EQ(p.tensors[0].init, Init::uniform);
  EXPECT_FALSE(p.tensors[0].requires_grad);
  EXPECT_EQ(p.tensors[1].values, (std::vector<double>{0.5, -1, 2e-3}));
  EXPECT_EQ(p.tensors[2].shape, Shape{});
  EXPECT_EQ(p.tensors[2].values, (std::vector<double>{4}));

  ASSERT_EQ(p.statements.size(), 6u);
  EXPECT_EQ(p.statements[0].attributes, (Attributes{{"dim", 0}, {"keepdim", 1}}));
  EXPECT_EQ(p.statements[1].call, "relay_mul");
  EXPECT_EQ(p.statements[1].via, Via::rpc_async);
  EXPECT_EQ(p.statements[1].on, 2u);
  EXPECT_EQ(p.statements[1].attributes, (Attributes{{"to", 1}}));  // the node's index
  EXPECT_EQ(p.statements[2].attributes, (Attributes{{"dim", -1}, {"start", 1}, {"length", 2}}));
  EXPECT_EQ(p.statements[3].attributes, (Attributes{{"exponent", 1.5}}));
  EXPECT_EQ(p.statements[3].via, Via::rpc_sync);
  EXPECT_EQ(p.statements[3].on, 0u);  // a call to the driver itself is legal
  EXPECT_EQ(p.statements[4].attributes, (Attributes{{"dim0", 0}, {"dim1", 0}}));
  EXPECT_EQ(p.statements[5].via, Via::local);  // a relay run locally still forwards by RPC
  EXPECT_EQ(p.statements[5].attributes, (Attributes{{"to", 2}}));

  EXPECT_EQ(p.roots, (std::vector<std::string>{"q", "_scalar"}));
  EXPECT_TRUE(p.retain_graph);
  EXPECT_EQ(p.backward_calls, 3u);

  ASSERT_EQ(s.checks.size(), 3u);
  EXPECT_EQ(s.checks[0].rtol, 0.0);
  EXPECT_EQ(s.checks[0].atol, 1e-6);
  EXPECT_EQ(s.checks[1].kind, "no_leaked_contexts");
  EXPECT_EQ(s.checks[2].kind, "expect_error");
  EXPECT_EQ(s.checks[2].message, "shape mismatch");
}

// A program scenario with one line per workload key, so errors name lines 2 (tensors),
// 3 (program) and 4 (backward); `rest` starts on line 7, after a three-node [cluster].
constexpr std::string_view kTensors = R"({ name = "a", shape = [2] }, { name = "b", shape = [2] })";
constexpr std::string_view kStatements = R"({ out = "y", call = "add", args = ["a", "b"] })";
constexpr std::string_view kBackward = R"({ roots = ["y"] })";
std::string program(std::string_view tensors = kTensors, std::string_view statements = kStatements,
                    std::string_view backward = kBackward, std::string_view rest = "") {
  return "name = \"p\"\ntensors = [" + std::string(tensors) + "]\nprogram = [" + std::string(statements) +
         "]\nbackward = " + std::string(backward) + "\n[cluster]\nnodes = 3\n" + std::string(rest);
}

TEST(ScenarioProgram, TheHelperScenarioLoads) { EXPECT_EQ(error_of(program()), "no error"); }

// ---- The workload: exactly one, and all three program keys.

TEST(ScenarioProgram, ProgramKeysComeTogether) {
  EXPECT_EQ(error_of(R"(name = "x"
tensors = [{ name = "a", shape = [1] }]
program = [{ out = "y", call = "neg", args = ["a"] }]
)"),
            "bad.toml:2: tensors: a program workload needs program and backward; missing backward");
  EXPECT_EQ(error_of(R"(name = "x"
backward = { roots = ["y"] }
)"),
            "bad.toml:2: backward: a program workload needs program and backward; missing program");
}

TEST(ScenarioProgram, AScenarioHasExactlyOneWorkload) {
  EXPECT_EQ(error_of(program() + "[heartbeat]\n"),
            "bad.toml:7: heartbeat: a scenario has exactly one workload, and this one already has program + backward");
  // Named at whichever comes second in the file, even when the program is incomplete.
  EXPECT_EQ(error_of(R"(name = "x"
backward = { roots = ["y"] }
[heartbeat]
)"),
            "bad.toml:3: heartbeat: a scenario has exactly one workload, and this one already has program + backward");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[cluster]
nodes = 2
[[program]]
out = "y"
)"),
            "bad.toml:5: program: a scenario has exactly one workload, and this one already has [heartbeat]");
}

// ---- tensors

TEST(ScenarioProgram, TensorsAreAnArrayOfTables) {
  EXPECT_EQ(error_of(program("1, 2")), "bad.toml:2: tensors[0]: expected a table, got an integer");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], pin_memory = true })")),
            "bad.toml:2: tensors[0].pin_memory: unknown key; allowed keys in tensors: name, shape, values, init, "
            "requires_grad, on, dtype, device");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], device = "cuda" })")),
            "bad.toml:2: tensors[0].device: cuda is not a GPU the nodes have: [devices] gpus = 0 (give the nodes GPUs "
            "with [devices] gpus = N)");
}

TEST(ScenarioProgram, TensorsAndParametersHaveADtype) {
  const Scenario sc = parse_scenario(program(R"({ name = "a", shape = [2], dtype = "float32" }, { name = "b", shape = [2] })"),
                                     "dtype.toml");
  EXPECT_EQ(program_of(sc).tensors[0].dtype, Dtype::float32);
  EXPECT_EQ(program_of(sc).tensors[1].dtype, Dtype::float64);  // the default
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], dtype = "float16" }, { name = "b", shape = [2] })")),
            "bad.toml:2: tensors[0].dtype: unknown value \"float16\"; allowed: float32, float64");
}

TEST(ScenarioProgram, TensorNamesAreUniqueIdentifiers) {
  EXPECT_EQ(error_of(program(R"({ shape = [2] })")), "bad.toml:2: tensors[0].name: required");
  EXPECT_EQ(error_of(program(R"({ name = "1a", shape = [2] })")),
            "bad.toml:2: tensors[0].name: \"1a\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  EXPECT_EQ(error_of(program(R"({ name = "a-b", shape = [2] })")),
            "bad.toml:2: tensors[0].name: \"a-b\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2] }, { name = "a", shape = [2] })")),
            "bad.toml:2: tensors[1].name: \"a\" is already defined by tensors[0]");
}

TEST(ScenarioProgram, ShapesAreBounded) {
  EXPECT_EQ(error_of(program(R"({ name = "a" })")), "bad.toml:2: tensors[0].shape: required");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2, -1] })")),
            "bad.toml:2: tensors[0].shape[1]: -1 is out of range [0, 10000000]");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2.0] })")),
            "bad.toml:2: tensors[0].shape[0]: expected an integer, got a float");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [1, 1, 1, 1, 1, 1, 1, 1, 1] })")),
            "bad.toml:2: tensors[0].shape: rank 9 is more than 8");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [10000, 10000, 10000] })")),
            "bad.toml:2: tensors[0].shape: [10000, 10000, 10000] has more than 10000000 elements");
  // Zero elements is a valid shape, its other sizes held to the limit as if each 0 were a 1 (the
  // one rule, within_shape_limit, so `validate` and `run` agree: [0, 10^7, 10^7, 10^7] once
  // validated and then failed the run's tensor code with exit 3).
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [10000, 1000, 0] }, { name = "b", shape = [2] })")),
            "no error");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [10000000, 10000000, 0] })")),
            "bad.toml:2: tensors[0].shape: [10000000, 10000000, 0] has more than 10000000 elements counting its zeros "
            "as ones (an empty tensor's sizes are held too)");
  EXPECT_EQ(error_of(program(R"({ name = "x", shape = [0, 10000000, 10000000, 10000000] })")),
            "bad.toml:2: tensors[0].shape: [0, 10000000, 10000000, 10000000] has more than 10000000 elements counting "
            "its zeros as ones (an empty tensor's sizes are held too)");
  // A statement's inferred result is held by the same rule.
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [10000, 1, 0] }, { name = "b", shape = [1, 10000, 1] })",
                             R"({ out = "c", call = "add", args = ["a", "b"] })", R"({ roots = ["c"] })")),
            "bad.toml:3: program[0]: \"c\" = add(...) has shape [10000, 10000, 0], 100000000 elements counting its "
            "zeros as ones; a tensor has at most 10000000");
}

TEST(ScenarioProgram, ValuesMatchTheShapeAndExcludeInit) {
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2, 2], values = [1, 2, 3] })")),
            "bad.toml:2: tensors[0].values: 3 values; shape [2, 2] needs 4");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], values = [1, "2"] })")),
            "bad.toml:2: tensors[0].values[1]: expected a number, got a string");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], values = [1, nan] })")),
            "bad.toml:2: tensors[0].values[1]: nan is out of range (-inf, inf)");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], values = [1, 2], init = "normal" })")),
            "bad.toml:2: tensors[0].init: not allowed with values; give one or the other");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], init = "zeros" })")),
            "bad.toml:2: tensors[0].init: unknown value \"zeros\"; allowed: uniform, normal");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], requires_grad = 1 })")),
            "bad.toml:2: tensors[0].requires_grad: expected a boolean, got an integer");
}

TEST(ScenarioProgram, LeavesLiveOnTheDriver) {
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], on = "worker0" }, { name = "b", shape = [2], on = "worker1" })")),
            "bad.toml:2: tensors[1].on: leaves must live on the driver (worker0); a leaf on another worker is a "
            "parameter (parameters = [...])");
  EXPECT_EQ(error_of(program(R"({ name = "a", shape = [2], on = "worker7" })")),
            "bad.toml:2: tensors[0].on: unknown node \"worker7\"; nodes are worker0..worker2");
}

// ---- program

TEST(ScenarioProgram, StatementOutputsAreUniqueIdentifiers) {
  const std::string tensors = R"({ name = "a", shape = [2] })";
  EXPECT_EQ(error_of(program(tensors, R"({ call = "neg", args = ["a"] })")), "bad.toml:3: program[0].out: required");
  EXPECT_EQ(error_of(program(tensors, R"({ out = "y z", call = "neg", args = ["a"] })")),
            "bad.toml:3: program[0].out: \"y z\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  EXPECT_EQ(error_of(program(tensors, R"({ out = "a", call = "neg", args = ["a"] })")),
            "bad.toml:3: program[0].out: \"a\" is already defined by tensors[0]");
  EXPECT_EQ(error_of(program(tensors, R"({ out = "y", call = "neg", args = ["a"] }, { out = "y", call = "exp", args = ["y"] })")),
            "bad.toml:3: program[1].out: \"y\" is already defined by program[0]");
}

TEST(ScenarioProgram, AStatementOfSeveralResultsNamesEach) {
  const Scenario sc = parse_scenario(
      program(kTensors, R"({ out = ["p0", "p1"], call = "chunk", args = ["a"], chunks = 2 }, { out = "y", call = "sum", args = ["p1"] })"),
      "multi.toml");
  const Program& p = program_of(sc);
  ASSERT_EQ(p.statements.size(), 2u);
  EXPECT_EQ(p.statements[0].outs, (std::vector<std::string>{"p0", "p1"}));
  EXPECT_EQ(error_of(program(kTensors, R"({ out = [], call = "chunk", args = ["a"], chunks = 2 })")),
            "bad.toml:3: program[0].out: names no result (give one name, or an array of at least one)");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = ["p0", "p0"], call = "chunk", args = ["a"], chunks = 2 })")),
            "bad.toml:3: program[0].out[1]: \"p0\" is already defined by program[0]");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = ["p0", 3], call = "chunk", args = ["a"], chunks = 2 })")),
            "bad.toml:3: program[0].out[1]: expected a string, got an integer");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = ["r"], call = "neg", args = ["a"], via = "remote", on = "worker1" })")),
            "bad.toml:3: program[0].out: a remote call gives one RRef: name it with a string");
}

TEST(ScenarioProgram, MessageFaultsNameANodeARequestTypeAndFailOrDelay) {
  // On line 5, after backward and before [cluster].
  const auto with = [](std::string_view faults) {
    return program(kTensors, kStatements, std::string(kBackward) + "\nmessage_faults = [" + std::string(faults) + "]");
  };
  const Scenario sc = parse_scenario(
      with(R"({ node = "worker1", message = "cleanup_autograd_context_req", fail = 2 }, { node = "worker0", message = "call", delay_ms = 5, count = 3 })"),
      "faults.toml");
  const Program& p = program_of(sc);
  ASSERT_EQ(p.message_faults.size(), 2u);
  EXPECT_EQ(p.message_faults[0].node, 1u);
  EXPECT_EQ(p.message_faults[0].type, rpc::MessageType::cleanup_autograd_context_req);
  EXPECT_EQ(p.message_faults[0].count, 2u);
  EXPECT_FALSE(p.message_faults[0].delay.has_value());
  EXPECT_EQ(p.message_faults[1].count, 3u);
  EXPECT_EQ(p.message_faults[1].delay, std::optional<runtime::Duration>(std::chrono::milliseconds(5)));
  EXPECT_EQ(error_of(with(R"({ node = "worker1", message = "ret", fail = 1 })")),
            "bad.toml:5: message_faults[0].message: \"ret\" is no request type (e.g. call, remote_call, rref_fetch_call, "
            "backward_autograd_req, cleanup_autograd_context_req)");
  EXPECT_EQ(error_of(with(R"({ node = "worker1", message = "call", fail = 1, delay_ms = 3 })")),
            "bad.toml:5: message_faults[0]: give either fail = N (fail the first N) or delay_ms (with count, default 1)");
  EXPECT_EQ(error_of(with(R"({ node = "worker1", message = "call", fail = 1, count = 3 })")),
            "bad.toml:5: message_faults[0].count: goes with delay_ms; fail is the count");
  EXPECT_EQ(error_of(with(R"({ node = "worker9", message = "call", fail = 1 })")),
            "bad.toml:5: message_faults[0].node: unknown node \"worker9\"; nodes are worker0..worker2");
}

TEST(ScenarioProgram, CallsNameKnownFunctions) {
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", args = ["a"] })")), "bad.toml:3: program[0].call: required");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "conv2d", args = ["a"] })")),
            "bad.toml:3: program[0].call: unknown value \"conv2d\"; allowed: abs, add, bmm, cat, chunk, clone, cos, "
            "cross_entropy, div, dropout, embedding, exp, gather, index_select, layer_norm, linear, log, log_softmax, "
            "matmul, max, mean, min, mse_loss, mul, multi_dot, narrow, neg, nll_loss, pow, relu, sigmoid, sin, softmax, "
            "split, sqrt, squeeze, stack, sub, sum, tanh, transpose, unsqueeze, relay_add, relay_sub, relay_mul, "
            "relay_div, mlp_layer, to_here");
}

TEST(ScenarioProgram, ArgsNameTensorsOrEarlierOutputs) {
  // On its own line, to show the line is the statement's.
  EXPECT_EQ(error_of(R"(name = "x"
tensors = [{ name = "t1", shape = [1] }]
program = [
  { out = "t2", call = "neg", args = ["t1"] },
  { out = "t3", call = "neg", args = ["t2"] },
  { out = "t4", call = "add", args = ["t3", "t9"] },
]
backward = { roots = ["t4"] }
)"),
            "bad.toml:6: program[2].args: \"t9\" is not a tensor or an earlier output");
  // A later output, and the statement's own, are not defined yet.
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "z"] }, { out = "z", call = "neg", args = ["a"] })")),
            "bad.toml:3: program[0].args: \"z\" is not a tensor or an earlier output");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "neg", args = ["y"] })")),
            "bad.toml:3: program[0].args: \"y\" is not a tensor or an earlier output");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "neg", args = [] })")),
            "bad.toml:3: program[0].args: must name at least one tensor");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "neg" })")), "bad.toml:3: program[0].args: required");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "neg", args = [1] })")),
            "bad.toml:3: program[0].args[0]: expected a string, got an integer");
}

TEST(ScenarioProgram, ViaAndOn) {
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "b"], via = "rpc" })")),
            "bad.toml:3: program[0].via: unknown value \"rpc\"; allowed: local, rpc_sync, rpc_async, remote");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "b"], via = "remote" })")),
            "bad.toml:3: program[0].on: required for via \"remote\"");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "b"], via = "rpc_async" })")),
            "bad.toml:3: program[0].on: required for via \"rpc_async\"");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "b"], on = "worker1" })")),
            "bad.toml:3: program[0].on: does not apply to via \"local\" (a local call runs on the driver)");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "b"], via = "rpc_sync", on = "worker3" })")),
            "bad.toml:3: program[0].on: unknown node \"worker3\"; nodes are worker0..worker2");
}

TEST(ScenarioProgram, AttributesAreNamedNumbers) {
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "sum", args = ["a"], axis = 0 })")),
            "bad.toml:3: program[0].axis: unknown key; allowed keys in program: out, call, args, via, on, device, dim, dim0, "
            "dim1, start, length, keepdim, exponent, split_size, chunks, normalized_dims, eps, p, training, seed, "
            "activation, to");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "sum", args = ["a"], dim = "0" })")),
            "bad.toml:3: program[0].dim: expected a number or a boolean, got a string");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "sum", args = ["a"], dim = 0.5 })")),
            "bad.toml:3: program[0].dim: 0.5 is not a whole number");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "pow", args = ["a"], exponent = inf })")),
            "bad.toml:3: program[0].exponent: inf is out of range (-inf, inf)");
}

TEST(ScenarioProgram, RelaysTakeToAndOnlyRelays) {
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "relay_add", args = ["a", "b"], via = "rpc_sync", on = "worker1" })")),
            "bad.toml:3: program[0].to: required for call \"relay_add\"");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "add", args = ["a", "b"], to = "worker1" })")),
            "bad.toml:3: program[0].to: does not apply to call \"add\" (only relay_* calls take it)");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "relay_div", args = ["a", "b"], to = 1 })")),
            "bad.toml:3: program[0].to: expected a string, got an integer");
  EXPECT_EQ(error_of(program(kTensors, R"({ out = "y", call = "relay_sub", args = ["a", "b"], to = "worker9" })")),
            "bad.toml:3: program[0].to: unknown node \"worker9\"; nodes are worker0..worker2");
}

// ---- backward

TEST(ScenarioProgram, BackwardRootsAndCalls) {
  EXPECT_EQ(error_of(program(kTensors, kStatements, "[\"y\"]")), "bad.toml:4: backward: expected a table, got an array");
  EXPECT_EQ(error_of(program(kTensors, kStatements, "{ retain_graph = true }")), "bad.toml:4: backward.roots: required");
  EXPECT_EQ(error_of(program(kTensors, kStatements, "{ roots = [] }")), "bad.toml:4: backward.roots: must name at least one tensor");
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y", "loss"] })")),
            "bad.toml:4: backward.roots: \"loss\" is not a tensor or an output");
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y", "y"] })")), "bad.toml:4: backward.roots: \"y\" is listed twice");
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y"], calls = 0 })")),
            "bad.toml:4: backward.calls: 0 is out of range [1, 100]");
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y"], calls = 101 })")),
            "bad.toml:4: backward.calls: 101 is out of range [1, 100]");
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y"], retain_graph = "yes" })")),
            "bad.toml:4: backward.retain_graph: expected a boolean, got a string");
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y"], create_graph = true })")),
            "bad.toml:4: backward.create_graph: unknown key; allowed keys in backward: roots, retain_graph, calls, "
            "repeat, mode");
  // A leaf may be a root.
  EXPECT_EQ(error_of(program(kTensors, kStatements, R"({ roots = ["y", "a"] })")), "no error");
}

// ---- checks

TEST(ScenarioProgram, ProgramCheckKeysFollowTheKind) {
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"gradients_match_local\"\natol = -1\n")),
            "bad.toml:9: checks[0].atol: -1 is out of range [0, inf)");
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"no_leaked_contexts\"\nrtol = 1e-3\n")),
            "bad.toml:9: checks[0].rtol: does not apply to kind \"no_leaked_contexts\"");
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"expect_error\"\n")),
            "bad.toml:7: checks[0].message: required for kind \"expect_error\"");
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"expect_error\"\nmessage = \"\"\n")),
            "bad.toml:9: checks[0].message: must not be empty");
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"expect_error\"\nmessage = 3\n")),
            "bad.toml:9: checks[0].message: expected a string, got an integer");
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"gradients_match_local\"\nmessage = \"x\"\n")),
            "bad.toml:9: checks[0].message: does not apply to kind \"gradients_match_local\"");
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"expect_error\"\nmessage = \"x\"\natol = 1\n")),
            "bad.toml:10: checks[0].atol: does not apply to kind \"expect_error\"");
}

TEST(ScenarioProgram, CheckKindsBelongToTheirWorkload) {
  EXPECT_EQ(error_of(program(kTensors, kStatements, kBackward, "[[checks]]\nkind = \"detects_failures\"\n")),
            "bad.toml:8: checks[0].kind: kind \"detects_failures\" checks the heartbeat workload, which this "
            "scenario does not run");
  EXPECT_EQ(error_of("name = \"x\"\n[heartbeat]\n[[checks]]\nkind = \"gradients_match_local\"\n"),
            "bad.toml:4: checks[0].kind: kind \"gradients_match_local\" checks the program or model workload, which "
            "this scenario does not run");
  EXPECT_EQ(error_of("name = \"x\"\n[heartbeat]\n[[checks]]\nkind = \"heartbeat\"\nmessage = \"x\"\n"),
            "bad.toml:4: checks[0].kind: unknown value \"heartbeat\"; allowed: detects_failures, no_false_suspicion, "
            "partition_detected_after_start, declared_dead, never_declared_dead, gradients_match_local, "
            "params_match_local, no_leaked_contexts, expect_error, invariants, formed, no_step_twice, all_steps_committed, restarts, "
            "rendezvous_invariants, job_succeeded, no_orphans, reformed_within, command");
}

TEST(ScenarioProgram, FaultsAndNetworkApplyToPrograms) {
  const Scenario s = parse_scenario(program(kTensors, kStatements, kBackward, R"([network]
latency = { dist = "uniform", min_us = 50, max_us = 500 }
[[faults]]
at_ms = 5
kind = "partition"
groups = [["worker0"], ["worker1"]]
heal_at_ms = 50
[random_faults]
crash_per_min = 1
)"),
                                    "f.toml");
  ASSERT_FALSE(s.workload.empty());
  EXPECT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.network.latency.max, std::chrono::microseconds(500));
  EXPECT_DOUBLE_EQ(s.random_faults.crash_per_min, 1);
}

}  // namespace
}  // namespace dagsim::scenarios
