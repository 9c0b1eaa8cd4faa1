// Tests of the model + train workload in the scenario format (scenario_model.h, model_spec.h):
// the documented example loads and compiles into the program it promises (shapes, nn.Linear's
// init bound, one call per layer on its owner, the loss, the optimizer), defaults are the
// documented ones, and each rule fails with "FILE:LINE: KEY: problem".
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "scenarios/format/scenario_test_util.h"

namespace dagsim::scenarios {
namespace {

// Lines: 2 [model], 3 input, 4 layers (one line), 5 [train], 6.. the train keys, then [cluster].
std::string model(std::string_view layers = R"([{ out = 4, on = "worker1", activation = "tanh" }, { out = 2, on = "worker0" }])",
                  std::string_view train = "optimizer = { kind = \"sgd\", lr = 0.1 }\n", std::string_view input = "3") {
  return "name = \"m\"\n[model]\ninput = " + std::string(input) + "\nlayers = " + std::string(layers) + "\n[train]\n" +
         std::string(train) + "[cluster]\nnodes = 4\n";
}

TEST(ScenarioModel, TheDocumentedExampleCompilesIntoItsProgram) {
  const Scenario s = parse_scenario(R"(name = "mlp"
[model]
input = 16
layers = [
  { out = 32, on = "worker1", activation = "tanh" },
  { out = 32, on = "worker2", activation = "relu" },
  { out = 8,  on = "worker3", activation = "none" },
]
[train]
driver = "worker0"
steps = 10
batch = 16
optimizer = { kind = "sgd", lr = 0.05, momentum = 0.9 }
[cluster]
nodes = 4
[[checks]]
kind = "params_match_local"
)",
                                    "m.toml");
  ASSERT_TRUE((s.workload.name() == "model"));
  EXPECT_EQ(s.workload.as<ModelProgram>().model.input, 16u);
  ASSERT_EQ(s.workload.as<ModelProgram>().model.layers.size(), 3u);
  EXPECT_EQ(s.workload.as<ModelProgram>().model.layers[1].activation, Activation::relu);
  EXPECT_EQ(s.workload.as<ModelProgram>().model.steps, 10u);
  ASSERT_FALSE(s.workload.empty());
  const Program& p = program_of(s);
  EXPECT_EQ(p.driver, 0u);
  ASSERT_EQ(p.tensors.size(), 2u);
  EXPECT_EQ(p.tensors[0].name, "x");
  EXPECT_EQ(p.tensors[0].shape, (Shape{16, 16}));
  EXPECT_FALSE(p.tensors[0].requires_grad);
  EXPECT_EQ(p.tensors[1].name, "y");
  EXPECT_EQ(p.tensors[1].shape, (Shape{16, 8}));

  ASSERT_EQ(p.parameters.size(), 6u);
  EXPECT_EQ(p.parameters[0].name, "w1");
  EXPECT_EQ(p.parameters[0].shape, (Shape{32, 16}));
  EXPECT_EQ(p.parameters[0].on, 1u);
  EXPECT_EQ(p.parameters[0].init, ProgramTensor::Init::uniform);
  EXPECT_DOUBLE_EQ(p.parameters[0].scale, 0.25);  // 1 / sqrt(16)
  EXPECT_EQ(p.parameters[1].name, "b1");
  EXPECT_EQ(p.parameters[1].shape, (Shape{32}));
  EXPECT_EQ(p.parameters[4].name, "w3");
  EXPECT_EQ(p.parameters[4].shape, (Shape{8, 32}));
  EXPECT_DOUBLE_EQ(p.parameters[4].scale, 1 / std::sqrt(32.0));
  EXPECT_EQ(p.parameters[5].on, 3u);

