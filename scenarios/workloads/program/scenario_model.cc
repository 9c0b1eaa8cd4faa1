// The model + train workload of the scenario loader (scenario_model.h), and compile_model
// (model_spec.h): [model] and [train] read as strictly as the rest of the file, then turned into
// the Program that trains the partitioned MLP.
#include "scenarios/workloads/program/scenario_model.h"

#include <cmath>

#include "core/base/assert.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/workloads/program/scenario_optimizer.h"

namespace dagsim::scenarios {

namespace detail {
namespace {

constexpr int64_t kMaxWidth = 2048;  // features per layer: a weight is at most 2048 x 2048
constexpr int64_t kMaxLayers = 64;
constexpr int64_t kMaxBatch = 4096;
constexpr int64_t kMaxSteps = 1000;

constexpr std::string_view kModelTableKeys[] = {"input", "layers"};
constexpr std::string_view kLayerKeys[] = {"out", "on", "activation"};
constexpr std::string_view kTrainKeys[] = {"driver", "steps", "batch", "optimizer"};
const KeySetRegistration kModelTableKeysListed{{"[model]", "", "", kModelTableKeys}};
const KeySetRegistration kLayerKeysListed{{"[model]", "model.layers", "", kLayerKeys}};
const KeySetRegistration kTrainKeysListed{{"[train]", "", "", kTrainKeys}};

ModelLayer read_layer(const TomlReader& reader, const Table& t) {
  reader.check_keys(t, kLayerKeys, "keys in model.layers");
  ModelLayer layer;
  layer.out = static_cast<uint32_t>(reader.integer(reader.required(t, "out"), t.key_path("out"), 1, kMaxWidth));
  layer.on = reader.node_ref(reader.required(t, "on"), t.key_path("on"));
  layer.activation = static_cast<Activation>(reader.opt_choice(t, "activation", kActivationNames).value_or(0));
  return layer;
}

}  // namespace

ModelSpec read_model(const TomlReader& reader, const toml::node& model, const toml::node& train) {
  ModelSpec spec;
  const Table m{reader.table(model, "model"), "model"};
  reader.check_keys(m, kModelTableKeys, "keys in [model]");
  spec.input = static_cast<uint32_t>(reader.integer(reader.required(m, "input"), "model.input", 1, kMaxWidth));
  const toml::node& layers = reader.required(m, "layers");
  const std::vector<const toml::table*> tables = reader.tables(layers, "model.layers");
  if (tables.empty()) reader.fail(layers, "model.layers", "must have at least one layer");
  if (static_cast<int64_t>(tables.size()) > kMaxLayers) {
    reader.fail(layers, "model.layers", std::to_string(tables.size()) + " layers; at most " + std::to_string(kMaxLayers));
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    spec.layers.push_back(read_layer(reader, Table{*tables[i], "model.layers[" + std::to_string(i) + "]"}));
  }

  const Table t{reader.table(train, "train"), "train"};
  reader.check_keys(t, kTrainKeys, "keys in [train]");
  spec.driver = reader.opt_node_ref(t, "driver").value_or(0);
  spec.steps = static_cast<uint32_t>(reader.opt_integer(t, "steps", 1, kMaxSteps).value_or(spec.steps));
  spec.batch = static_cast<uint32_t>(reader.opt_integer(t, "batch", 1, kMaxBatch).value_or(spec.batch));
  spec.optimizer = read_optimizer(reader, reader.required(t, "optimizer"), "train.optimizer");
  return spec;
}

}  // namespace detail

Program compile_model(const ModelSpec& model) {
  DAGSIM_ASSERT(!model.layers.empty());
  Program p;
  p.driver = model.driver;
  const int64_t batch = model.batch;
  p.tensors.push_back(ProgramTensor{"x", {batch, model.input}, ProgramTensor::Init::uniform, {}, false});
  p.tensors.push_back(ProgramTensor{"y", {batch, model.layers.back().out}, ProgramTensor::Init::uniform, {}, false});
  std::string h = "x";
  int64_t in = model.input;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const ModelLayer& layer = model.layers[i];
    const std::string n = std::to_string(i + 1);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // nn.Linear's init
    p.parameters.push_back(ProgramParameter{"w" + n, {layer.out, in}, ProgramTensor::Init::uniform, {}, bound, layer.on});
    p.parameters.push_back(ProgramParameter{"b" + n, {layer.out}, ProgramTensor::Init::uniform, {}, bound, layer.on});
    Statement s;
    s.outs = {"h" + n};
    s.call = "mlp_layer";
    s.args = {h};
    s.rrefs = {"w" + n, "b" + n};
    s.attributes["activation"] = static_cast<double>(layer.activation);
    s.via = layer.on == model.driver ? Via::local : Via::rpc_sync;
    s.on = layer.on == model.driver ? model.driver : layer.on;
    p.statements.push_back(s);
    h = s.out();
    in = layer.out;
  }
  p.statements.push_back(Statement{{"loss"}, "mse_loss", {h, "y"}, {}, Via::local, model.driver});
  p.roots = {"loss"};
  p.backward_calls = model.steps;
  p.optimizer = model.optimizer;
  p.loss = "loss";
  return p;
}

}  // namespace dagsim::scenarios
