#include "scenarios/workloads/program/program_workload.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"
#include "core/tensor/dtype.h"
#include "scenarios/workloads/program/model_spec.h"
#include "scenarios/workloads/program/scenario_model.h"
#include "scenarios/workloads/program/program_shapes.h"
#include "scenarios/workloads/program/scenario_program.h"
#include "scenarios/workloads/program/tensor_report.h"
#include "scenarios/workloads/timeline_text.h"

#include "core/base/prng.h"
#include "core/tensor/ops.h"

namespace dagsim::scenarios {

namespace {

constexpr uint64_t kTensorStream = 0x7e5507;
constexpr uint64_t kParameterStream = 0x9a7a3e;

// Seeded values of `shape` from stream `stream` of the seed, scaled.
std::vector<double> seeded(const Prng& base, uint64_t stream, const Shape& shape, ProgramTensor::Init init, double scale) {
  Prng random = base.fork(stream);
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)), 0.0);
  for (double& v : values) v = scale * (init == ProgramTensor::Init::uniform ? random.uniform(-1.0, 1.0) : random.normal());
  return values;
}

// Seeded leaves and parameters get their values here, once, so the oracle and the distributed
// run see the same.
Program materialise(Program program, uint64_t seed) {
  Prng base(seed);
  for (size_t i = 0; i < program.tensors.size(); ++i) {
    ProgramTensor& t = program.tensors[i];
    if (t.init == ProgramTensor::Init::values) continue;
    t.values = seeded(base, kTensorStream + i, t.shape, t.init, 1.0);
    t.init = ProgramTensor::Init::values;
  }
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    ProgramParameter& p = program.parameters[i];
    if (p.init == ProgramTensor::Init::values) continue;
    p.values = seeded(base, kParameterStream + i, p.shape, p.init, p.scale);
    p.init = ProgramTensor::Init::values;
  }
  return program;
}

// {owner: {name: nested list}}: leaves under the driver, parameters under their owner. The driver
// and every owner appear even with nothing under them, so both runs report the same workers.
nlohmann::json by_owner_json(const Scenario& scenario, const Program& program, const std::map<std::string, Tensor>& named,
                             bool full) {
  nlohmann::json out = nlohmann::json::object();
  out[scenario.cluster.node_name(program.driver)] = nlohmann::json::object();
  for (const ProgramParameter& p : program.parameters) out[scenario.cluster.node_name(p.on)] = nlohmann::json::object();
  for (const auto& [name, t] : named) out[scenario.cluster.node_name(program.owner_of(name))][name] = tensor_report_json(t, full);
  return out;
}

nlohmann::json named_record(const std::map<std::string, Tensor>& named) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, t] : named) out[name] = tensor_record(t);
  return out;
}

std::map<std::string, Tensor> named_from_record(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) throw errors::invalid_records(what + ": expected an object of tensors");
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : j.items()) out.emplace(name, tensor_from_record(t, what + "." + name));
  return out;
}

// The check `spec` over named tensors: the same names, each allclose. `what`: "gradient", "parameter".
CheckResult compare(const CheckSpec& spec, const std::map<std::string, Tensor>& distributed,
                    const std::map<std::string, Tensor>& local, const std::string& what) {
  const double rtol = spec.rtol.value_or(1e-9), atol = spec.atol.value_or(1e-12);
  std::string problems;
  double worst = 0;
  for (const auto& [name, expected] : local) {
    auto it = distributed.find(name);
    if (it == distributed.end()) {
      problems += name + ": no distributed " + what + "; ";
    } else if (!tensors_allclose(it->second, expected, rtol, atol, spec.equal_nan, worst)) {
      problems += name + ": " + it->second.to_string() + " vs local " + expected.to_string() + "; ";
    }
  }
  for (const auto& [name, g] : distributed) {
    if (local.count(name) == 0) problems += name + ": a distributed " + what + " local autograd does not have; ";
  }
  char figures[128];
  std::snprintf(figures, sizeof(figures), " (rtol %g, atol %g%s); largest difference %g", rtol, atol,
                spec.equal_nan ? ", equal_nan" : "", worst);
  if (!problems.empty()) return {spec.kind, false, problems};
  return {spec.kind, true, std::to_string(local.size()) + " " + what + "(s) allclose" + figures};
}

}  // namespace

