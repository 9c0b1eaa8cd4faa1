// The program's distributed run and the gradient service it reads parameters' gradients with
// (program.h).
//
// Parameters are created once, before the first backward call, by remote(owner,
// "dagsim.parameter"), and their RRefs are kept for the whole run (the DistributedOptimizer keeps
// copies). Each backward call reruns the statements in a fresh context: a `remote` statement's
// RRef lives until the end of its call. A parameter's gradient lives in the context on its owner,
// so the driver asks the owner for it (dagsim.program.gradients, with the context and RRef ids as
// attributes: the call carries no tensors and no RRefs, so it is not recorded) before the optimizer
// steps and before the context is released. A parameter on a GPU of its owner's
// (ProgramParameter::device) comes back as host values: its gradients through that service, its
// trained value through dagsim.program.values, as a user would call .cpu() on the owner before
// replying (a reply with a GPU tensor needs a device map back).
#include <optional>

#include "core/base/error.h"
#include "core/optim/distributed_optimizer.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/program/program.h"

namespace dagsim::scenarios {

namespace {

constexpr const char* kGradients = "dagsim.program.gradients";
constexpr const char* kValues = "dagsim.program.values";

// The ids of `names`' RRefs as a call's arguments ("count", "rref<i>").
rpc::CallArgs rref_args(const std::map<std::string, rpc::RRef>& params, const std::vector<std::string>& names) {
  rpc::CallArgs args;
  args.ints["count"] = static_cast<int64_t>(names.size());
  for (size_t i = 0; i < names.size(); ++i) args.set_id("rref" + std::to_string(i), params.at(names[i]).id());
  return args;
}

// The values of the RRefs rref_args named, on their owner.
std::vector<Tensor> owned_values(rpc::RpcAgent& agent, const char* function, const rpc::CallArgs& args) {
  const int64_t count = args.integer(function, "count");
  if (count < 0 || count > 1'000'000) throw errors::invalid_argument(std::string(function) + ": count out of range");
  std::vector<Tensor> values;
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<Tensor> value = agent.owned_value(args.id(function, "rref" + std::to_string(i)));
    values.push_back(value.size() == 1 ? value[0] : Tensor());
  }
  return values;
}

// Adds to `total` the gradients context `context` holds for `params` on their owners.
void fetch_parameter_gradients(rpc::RpcAgent& agent, dist_autograd::ContextId context,
                               const std::map<std::string, rpc::RRef>& params, Gradients& total) {
  std::map<WorkerId, std::vector<std::string>> by_owner;  // ordered: the same calls every run
  for (const auto& [name, rref] : params) by_owner[rref.owner()].push_back(name);
  for (const auto& [owner, names] : by_owner) {
    rpc::CallArgs args = rref_args(params, names);
    args.set_id("context", static_cast<uint64_t>(context));
    const std::vector<Tensor> reply = agent.rpc_sync(owner, kGradients, args);
    const std::vector<double> present = reply.at(0).to_vector();
    size_t next = 1;
    for (size_t i = 0; i < names.size(); ++i) {
      if (present.at(i) != 0) detail::accumulate(total, names[i], reply.at(next++));
    }
  }
}

}  // namespace

void add_gradient_service(rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd) {
  agent.add_local_function(kGradients, [&agent, &autograd](rpc::CallContext&, const rpc::CallArgs& args) {
    const auto context = static_cast<dist_autograd::ContextId>(args.id(kGradients, "context"));
    const int64_t count = args.integer(kGradients, "count");
    if (count < 0 || count > 1'000'000) throw errors::invalid_argument(std::string(kGradients) + ": count out of range");
    // A mask (1: that parameter has a gradient here), then the gradients present, in order.
    std::vector<double> present(static_cast<size_t>(count), 0.0);
    std::vector<Tensor> out(1);
    if (autograd.container().has_context(context)) {
      const std::vector<Tensor> values = owned_values(agent, kGradients, args);
      const dist_autograd::DistAutogradContext& ctx = autograd.container().retrieve_context(context);
      for (size_t i = 0; i < values.size(); ++i) {
        Tensor g = values[i].defined() ? ctx.gradient_of(values[i]) : Tensor();
        if (!g.defined()) continue;
        present[i] = 1;
        out.push_back(to_device(g, Device::cpu()));
      }
    }
    out[0] = from_values({count}, present);
    return out;
  });
  agent.add_local_function(kValues, [&agent](rpc::CallContext&, const rpc::CallArgs& args) {
    std::vector<Tensor> out;
    for (const Tensor& value : owned_values(agent, kValues, args)) {
      if (!value.defined()) throw errors::invalid_argument(std::string(kValues) + ": an RRef without one value");
      out.push_back(to_device(detach(value), Device::cpu()));
    }
    return out;
  });
}

