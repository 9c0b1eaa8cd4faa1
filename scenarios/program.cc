#include "scenarios/program.h"

#include "core/autograd/engine.h"
#include "core/base/error.h"
#include "core/tensor/ops.h"

namespace dagsim::scenarios {

namespace {

constexpr std::string_view kRelay = "relay_";

std::map<std::string, Tensor> make_leaves(const Program& program) {
  std::map<std::string, Tensor> values;
  for (const ProgramTensor& t : program.tensors) {
    Tensor leaf = from_values(t.shape, t.values);
    if (t.requires_grad) leaf.set_requires_grad(true);
    values[t.name] = leaf;
  }
  return values;
}

rpc::CallArgs args_of(const Statement& s, const std::function<Tensor(const std::string&)>& value_of) {
  rpc::CallArgs args;
  for (const std::string& name : s.args) args.tensors.push_back(value_of(name));
  args.attributes = s.attributes;
  return args;
}

Tensor single(const std::vector<Tensor>& results, const Statement& s) {
  if (results.size() != 1) {
    throw errors::invalid_argument("statement '" + s.out + "': " + s.call + " returned " + std::to_string(results.size()) +
                                   " tensors, expected 1");
  }
  return results[0];
}

const rpc::RpcFunction& function(const rpc::FunctionRegistry& registry, const std::string& name) {
  const rpc::RpcFunction* f = registry.find(name);
  if (f == nullptr) throw errors::invalid_argument("unknown function '" + name + "'");
  return *f;
}

Gradients collect(const Program& program, const std::map<std::string, Tensor>& leaves,
                  const std::function<Tensor(const Tensor&)>& gradient_of) {
  Gradients out;
  for (const ProgramTensor& t : program.tensors) {
    Tensor g = gradient_of(leaves.at(t.name));
    if (g.defined()) out[t.name] = g;
  }
  return out;
}

}  // namespace

void add_program_functions(rpc::FunctionRegistry& registry) {
  for (const char* op : {"add", "sub", "mul", "div"}) {
    const std::string name = std::string(kRelay) + op;
    registry.add(name, [op](rpc::CallContext& ctx, const rpc::CallArgs& args) {
      const auto to = static_cast<WorkerId>(args.attribute(std::string(kRelay) + op, "to"));
      rpc::CallArgs forwarded{args.tensors, {}};
      return ctx.agent().rpc_sync(to, op, forwarded);
    });
  }
}

Gradients run_program_locally(const Program& program, const rpc::FunctionRegistry& registry) {
  std::map<std::string, Tensor> leaves = make_leaves(program);
  for (uint32_t call = 0; call < program.backward_calls; ++call) {
    std::map<std::string, Tensor> values = leaves;
    auto value_of = [&](const std::string& name) { return values.at(name); };
    for (const Statement& s : program.statements) {
      std::string op = s.call;
      if (op.rfind(kRelay, 0) == 0) op = op.substr(kRelay.size());
      rpc::CallContext local{nullptr, 0};
      rpc::CallArgs args = args_of(s, value_of);
      args.attributes.erase("to");
      values[s.out] = single(function(registry, op)(local, args), s);
    }
    autograd::variable_list roots;
    for (const std::string& r : program.roots) roots.push_back(values.at(r));
    autograd::Engine::backward(roots, {}, program.retain_graph);
  }
  return collect(program, leaves, [](const Tensor& leaf) { return leaf.grad(); });
}

Gradients run_program_distributed(const Program& program, rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd) {
  std::map<std::string, Tensor> leaves = make_leaves(program);
  Gradients total;
  for (uint32_t call = 0; call < program.backward_calls; ++call) {
    dist_autograd::DistAutograd::Context context(autograd);
    std::map<std::string, Tensor> values = leaves;
    std::map<std::string, runtime::Future<std::vector<Tensor>>> pending;  // rpc_async results
    std::map<std::string, const Statement*> pending_statement;
    std::function<Tensor(const std::string&)> value_of = [&](const std::string& name) {
      if (auto it = pending.find(name); it != pending.end()) {
        values[name] = single(it->second.get(), *pending_statement.at(name));
        pending.erase(it);
      }
      return values.at(name);
    };
    for (const Statement& s : program.statements) {
      rpc::CallArgs args = args_of(s, value_of);
      dist_autograd::CallLabelScope label(s.out);
      switch (s.via) {
        case Via::local: {
          rpc::CallContext local{&agent, agent.self()};
          values[s.out] = single(function(agent.registry(), s.call)(local, args), s);
          break;
        }
        case Via::rpc_sync:
          values[s.out] = single(agent.rpc_sync(static_cast<WorkerId>(s.on), s.call, args), s);
          break;
        case Via::rpc_async:
          pending.emplace(s.out, agent.rpc_async(static_cast<WorkerId>(s.on), s.call, args));
          pending_statement[s.out] = &s;
          break;
      }
    }
    autograd::variable_list roots;
    for (const std::string& r : program.roots) roots.push_back(value_of(r));
    // Results of rpc_async calls nobody used still complete before the backward starts.
    for (auto& [name, future] : pending) future.wait();
    autograd.backward(context.id(), roots, program.retain_graph);
    dist_autograd::DistAutogradContext& ctx = autograd.container().retrieve_context(context.id());
    Gradients these = collect(program, leaves, [&ctx](const Tensor& leaf) { return ctx.gradient_of(leaf); });
    for (auto& [name, g] : these) total[name] = total.count(name) ? add(total[name], g) : clone(g);
  }
  return total;
}

}  // namespace dagsim::scenarios