nlohmann::json tensor_record(const Tensor& t) {
  nlohmann::json values = nlohmann::json::array();
  for (double v : t.to_vector()) values.push_back(number_record(v));
  return {{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"values", std::move(values)}};
}

Tensor tensor_from_record(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("values") || !j.at("values").is_array()) {
    throw errors::invalid_records(what + ": a tensor record needs dtype, shape and values");
  }
  const std::string dtype = j.at("dtype").get<std::string>();
  Dtype type;
  if (dtype == dtype_name(Dtype::float64)) {
    type = Dtype::float64;
  } else if (dtype == dtype_name(Dtype::float32)) {
    type = Dtype::float32;
  } else {
    throw errors::invalid_records(what + ": unknown dtype " + dtype);
  }
  if (!j.at("shape").is_array() || j.at("shape").size() > 16) {
    throw errors::invalid_records(what + ": a shape is an array of at most 16 dimensions");
  }
  Shape shape;
  for (const nlohmann::json& d : j.at("shape")) shape.push_back(integer_from_record<int64_t>(d, what + ": shape"));
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > (int64_t{1} << 40) || numel > (int64_t{1} << 40) / std::max<int64_t>(d, 1)) {
      throw errors::invalid_records(what + ": impossible shape " + j.at("shape").dump());
    }
    numel *= d;
  }
  const nlohmann::json& values = j.at("values");
  if (static_cast<int64_t>(values.size()) != numel) {
    throw errors::invalid_records(what + ": " + std::to_string(values.size()) + " values for shape " + j.at("shape").dump());
  }
  std::vector<double> data;
  data.reserve(values.size());
  for (const nlohmann::json& v : values) data.push_back(number_from_record(v, what));
  return from_values(shape, data, type);
}

const Program& program_of(const Scenario& scenario) {
  if (const ModelProgram* model = scenario.workload.get<ModelProgram>()) return model->program;
  return scenario.workload.as<Program>();
}

// The node side ----------------------------------------------------------------------------------

ProgramWorkload::ProgramWorkload(const Scenario& scenario, uint64_t seed)
    : scenario_(scenario), program_(materialise(program_of(scenario), seed)),
      registry_(rpc::FunctionRegistry::with_builtins()), nodes_(scenario.cluster.nodes) {
  add_program_functions(registry_);
}

ProgramWorkload::~ProgramWorkload() { release_nodes(); }

void ProgramWorkload::release_nodes() { nodes_.clear(); }

void ProgramWorkload::node_main(NodeContext& context) {
  const uint32_t index = context.index();
  runtime::Env& env = context.env();
  auto& lives = nodes_[index];
  lives.emplace_back();
  NodeState& node = lives.back();
  rpc::RpcOptions rpc_options;
  for (const ProgramMessageFault& f : program_.message_faults) {
    if (f.node == index) rpc_options.message_faults.push_back(rpc::MessageFault{f.type, f.count, f.delay});
  }
  std::vector<std::string> names;
  for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) names.push_back(scenario_.cluster.node_name(i));
  rpc_options.device_maps = scenario_.devices.maps_of(index, names);
  rpc_options.reverse_device_maps = scenario_.devices.reverse_maps_of(index, names);
  node.agent = std::make_unique<rpc::RpcAgent>(env, registry_, rpc_options);
  node.autograd = std::make_unique<dist_autograd::DistAutograd>(*node.agent, dist_autograd::DistEngineOptions{
      .backward_timeout = std::min(runtime::Duration{std::chrono::seconds(10)}, scenario_.max_virtual_time / 4)});
  node.optimizer_host = std::make_unique<optim::OptimizerHost>(*node.agent, *node.autograd);
  add_gradient_service(*node.agent, *node.autograd);
  node.agent->start();
  dist_autograd::DistAutograd* autograd = node.autograd.get();
  nlohmann::json* record = &context.record();
  context.at_end([record, autograd] { (*record)["contexts_at_end"] = autograd->debug_info().num_autograd_contexts; });
  if (index != program_.driver || context.incarnation() != 0) return;
  rpc::RpcAgent* agent = node.agent.get();
  (*record)["finished"] = false;
  context.spawn_foreground("program", [this, agent, autograd, record, &context] {
    try {
      const ProgramResult result =
          run_program_distributed(program_, *agent, *autograd, [&context] { context.report_backward(); });
      (*record)["gradients"] = named_record(result.gradients);
      (*record)["params"] = named_record(result.params);
      (*record)["losses"] = nlohmann::json::array();
      for (double loss : result.losses) (*record)["losses"].push_back(number_record(loss));
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      (*record)["error"] = e.what();
    }
    (*record)["finished"] = true;
  });
}

