#include "scenarios/program_workload.h"

#include <cmath>

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
nlohmann::json by_owner_json(const Scenario& scenario, const Program& program, const std::map<std::string, Tensor>& named) {
  nlohmann::json out = nlohmann::json::object();
  out[scenario.cluster.node_name(program.driver)] = nlohmann::json::object();
  for (const ProgramParameter& p : program.parameters) out[scenario.cluster.node_name(p.on)] = nlohmann::json::object();
  for (const auto& [name, t] : named) out[scenario.cluster.node_name(program.owner_of(name))][name] = tensor_to_json(t);
  return out;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, double& worst) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  bool ok = true;
  for (size_t i = 0; i < x.size(); ++i) {
    const double diff = std::abs(x[i] - y[i]);
    worst = std::max(worst, diff);
    ok = ok && diff <= atol + rtol * std::abs(y[i]);
  }
  return ok;
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
    } else if (!allclose(it->second, expected, rtol, atol, worst)) {
      problems += name + ": " + it->second.to_string() + " vs local " + expected.to_string() + "; ";
    }
  }
  for (const auto& [name, g] : distributed) {
    if (local.count(name) == 0) problems += name + ": a distributed " + what + " local autograd does not have; ";
  }
  char figures[128];
  std::snprintf(figures, sizeof(figures), " (rtol %g, atol %g); largest difference %g", rtol, atol, worst);
  if (!problems.empty()) return {spec.kind, false, problems};
  return {spec.kind, true, std::to_string(local.size()) + " " + what + "(s) allclose" + figures};
}

}  // namespace

nlohmann::json tensor_to_json(const Tensor& t) {
  const std::vector<double> values = t.to_vector();
  const Shape& shape = t.shape();
  if (shape.empty()) return values.empty() ? nlohmann::json(nullptr) : nlohmann::json(values[0]);
  size_t index = 0;
  std::function<nlohmann::json(size_t)> build = [&](size_t dim) {
    nlohmann::json out = nlohmann::json::array();
    for (int64_t i = 0; i < shape[dim]; ++i) out.push_back(dim + 1 == shape.size() ? nlohmann::json(values[index++]) : build(dim + 1));
    return out;
  };
  return build(0);
}

ProgramWorkload::ProgramWorkload(const Scenario& scenario, uint64_t seed)
    : scenario_(scenario), program_(materialise(*scenario.program, seed)),
      registry_(rpc::FunctionRegistry::with_builtins()), nodes_(scenario.cluster.nodes) {
  add_program_functions(registry_);
  // The oracle runs first, outside any world: plain engine, plain fiber.
  try {
    local_ = run_program_locally(program_, registry_);
  } catch (const Error& e) {
    // A program that fails locally fails distributed too; expect_error judges the latter.
    local_ = {};
  }
}

ProgramWorkload::~ProgramWorkload() { release_nodes(); }

void ProgramWorkload::release_nodes() { nodes_.clear(); }

sim::SimWorld::NodeMain ProgramWorkload::node_main(uint32_t index) {
  return [this, index](runtime::Env& env) {
    auto& lives = nodes_[index];
    lives.emplace_back();
    NodeState& node = lives.back();
    node.agent = std::make_unique<rpc::RpcAgent>(env, registry_);
    node.autograd = std::make_unique<dist_autograd::DistAutograd>(*node.agent, dist_autograd::DistEngineOptions{
        .backward_timeout = std::min(runtime::Duration{std::chrono::seconds(10)}, scenario_.max_virtual_time / 4)});
    node.optimizer_host = std::make_unique<optim::OptimizerHost>(*node.agent, *node.autograd);
    add_gradient_service(*node.agent, *node.autograd);
    node.agent->start();
    if (index != program_.driver || env.incarnation != 0) return;
    DAGSIM_ASSERT_MSG(world_ != nullptr, "install() before the run");
    rpc::RpcAgent* agent = node.agent.get();
    dist_autograd::DistAutograd* autograd = node.autograd.get();
    world_->spawn_foreground(static_cast<WorkerId>(index), "program", [this, agent, autograd] {
      try {
        distributed_ = run_program_distributed(program_, *agent, *autograd);
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        error_ = e.what();
      }
      finished_ = true;
    });
  };
}

runtime::Duration ProgramWorkload::drain_time() const {
  // Release messages chain from worker to worker; give them several latencies and a timeout.
  return scenario_.network.connection_timeout + 20 * scenario_.network.max_latency() + std::chrono::seconds(1);
}

CheckResult ProgramWorkload::check(const CheckSpec& spec, const sim::SimWorld& world) const {
  CheckResult result{spec.kind, true, ""};
  if (spec.kind == "gradients_match_local" || spec.kind == "params_match_local") {
    if (error_) return {spec.kind, false, "the program failed: " + *error_};
    const bool grads = spec.kind == "gradients_match_local";
    return compare(spec, grads ? distributed_.gradients : distributed_.params, grads ? local_.gradients : local_.params,
                   grads ? "gradient" : "parameter");
  } else if (spec.kind == "no_leaked_contexts") {
    std::string leaks;
    for (uint32_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].empty() || world.state(static_cast<WorkerId>(i)) != sim::NodeState::up) continue;
      const size_t n = nodes_[i].back().autograd->debug_info().num_autograd_contexts;
      if (n > 0) leaks += scenario_.cluster.node_name(i) + " holds " + std::to_string(n) + " context(s); ";
    }
    result.passed = leaks.empty();
    result.detail = result.passed ? "no live node holds an autograd context" : leaks;
  } else if (spec.kind == "expect_error") {
    if (!error_) return {spec.kind, false, "the program succeeded; expected an error containing \"" + spec.message + "\""};
    result.passed = error_->find(spec.message) != std::string::npos;
    result.detail = (result.passed ? "failed as expected: " : "failed differently: ") + *error_;
  } else {
    return {spec.kind, false, "unknown check kind for the program workload"};
  }
  return result;
}

nlohmann::json ProgramWorkload::results(const sim::SimWorld&) const {
  nlohmann::json out = {{"workload", scenario_.model ? "model" : "program"},
                        {"gradients", by_owner_json(scenario_, program_, distributed_.gradients)},
                        {"local_gradients", by_owner_json(scenario_, program_, local_.gradients)}};
  if (!program_.parameters.empty()) {
    out["params"] = by_owner_json(scenario_, program_, distributed_.params);
    out["local_params"] = by_owner_json(scenario_, program_, local_.params);
  }
  if (!program_.loss.empty()) {
    out["losses"] = distributed_.losses;
    out["local_losses"] = local_.losses;
  }
  nlohmann::json program = {{"finished", finished_}};
  if (error_) program["error"] = *error_;
  out["program"] = program;
  return out;
}

}  // namespace dagsim::scenarios
