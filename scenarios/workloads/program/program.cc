// The program's functions (relays, mlp_layer) and its local oracle run (program.h).
#include "scenarios/workloads/program/program.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "core/autograd/engine.h"
#include "core/base/error.h"
#include "core/optim/optimizer.h"
#include "core/tensor/ops.h"

namespace dagsim::scenarios {

namespace detail {

std::map<std::string, Tensor> make_leaves(const Program& program, bool on_devices) {
  std::map<std::string, Tensor> values;
  for (const ProgramTensor& t : program.tensors) {
    Tensor leaf = from_values(t.shape, t.values, t.dtype);
    if (on_devices) leaf = to_device(leaf, t.device);
    if (t.requires_grad) leaf.set_requires_grad(true);
    values[t.name] = leaf;
  }
  return values;
}

Tensor initial_value(const ProgramParameter& parameter) {
  return from_values(parameter.shape, parameter.values, parameter.dtype);
}

void assign(std::map<std::string, Tensor>& values, const std::vector<Tensor>& results, const Statement& s) {
  if (results.size() != s.outs.size()) {
    std::string names;
    for (const std::string& n : s.outs) names += (names.empty() ? "" : ", ") + n;
    throw errors::invalid_argument("statement '" + names + "': " + s.call + " returned " + std::to_string(results.size()) +
                                   " tensor(s) for " + std::to_string(s.outs.size()) + " name(s)");
  }
  for (size_t i = 0; i < results.size(); ++i) values[s.outs[i]] = results[i];
}

const rpc::RpcFunction& function(const rpc::FunctionRegistry& registry, const std::string& name) {
  const rpc::RpcFunction* f = registry.find(name);
  if (f == nullptr) throw errors::invalid_argument("unknown function '" + name + "'");
  return *f;
}

void accumulate(Gradients& total, const std::string& name, const Tensor& g) {
  auto it = total.find(name);
  if (it == total.end()) {
    total.emplace(name, clone(g));
  } else {
    it->second = add(it->second, g);
  }
}

}  // namespace detail

std::unique_ptr<optim::Optimizer> make_local_optimizer(const ProgramOptimizer& optimizer, const std::vector<Tensor>& params) {
  if (optimizer.kind == ProgramOptimizer::Kind::sgd) return std::make_unique<optim::Sgd>(params, optimizer.sgd);
  return std::make_unique<optim::Adam>(params, optimizer.adam);
}

optim::OptimizerConfig optimizer_config(const ProgramOptimizer& o) {
  return {.kind = o.kind == ProgramOptimizer::Kind::sgd ? optim::OptimizerConfig::Kind::sgd
                                                        : optim::OptimizerConfig::Kind::adam,
          .sgd = o.sgd,
          .adam = o.adam};
}

namespace {

// A relay's `to`, a double on the wire: a worker id only when it is one exactly. A bare cast would
// make 2^32, NaN and 1e300 (undefined behaviour) all worker 0.
WorkerId relay_target(const std::string& function, const rpc::CallArgs& args) {
  const double to = args.attribute(function, "to");
  constexpr double kLast = std::numeric_limits<WorkerId>::max();
  if (!(to >= 0 && to <= kLast) || to != std::floor(to)) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%.17g", to);
    throw errors::invalid_argument(function + ": argument 'to' is " + shown +
                                   ", not a worker id (an integer from 0 to " + std::to_string(std::numeric_limits<WorkerId>::max()) + ")");
  }
  return static_cast<WorkerId>(to);
}

}  // namespace

void add_program_functions(rpc::FunctionRegistry& registry) {
  for (const char* op : {"add", "sub", "mul", "div"}) {
    const std::string name = std::string(kRelayPrefix) + op;
    registry.add(name, [op, name](rpc::CallContext& ctx, const rpc::CallArgs& args) {
      const WorkerId to = relay_target(name, args);
      rpc::CallArgs forwarded{args.tensors, {}};
      return ctx.agent().rpc_sync(to, op, forwarded);
    });
  }
  registry.add("mlp_layer", [](rpc::CallContext&, const rpc::CallArgs& args) {
    if (args.tensors.size() != 2 && args.tensors.size() != 3) {
      throw errors::invalid_argument("mlp_layer: takes 2 or 3 tensor arguments (input, weight[, bias]), got " +
                                     std::to_string(args.tensors.size()));
    }
    Tensor h = linear(args.tensors[0], args.tensors[1], args.tensors.size() == 3 ? args.tensors[2] : Tensor());
    const double activation = args.attribute("mlp_layer", "activation", 0.0);
    if (activation == 0) return std::vector<Tensor>{h};
    if (activation == 1) return std::vector<Tensor>{tanh(h)};
    if (activation == 2) return std::vector<Tensor>{relu(h)};
    if (activation == 3) return std::vector<Tensor>{sigmoid(h)};
    throw errors::invalid_argument("mlp_layer: unknown activation " + std::to_string(activation) +
                                   " (0 none, 1 tanh, 2 relu, 3 sigmoid)");
  });
}

ProgramResult run_program_locally(const Program& program, const rpc::FunctionRegistry& registry) {
  std::map<std::string, Tensor> leaves = detail::make_leaves(program);
  std::vector<Tensor> params;
  for (const ProgramParameter& p : program.parameters) {
    Tensor leaf = detail::initial_value(p);
    leaf.set_requires_grad(true);
    leaves[p.name] = leaf;
    params.push_back(leaf);
  }
  std::unique_ptr<optim::Optimizer> optimizer = program.optimizer ? make_local_optimizer(*program.optimizer, params) : nullptr;
  ProgramResult result;
  for (uint32_t call = 0; call < program.backward_calls; ++call) {
    // Each call's own gradients: the optimizer steps with them, as the distributed one steps with
    // its context's; the reported gradients are their sum.
    for (auto& [name, leaf] : leaves) leaf.set_grad(Tensor());
    std::map<std::string, Tensor> values = leaves;
    for (const Statement& s : program.statements) {
      if (s.call == kToHere) {
        values[s.out()] = values.at(s.rrefs.at(0));  // the same tensor: gradients reach the owner's leaf
        continue;
      }
      std::string op = s.call;
      if (op.starts_with(kRelayPrefix)) op = op.substr(kRelayPrefix.size());
      rpc::CallContext local{nullptr, 0};
      rpc::CallArgs args;
      for (const std::string& name : s.args) args.tensors.push_back(values.at(name));
      for (const std::string& name : s.rrefs) args.tensors.push_back(values.at(name));  // appended, as the callee does
      args.attributes = s.attributes;
      args.attributes.erase("to");
      detail::assign(values, detail::function(registry, op)(local, args), s);
    }
    autograd::variable_list roots;
    for (const std::string& r : program.roots) roots.push_back(values.at(r));
    for (uint32_t pass = 0; pass < program.backward_repeat; ++pass) {
      autograd::Engine::backward(roots, {}, pass + 1 == program.backward_repeat ? program.retain_graph : true);
    }
    for (const auto& [name, leaf] : leaves) {
      if (leaf.grad().defined()) detail::accumulate(result.gradients, name, leaf.grad());
    }
    if (!program.loss.empty()) result.losses.push_back(values.at(program.loss).item());
    if (optimizer) {
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad());
      optimizer->step(grads);
    }
  }
  for (const ProgramParameter& p : program.parameters) result.params[p.name] = clone(detach(leaves.at(p.name)));
  return result;
}

}  // namespace dagsim::scenarios