runtime::Duration autograd_drain_time(const Scenario& scenario) {
  return scenario.network.connection_timeout + 20 * scenario.network.max_latency() + std::chrono::seconds(1);
}

bool autograd_settled(const dist_autograd::DistAutograd* autograd) {
  return autograd == nullptr || autograd->debug_info().num_autograd_contexts == 0;
}

runtime::Duration ProgramWorkload::drain_time() const { return autograd_drain_time(scenario_); }

bool ProgramWorkload::settled(uint32_t node) const {
  return node >= nodes_.size() || nodes_[node].empty() || autograd_settled(nodes_[node].back().autograd.get());
}

// The judge --------------------------------------------------------------------------------------

ProgramJudge::ProgramJudge(const Scenario& scenario, const RunRecords& records)
    : scenario_(scenario), records_(records), program_(materialise(program_of(scenario), records.seed)) {
  // The oracle: the same program on the local engine, outside any runtime (plain fiber).
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  add_program_functions(registry);
  try {
    local_ = run_program_locally(program_, registry);
  } catch (const Error& e) {
    // A program that fails locally fails distributed too, and expect_error judges that; but a
    // comparison with an oracle that failed says so, instead of reporting mismatches.
    local_error_ = e.what();
  }
  const std::string driver = scenario.cluster.node_name(program_.driver);
  for (const NodeRecord* r : records.records_of(program_.driver)) {
    if (r->incarnation != 0) continue;  // the program runs on the driver's first life only
    const std::string what = driver + ".0";
    const nlohmann::json& data = r->data;
    finished_ = data.value("finished", false);
    if (data.contains("error")) error_ = data.at("error").get<std::string>();
    if (data.contains("gradients")) distributed_.gradients = named_from_record(data.at("gradients"), what + ".gradients");
    if (data.contains("params")) distributed_.params = named_from_record(data.at("params"), what + ".params");
    if (data.contains("losses")) {
      for (const nlohmann::json& loss : data.at("losses")) distributed_.losses.push_back(number_from_record(loss, what + ".losses"));
    }
  }
  // What the driver recorded names the program's own leaves and parameters, with their shapes
  // (the report prints them by shape: a hostile shape must not reach it).
  for (const auto* named : {&distributed_.gradients, &distributed_.params}) {
    for (const auto& [name, t] : *named) {
      const Shape* declared = nullptr;
      for (const ProgramTensor& leaf : program_.tensors) declared = leaf.name == name ? &leaf.shape : declared;
      for (const ProgramParameter& p : program_.parameters) declared = p.name == name ? &p.shape : declared;
      if (declared == nullptr || *declared != t.shape()) {
        throw errors::invalid_records(driver + ".0: " + name + " is not a leaf or parameter of this program with that shape");
      }
    }
  }
}