  ASSERT_EQ(p.statements.size(), 4u);
  EXPECT_EQ(p.statements[0].out(), "h1");
  EXPECT_EQ(p.statements[0].call, "mlp_layer");
  EXPECT_EQ(p.statements[0].args, (std::vector<std::string>{"x"}));
  EXPECT_EQ(p.statements[0].rrefs, (std::vector<std::string>{"w1", "b1"}));
  EXPECT_EQ(p.statements[0].via, Via::rpc_sync);
  EXPECT_EQ(p.statements[0].on, 1u);
  EXPECT_EQ(p.statements[0].attributes.at("activation"), 1);  // tanh
  EXPECT_EQ(p.statements[1].args, (std::vector<std::string>{"h1"}));
  EXPECT_EQ(p.statements[1].attributes.at("activation"), 2);  // relu
  EXPECT_EQ(p.statements[2].attributes.at("activation"), 0);
  EXPECT_EQ(p.statements[3].out(), "loss");
  EXPECT_EQ(p.statements[3].call, "mse_loss");
  EXPECT_EQ(p.statements[3].args, (std::vector<std::string>{"h3", "y"}));
  EXPECT_EQ(p.statements[3].via, Via::local);
  EXPECT_EQ(p.roots, (std::vector<std::string>{"loss"}));
  EXPECT_EQ(p.backward_calls, 10u);
  EXPECT_EQ(p.loss, "loss");
  ASSERT_TRUE(p.optimizer.has_value());
  EXPECT_EQ(p.optimizer->sgd.lr, 0.05);
  EXPECT_EQ(p.optimizer->sgd.momentum, 0.9);
}

TEST(ScenarioModel, DefaultsAndALayerOnTheDriver) {
  const Scenario s = parse_scenario(model(), "d.toml");
  const Program& p = program_of(s);
  EXPECT_EQ(p.driver, 0u);
  EXPECT_EQ(p.backward_calls, 1u);
  EXPECT_EQ(p.tensors[0].shape, (Shape{1, 3}));  // batch 1
  EXPECT_EQ(p.statements[1].via, Via::local);    // layer 2 lives on the driver
  EXPECT_EQ(p.statements[1].attributes.at("activation"), 0);
  const Scenario driven = parse_scenario(model(R"([{ out = 2, on = "worker2" }])", "driver = \"worker2\"\noptimizer = { kind = \"adam\" }\n"), "d.toml");
  EXPECT_EQ(program_of(driven).driver, 2u);
  EXPECT_EQ(program_of(driven).statements[0].via, Via::local);
  EXPECT_EQ(program_of(driven).statements[0].on, 2u);
  EXPECT_EQ(program_of(driven).owner_of("x"), 2u);
}

TEST(ScenarioModel, ModelAndTrainComeTogether) {
  EXPECT_EQ(error_of("name = \"m\"\n[model]\ninput = 2\nlayers = [{ out = 1, on = \"worker0\" }]\n"),
            "bad.toml:2: model: a model workload needs model and train; missing train");
  EXPECT_EQ(error_of(model() + "[heartbeat]\n"),
            "bad.toml:9: heartbeat: a scenario has exactly one workload, and this one already has [model] + [train]");
  EXPECT_EQ(error_of(model() + "[[checks]]\nkind = \"declared_dead\"\nnodes = [\"worker1\"]\n"),
            "bad.toml:10: checks[0].kind: kind \"declared_dead\" checks the heartbeat workload, which this scenario "
            "does not run");
}

TEST(ScenarioModel, ModelKeysAndBounds) {
  EXPECT_EQ(error_of(model(R"([{ out = 2, on = "worker1" }])", "optimizer = { kind = \"adam\" }\n", "0")),
            "bad.toml:3: model.input: 0 is out of range [1, 2048]");
  EXPECT_EQ(error_of(model(R"([{ out = 2, on = "worker1" }])", "optimizer = { kind = \"adam\" }\n", "2\nhidden = 3")),
            "bad.toml:4: model.hidden: unknown key; allowed keys in [model]: input, layers");
  EXPECT_EQ(error_of(model("[]")), "bad.toml:4: model.layers: must have at least one layer");
  EXPECT_EQ(error_of(model(R"([{ out = 0, on = "worker1" }])")), "bad.toml:4: model.layers[0].out: 0 is out of range [1, 2048]");
  EXPECT_EQ(error_of(model(R"([{ out = 2 }])")), "bad.toml:4: model.layers[0].on: required");
  EXPECT_EQ(error_of(model(R"([{ out = 2, on = "worker4" }])")),
            "bad.toml:4: model.layers[0].on: unknown node \"worker4\"; nodes are worker0..worker3");
  EXPECT_EQ(error_of(model(R"([{ out = 2, on = "worker1", activation = "gelu" }])")),
            "bad.toml:4: model.layers[0].activation: unknown value \"gelu\"; allowed: none, tanh, relu, sigmoid");
  EXPECT_EQ(error_of(model(R"([{ out = 2, on = "worker1", bias = false }])")),
            "bad.toml:4: model.layers[0].bias: unknown key; allowed keys in model.layers: out, on, activation");
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += R"({ out = 1, on = "worker1" }, )";
  EXPECT_EQ(error_of(model(many + "]")), "bad.toml:4: model.layers: 65 layers; at most 64");
}

TEST(ScenarioModel, TrainKeysAndBounds) {
  const std::string sgd = "optimizer = { kind = \"sgd\", lr = 0.1 }\n";
  const std::string layers = R"([{ out = 2, on = "worker1" }])";
  EXPECT_EQ(error_of(model(layers, "steps = 3\n")), "bad.toml:5: train.optimizer: required");
  EXPECT_EQ(error_of(model(layers, "steps = 0\n" + sgd)), "bad.toml:6: train.steps: 0 is out of range [1, 1000]");
  EXPECT_EQ(error_of(model(layers, "batch = 5000\n" + sgd)), "bad.toml:6: train.batch: 5000 is out of range [1, 4096]");
  EXPECT_EQ(error_of(model(layers, "driver = \"worker9\"\n" + sgd)),
            "bad.toml:6: train.driver: unknown node \"worker9\"; nodes are worker0..worker3");
  EXPECT_EQ(error_of(model(layers, "epochs = 2\n" + sgd)),
            "bad.toml:6: train.epochs: unknown key; allowed keys in [train]: driver, steps, batch, optimizer");
  EXPECT_EQ(error_of(model(layers, "optimizer = { kind = \"sgd\", lr = 0.1, eps = 1 }\n")),
            "bad.toml:6: train.optimizer.eps: does not apply to kind \"sgd\"; allowed: kind, lr, momentum, dampening, "
            "nesterov, weight_decay");
}

}  // namespace
}  // namespace dagsim::scenarios
