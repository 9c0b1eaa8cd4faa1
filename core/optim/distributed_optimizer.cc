#include "core/optim/distributed_optimizer.h"

#include <algorithm>
#include <mutex>

#include "core/base/error.h"
#include "core/runtime/cancel_scope.h"
#include "core/tensor/ops.h"

namespace dagsim::optim {

namespace {

std::unique_ptr<Optimizer> make_optimizer(const rpc::CallArgs& args) {
  const char* f = "dagsim.optim.create";
  const int64_t kind = args.integer(f, "kind");
  if (kind == static_cast<int>(OptimizerConfig::Kind::sgd)) {
    SgdOptions o{.lr = args.attribute(f, "lr"),
                 .momentum = args.attribute(f, "momentum", 0.0),
                 .dampening = args.attribute(f, "dampening", 0.0),
                 .weight_decay = args.attribute(f, "weight_decay", 0.0),
                 .nesterov = args.integer(f, "nesterov", 0) != 0};
    return std::make_unique<Sgd>(args.tensors, o);
  }
  if (kind == static_cast<int>(OptimizerConfig::Kind::adam)) {
    AdamOptions o{.lr = args.attribute(f, "lr"),
                  .beta1 = args.attribute(f, "beta1", 0.9),
                  .beta2 = args.attribute(f, "beta2", 0.999),
                  .eps = args.attribute(f, "eps", 1e-8),
                  .weight_decay = args.attribute(f, "weight_decay", 0.0)};
    return std::make_unique<Adam>(args.tensors, o);
  }
  throw errors::invalid_argument("dagsim.optim.create: unknown optimizer kind " + std::to_string(kind));
}

// An optimizer's state on the wire: a tensor of per-parameter counts, then each parameter's state
// tensors in order. Nothing in it is code, and a count that does not fit the tensors is refused.
std::vector<Tensor> encode_states(const std::vector<std::vector<Tensor>>& states) {
  std::vector<double> counts;
  std::vector<Tensor> out(1);
  for (const std::vector<Tensor>& s : states) {
    counts.push_back(static_cast<double>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  out[0] = from_values({static_cast<int64_t>(states.size())}, counts);
  return out;
}

std::vector<std::vector<Tensor>> decode_states(const std::vector<Tensor>& tensors, size_t params, const char* what) {
  if (tensors.empty() || tensors[0].numel() != static_cast<int64_t>(params)) {
    throw errors::invalid_argument(std::string(what) + ": expected the states of " + std::to_string(params) + " parameters");
  }
  const std::vector<double> counts = tensors[0].to_vector();
  std::vector<std::vector<Tensor>> states(params);
  size_t next = 1;
  for (size_t i = 0; i < params; ++i) {
    const double c = counts[i];
    if (!(c >= 0 && c <= 16 && c == static_cast<double>(static_cast<size_t>(c))) || next + static_cast<size_t>(c) > tensors.size()) {
      throw errors::invalid_argument(std::string(what) + ": the state count of parameter " + std::to_string(i) + " does not fit");
    }
    states[i].assign(tensors.begin() + static_cast<std::ptrdiff_t>(next), tensors.begin() + static_cast<std::ptrdiff_t>(next + static_cast<size_t>(c)));
    next += static_cast<size_t>(c);
  }
  if (next != tensors.size()) throw errors::invalid_argument(std::string(what) + ": tensors past the last state");
  return states;
}

}  // namespace

Optimizer& OptimizerHost::owned(const char* function, uint64_t id, WorkerId caller) {
  auto it = optimizers_.find(id);
  if (it == optimizers_.end()) {
    throw errors::invalid_argument(std::string(function) + ": no optimizer " + std::to_string(id) + " on this node");
  }
  if (worker_of(id) != caller) {
    throw errors::invalid_argument(std::string(function) + ": optimizer " + std::to_string(id) + " belongs to node " +
                                   std::to_string(worker_of(id)) + ", not to node " + std::to_string(caller) +
                                   ", which called");
  }
  DAGSIM_ASSERT(it->second != nullptr);
  return *it->second;
}

OptimizerHost::OptimizerHost(rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd) : autograd_(autograd) {
  DAGSIM_ASSERT_MSG(autograd.container().worker_id() == agent.self(), "a host serves its own node's autograd");
  agent.add_local_function("dagsim.optim.create", [this](rpc::CallContext& ctx, const rpc::CallArgs& args) {
    // The parameters arrive as this node's RRef values (run_function resolved args.rrefs). The
    // caller names the optimizer with a global id of its own (its node, incarnation and counter),
    // so ids are a function of the caller's history alone and never collide across callers.
    const uint64_t id = args.id("dagsim.optim.create", "id");
    if (id == 0 || optimizers_.count(id) != 0 || worker_of(id) != ctx.caller) {
      throw errors::invalid_argument("dagsim.optim.create: optimizer id " + std::to_string(id) + " is " +
                                     (id == 0                        ? "not an id"
                                      : optimizers_.count(id) != 0 ? "already taken on this node"
                                                                   : "not one of node " + std::to_string(ctx.caller) + "'s ids"));
    }
    optimizers_[id] = make_optimizer(args);
    DAGSIM_ASSERT(optimizers_.at(id) != nullptr);
    return std::vector<Tensor>{};
  });
  agent.add_local_function("dagsim.optim.drop", [this](rpc::CallContext& ctx, const rpc::CallArgs& args) {
    const uint64_t id = args.id("dagsim.optim.drop", "id");
    if (optimizers_.count(id) == 0) return std::vector<Tensor>{};  // dropped already (a retried drop)
    owned("dagsim.optim.drop", id, ctx.caller);
    optimizers_.erase(id);
    DAGSIM_ASSERT(optimizers_.count(id) == 0);  // dropping twice (a retried drop) is harmless
    return std::vector<Tensor>{};
  });
  // The step lock may wait for another trainer's step, and a drop may come meanwhile (the
  // caller gave up on a slow step and let its optimizer go): each looks its optimizer up again
  // once it holds the lock, never through an iterator from before.
  agent.add_local_function("dagsim.optim.state", [this](rpc::CallContext& ctx, const rpc::CallArgs& args) {
    const uint64_t id = args.id("dagsim.optim.state", "id");
    owned("dagsim.optim.state", id, ctx.caller);
    std::lock_guard<runtime::Mutex> serial(step_lock_);  // never half a step
    const Optimizer& optimizer = owned("dagsim.optim.state", id, ctx.caller);
    std::vector<std::vector<Tensor>> states;
    for (size_t i = 0; i < optimizer.params().size(); ++i) states.push_back(optimizer.state(i));
    return encode_states(states);
  });
  agent.add_local_function("dagsim.optim.load_state", [this](rpc::CallContext& ctx, const rpc::CallArgs& args) {
    const uint64_t id = args.id("dagsim.optim.load_state", "id");
    owned("dagsim.optim.load_state", id, ctx.caller);
    std::lock_guard<runtime::Mutex> serial(step_lock_);
    Optimizer& optimizer = owned("dagsim.optim.load_state", id, ctx.caller);
    const auto states = decode_states(args.tensors, optimizer.params().size(), "dagsim.optim.load_state");
    for (size_t i = 0; i < states.size(); ++i) optimizer.load_state(i, states[i]);
    return std::vector<Tensor>{};
  });
  agent.add_local_function("dagsim.optim.step", [this](rpc::CallContext& ctx, const rpc::CallArgs& args) {
    const uint64_t id = args.id("dagsim.optim.step", "id");
    const auto context = static_cast<dist_autograd::ContextId>(args.id("dagsim.optim.step", "context"));
    owned("dagsim.optim.step", id, ctx.caller);
    std::lock_guard<runtime::Mutex> serial(step_lock_);
    Optimizer& optimizer = owned("dagsim.optim.step", id, ctx.caller);
    std::vector<Tensor> grads;
    if (autograd_.container().has_context(context)) {
      const dist_autograd::DistAutogradContext& ctx = autograd_.container().retrieve_context(context);
      for (const Tensor& p : optimizer.params()) grads.push_back(ctx.gradient_of(p));
    } else {
      grads.resize(optimizer.params().size());  // none of this owner's parameters took part
    }
    DAGSIM_ASSERT_EQ(grads.size(), optimizer.params().size());
    optimizer.step(grads);
    return std::vector<Tensor>{};
  });
}

DistributedOptimizer::DistributedOptimizer(rpc::RpcAgent& agent, OptimizerConfig config, std::vector<rpc::RRef> params)
    : agent_(agent), params_(std::move(params)) {
  std::map<WorkerId, std::vector<rpc::RRef>> by_owner;
  for (size_t i = 0; i < params_.size(); ++i) {
    by_owner[params_[i].owner()].push_back(params_[i]);
    params_on_[params_[i].owner()].push_back(i);
  }
  DAGSIM_ASSERT(by_owner.size() <= params_.size());
  for (const auto& [owner, rrefs] : by_owner) {
    rpc::CallArgs args;
    args.rrefs = rrefs;
    const uint64_t id = agent.new_global_id();
    args.set_id("id", id);
    args.ints["kind"] = static_cast<int64_t>(config.kind);
    if (config.kind == OptimizerConfig::Kind::sgd) {
      args.attributes["lr"] = config.sgd.lr;
      args.attributes["momentum"] = config.sgd.momentum;
      args.attributes["dampening"] = config.sgd.dampening;
      args.attributes["weight_decay"] = config.sgd.weight_decay;
      args.ints["nesterov"] = config.sgd.nesterov ? 1 : 0;
    } else {
      args.attributes["lr"] = config.adam.lr;
      args.attributes["beta1"] = config.adam.beta1;
      args.attributes["beta2"] = config.adam.beta2;
      args.attributes["eps"] = config.adam.eps;
      args.attributes["weight_decay"] = config.adam.weight_decay;
    }
    agent.rpc_sync(owner, "dagsim.optim.create", args);
    const bool inserted = optimizer_on_.emplace(owner, id).second;
    DAGSIM_ASSERT(inserted && worker_of(id) == agent.self());  // one optimizer per owner, named by us
  }
}

DistributedOptimizer::~DistributedOptimizer() {
  DAGSIM_ASSERT(optimizer_on_.size() <= params_.size());
  for (const auto& [owner, id] : optimizer_on_) {
    rpc::CallArgs args;
    args.set_id("id", id);
    try {
      // Fire and forget: an owner that cannot be reached has lost its optimizers with its life.
      agent_.rpc_async(owner, "dagsim.optim.drop", args);
    } catch (const Error&) {
    }
  }
}

void DistributedOptimizer::step(dist_autograd::ContextId context) {
  std::vector<runtime::Future<std::vector<Tensor>>> pending;
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "a distributed step blocks: run it on a node fiber");
  for (const auto& [owner, id] : optimizer_on_) {
    rpc::CallArgs args;
    args.set_id("id", id);
    args.set_id("context", static_cast<uint64_t>(context));
    pending.push_back(agent_.rpc_async(owner, "dagsim.optim.step", args));
  }
  std::exception_ptr first;
  for (auto& f : pending) {
    try {
      f.get();
    } catch (const Error& e) {
      // A caller being unwound (its node died, its worker group was stopped) stops waiting at
      // once: the other owners' replies may never come to it.
      runtime::rethrow_if_unwinding(e);
      if (!first) first = std::current_exception();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  DAGSIM_ASSERT(std::all_of(pending.begin(), pending.end(), [](const auto& f) { return f.is_ready(); }));
  if (first) std::rethrow_exception(first);
}

std::vector<std::vector<Tensor>> DistributedOptimizer::state_dict() {
  // Every owner at once, as step() asks them.
  std::vector<std::pair<WorkerId, runtime::Future<std::vector<Tensor>>>> pending;
  for (const auto& [owner, id] : optimizer_on_) {
    rpc::CallArgs args;
    args.set_id("id", id);
    pending.emplace_back(owner, agent_.rpc_async(owner, "dagsim.optim.state", args));
  }
  std::vector<std::vector<Tensor>> out(params_.size());
  std::exception_ptr first;
  for (auto& [owner, reply] : pending) {
    try {
      const std::vector<size_t>& indices = params_on_.at(owner);
      auto states = decode_states(reply.get(), indices.size(), "dagsim.optim.state");
      for (size_t k = 0; k < indices.size(); ++k) out[indices[k]] = std::move(states[k]);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
  return out;
}

void DistributedOptimizer::load_state_dict(const std::vector<std::vector<Tensor>>& state) {
  if (state.size() != params_.size()) {
    throw errors::invalid_argument("load_state_dict: the states of " + std::to_string(state.size()) + " parameters for " +
                                   std::to_string(params_.size()));
  }
  for (const auto& [owner, id] : optimizer_on_) {
    std::vector<std::vector<Tensor>> mine;
    for (size_t i : params_on_.at(owner)) mine.push_back(state[i]);
    rpc::CallArgs args;
    args.set_id("id", id);
    args.tensors = encode_states(mine);
    agent_.rpc_sync(owner, "dagsim.optim.load_state", args);
  }
}

}  // namespace dagsim::optim