CheckResult ProgramJudge::gradients_match_local(const CheckSpec& spec) const {
  if (error_) return {spec.kind, false, "the program failed: " + *error_};
  if (local_error_) return {spec.kind, false, "the local oracle failed: " + *local_error_};
  return compare(spec, distributed_.gradients, local_.gradients, "gradient");
}

CheckResult ProgramJudge::params_match_local(const CheckSpec& spec) const {
  if (error_) return {spec.kind, false, "the program failed: " + *error_};
  if (local_error_) return {spec.kind, false, "the local oracle failed: " + *local_error_};
  return compare(spec, distributed_.params, local_.params, "parameter");
}

CheckResult ProgramJudge::no_leaked_contexts(const CheckSpec& spec) const {
  std::string leaks;
  for (uint32_t i = 0; i < scenario_.cluster.nodes; ++i) {
    if (records_.final_states[i] != runtime::NodeState::up) continue;
    const std::vector<const NodeRecord*> lives = records_.records_of(i);
    // A life that never ran its main (restarted at the very end) held nothing.
    if (lives.empty() || !lives.back()->data.contains("contexts_at_end")) continue;
    const uint64_t n = integer_from_record<uint64_t>(lives.back()->data.at("contexts_at_end"),
                                                     scenario_.cluster.node_name(i) + ": contexts_at_end");
    if (n > 0) leaks += scenario_.cluster.node_name(i) + " holds " + std::to_string(n) + " context(s); ";
  }
  if (!leaks.empty()) return {spec.kind, false, leaks};
  return {spec.kind, true, "no live node holds an autograd context"};
}

CheckResult ProgramJudge::expect_error(const CheckSpec& spec) const {
  if (!error_) return {spec.kind, false, "the program succeeded; expected an error containing " + quote(spec.message)};
  const bool passed = error_->find(spec.message) != std::string::npos;
  return {spec.kind, passed, (passed ? "failed as expected: " : "failed differently: ") + *error_};
}

nlohmann::json ProgramJudge::results(const ReportOptions& options) const {
  const bool full = options.full_tensors;
  nlohmann::json out = {{"workload", scenario_.workload.name()},
                        {"gradients", by_owner_json(scenario_, program_, distributed_.gradients, full)},
                        {"local_gradients", by_owner_json(scenario_, program_, local_.gradients, full)}};
  if (!program_.parameters.empty()) {
    out["params"] = by_owner_json(scenario_, program_, distributed_.params, full);
    out["local_params"] = by_owner_json(scenario_, program_, local_.params, full);
  }
  if (!program_.loss.empty()) {
    // Written as the records write them, so a NaN loss reads "nan", not null.
    for (const auto& [key, losses] : {std::pair{"losses", &distributed_.losses}, std::pair{"local_losses", &local_.losses}}) {
      out[key] = nlohmann::json::array();
      for (double loss : *losses) out[key].push_back(number_record(loss));
    }
  }
  nlohmann::json program = {{"finished", finished_}};
  if (error_) program["error"] = *error_;
  if (local_error_) program["local_error"] = *local_error_;
  out["program"] = program;
  // The story, which the text report prints: the faults with what they struck, how the program
  // ended, and the loss against local training.
  nlohmann::json timeline = nlohmann::json::array();
  for (const runtime::FaultEvent& f : records_.fault_history) {
    if (f.kind == runtime::FaultEvent::Kind::start || f.kind == runtime::FaultEvent::Kind::connection_failed) continue;
    char at[32];
    std::snprintf(at, sizeof(at), "%.3f s", static_cast<double>(f.time.ns()) / 1e9);
    timeline.push_back("fault at " + std::string(at) + ": " + describe_fault(f, scenario_.cluster));
  }
  if (error_) timeline.push_back("the program failed: " + *error_);
  if (!program_.loss.empty() && !distributed_.losses.empty() && !local_.losses.empty()) {
    const std::vector<std::optional<double>> losses(distributed_.losses.begin(), distributed_.losses.end());
    timeline.push_back(loss_line(losses, local_.losses));
  }
  if (!timeline.empty()) out["timeline"] = timeline;
  return out;
}