ProgramResult run_program_distributed(const Program& program, rpc::RpcAgent& agent,
                                      dist_autograd::DistAutograd& autograd,
                                      const std::function<void()>& on_backward) {
  std::map<std::string, Tensor> leaves = detail::make_leaves(program, /*on_devices=*/true);
  std::map<std::string, rpc::RRef> params;
  std::vector<rpc::RRef> param_list;
  for (const ProgramParameter& p : program.parameters) {
    rpc::CallArgs init{{detail::initial_value(p)}, {}};
    if (!p.device.is_cpu()) init.strings["device"] = p.device.str();
    rpc::RRef rref = agent.remote(static_cast<WorkerId>(p.on), "dagsim.parameter", init);
    params[p.name] = rref;
    param_list.push_back(rref);
  }
  std::optional<optim::DistributedOptimizer> optimizer;
  if (program.optimizer) optimizer.emplace(agent, optimizer_config(*program.optimizer), param_list);

  ProgramResult result;
  for (uint32_t call = 0; call < program.backward_calls; ++call) {
    dist_autograd::DistAutograd::Context context(autograd);
    std::map<std::string, Tensor> values = leaves;
    std::map<std::string, rpc::RRef> rrefs = params;                          // and this call's remote results
    std::map<std::string, runtime::Future<std::vector<Tensor>>> pending;  // rpc_async results
    std::map<std::string, const Statement*> pending_statement;  // by each name it defines
    std::function<Tensor(const std::string&)> value_of = [&](const std::string& name) {
      if (auto st = pending_statement.find(name); st != pending_statement.end()) {
        const Statement& s = *st->second;
        detail::assign(values, pending.at(s.out()).get(), s);
        pending.erase(s.out());
        for (const std::string& n : s.outs) pending_statement.erase(n);
      }
      return values.at(name);
    };
    for (const Statement& s : program.statements) {
      dist_autograd::CallLabelScope label(s.out());
      if (s.call == kToHere) {
        detail::assign(values, rrefs.at(s.rrefs.at(0)).to_here(), s);
        continue;
      }
      rpc::CallArgs args;
      for (const std::string& name : s.args) args.tensors.push_back(value_of(name));
      for (const std::string& name : s.rrefs) args.rrefs.push_back(rrefs.at(name));
      args.attributes = s.attributes;
      if (s.device) {
        for (Tensor& t : args.tensors) t = to_device(t, *s.device);
      }
      switch (s.via) {
        case Via::local: {
          // The RRefs' values are appended here, as a callee of a builtin appends them.
          for (const rpc::RRef& rref : args.rrefs) {
            for (const Tensor& t : rref.to_here()) args.tensors.push_back(s.device ? to_device(t, *s.device) : t);
          }
          args.rrefs.clear();
          rpc::CallContext local{&agent, agent.self()};
          detail::assign(values, detail::function(agent.registry(), s.call)(local, args), s);
          break;
        }
        case Via::rpc_sync:
          detail::assign(values, agent.rpc_sync(static_cast<WorkerId>(s.on), s.call, args), s);
          break;
        case Via::rpc_async:
          pending.emplace(s.out(), agent.rpc_async(static_cast<WorkerId>(s.on), s.call, args));
          for (const std::string& n : s.outs) pending_statement[n] = &s;
          break;
        case Via::remote:
          rrefs[s.out()] = agent.remote(static_cast<WorkerId>(s.on), s.call, args);
          break;
      }
    }
    autograd::variable_list roots;
    for (const std::string& r : program.roots) roots.push_back(value_of(r));
    // Results of rpc_async calls nobody used still complete before the backward starts.
    for (auto& [name, future] : pending) future.wait();
    for (uint32_t pass = 0; pass < program.backward_repeat; ++pass) {
      const bool last = pass + 1 == program.backward_repeat;
      if (on_backward) on_backward();
      autograd.backward(context.id(), roots, last ? program.retain_graph : true,
                        program.smart ? dist_autograd::BackwardMode::smart : dist_autograd::BackwardMode::fast);
    }
    {
      const dist_autograd::DistAutogradContext& ctx = autograd.container().retrieve_context(context.id());
      for (const auto& [name, leaf] : leaves) {
        Tensor g = ctx.gradient_of(leaf);
        if (g.defined()) detail::accumulate(result.gradients, name, g);
      }
    }
    fetch_parameter_gradients(agent, context.id(), params, result.gradients);
    if (!program.loss.empty()) result.losses.push_back(values.at(program.loss).item());
    if (optimizer) optimizer->step(context.id());
  }
  // Outside any context: plain fetches of the trained values; those on an owner's GPU as host
  // values (one call per owner).
  std::map<WorkerId, std::vector<std::string>> on_devices;  // ordered: the same calls every run
  std::map<std::string, Device> devices;
  for (const ProgramParameter& p : program.parameters) devices[p.name] = p.device;
  for (const auto& [name, rref] : params) {
    if (devices.at(name).is_cpu()) {
      result.params[name] = clone(detach(rref.to_here().at(0)));
    } else {
      on_devices[rref.owner()].push_back(name);
    }
  }
  for (const auto& [owner, names] : on_devices) {
    const std::vector<Tensor> reply = agent.rpc_sync(owner, kValues, rref_args(params, names));
    for (size_t i = 0; i < names.size(); ++i) result.params[names[i]] = reply.at(i);
  }
  return result;
}

}  // namespace dagsim::scenarios