// The registry entries -----------------------------------------------------------------------------

namespace {

void read_program(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) {
  scenario.workload = WorkloadSpec("program", detail::read_program(reader, top));
}

void read_model(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) {
  ModelProgram spec;
  spec.model = detail::read_model(reader, *top.get("model"), *top.get("train"));
  spec.program = compile_model(spec.model);
  scenario.workload = WorkloadSpec("model", std::move(spec));
}

std::string program_summary(const Scenario& s) {
  return "program (" + std::to_string(program_of(s).statements.size()) + " statements)";
}

std::string model_summary(const Scenario& s) {
  const ModelSpec& model = s.workload.as<ModelProgram>().model;
  return "model + train (" + std::to_string(model.layers.size()) + " layers, " + std::to_string(model.steps) + " steps)";
}

std::unique_ptr<Workload> make(const Scenario& scenario, uint64_t seed) {
  return std::make_unique<ProgramWorkload>(scenario, seed);
}

std::unique_ptr<Judge> make_judge(const Scenario& scenario, const RunRecords& records) {
  return std::make_unique<ProgramJudge>(scenario, records);
}

uint64_t counted_bytes(const Scenario& scenario) { return counted_tensor_bytes(program_of(scenario)); }

std::string needs_parameters(const Scenario& scenario) {
  return program_of(scenario).parameters.empty() ? "compares parameters, and this program has none" : "";
}

// Only the driver runs backward passes, once per call and repeat (run_program_distributed), and
// only in its first incarnation: a trigger on another node, or on a later pass, waits forever.
std::string impossible_trigger(const Scenario& scenario, const FaultTrigger& trigger) {
  if (trigger.event != WorkloadEvent::backward) return "";
  const Program& program = program_of(scenario);
  const std::string driver = scenario.cluster.node_name(program.driver);
  if (trigger.node && *trigger.node != program.driver) {
    return scenario.cluster.node_name(*trigger.node) + " runs no backward pass: only the driver, " + driver + ", does";
  }
  const uint64_t passes = uint64_t{program.backward_calls} * program.backward_repeat;
  if (trigger.at_least > passes) {
    return "the driver, " + driver + ", runs " + std::to_string(passes) + " backward pass" + (passes == 1 ? "" : "es") +
           ", so pass " + std::to_string(trigger.at_least) + " never begins";
  }
  return "";
}

constexpr CheckKind kChecks[] = {
    {"gradients_match_local", false, true, false, &judge_by<ProgramJudge, &ProgramJudge::gradients_match_local>},
    {"params_match_local", false, true, false, &judge_by<ProgramJudge, &ProgramJudge::params_match_local>,
     &needs_parameters},
    {"no_leaked_contexts", false, false, false, &judge_by<ProgramJudge, &ProgramJudge::no_leaked_contexts>},
    {"expect_error", false, false, true, &judge_by<ProgramJudge, &ProgramJudge::expect_error>},
};

}  // namespace

// The driver's backward passes.
constexpr WorkloadEvent kEvents[] = {WorkloadEvent::backward};

const WorkloadType kProgramWorkload = {
    .name = "program",
    .keys = detail::kProgramKeys,
    .required = detail::kProgramRequiredKeys,
    .shown = "program + backward",
    .read = &read_program,
    .summary = &program_summary,
    .make = &make,
    .make_judge = &make_judge,
    .checks = kChecks,
    .counted_bytes = &counted_bytes,
    .events = kEvents,
    .impossible_trigger = &impossible_trigger,
};

const WorkloadType kModelWorkload = {
    .name = "model",
    .keys = detail::kModelKeys,
    .required = detail::kModelKeys,
    .shown = "[model] + [train]",
    .read = &read_model,
    .summary = &model_summary,
    .make = &make,
    .make_judge = &make_judge,
    .checks = kChecks,
    .counted_bytes = &counted_bytes,
    .events = kEvents,
    .impossible_trigger = &impossible_trigger,
};

}  // namespace dagsim::scenarios
