#include "core/dist_autograd/dist_engine.h"

#include "core/autograd/engine.h"
#include "core/base/error.h"

namespace dagsim::dist_autograd {

using autograd::Engine;
using autograd::InputBuffer;
using autograd::NodeTask;

struct DistEngine::Pass {
  explicit Pass(bool keep_graph) : task(keep_graph) {}
  std::shared_ptr<DistAutogradContext> context;  // alive for the pass, even if released
  autograd::GraphTask task;
  std::map<autograd::Node*, MessageId> send_ids;  // this context's send functions
  std::set<MessageId> sends_pending;              // ... that have not run in this pass
  size_t outstanding = 0;                         // gradient RPCs sent, not yet answered
  std::exception_ptr error;
  runtime::FiberMutex mutex;
  runtime::FiberCondition progress;

  bool done() const { return sends_pending.empty() && outstanding == 0; }
};

DistEngine::DistEngine(DistAutogradContainer& container, rpc::RpcAgent& agent, DistEngineOptions options)
    : container_(container), agent_(agent), options_(options) {}

GradientSender DistEngine::gradient_sender() {
  return [this](WorkerId to, ContextId context, MessageId message, autograd::variable_list grads) {
    send_gradients(to, context, message, std::move(grads));
  };
}

std::shared_ptr<DistEngine::Pass> DistEngine::begin_pass(std::shared_ptr<DistAutogradContext> context, bool keep_graph,
                                                         const std::vector<std::shared_ptr<autograd::Node>>& extra_roots) {
  auto pass = std::make_shared<Pass>(keep_graph);
  pass->context = context;
  std::vector<autograd::Node*> roots;
  for (const auto& root : extra_roots) roots.push_back(root.get());
  for (const auto& [id, send] : context->send_functions()) {
    roots.push_back(send.get());
    pass->send_ids.emplace(send.get(), id);
    pass->sends_pending.insert(id);
  }
  Engine::compute_dependencies(pass->task, roots);
  DistAutogradContext* ctx = context.get();
  pass->task.leaf_capture = [ctx](const Tensor& leaf, Tensor grad) { ctx->accumulate_grad(leaf, grad); };
  passes_.emplace(context->context_id(), pass);
  return pass;
}

void DistEngine::abort(ContextId context, const Error& error) {
  auto it = passes_.find(context);
  if (it == passes_.end()) return;
  if (!it->second->error) it->second->error = std::make_exception_ptr(error);
  it->second->progress.notify_all();
}

void DistEngine::run_pass(ContextId context, const std::shared_ptr<Pass>& pass) {
  struct Forget {
    DistEngine& engine;
    ContextId context;
    ~Forget() { engine.passes_.erase(context); }
  } forget{*this, context};
  runtime::TimePoint deadline = agent_.env().clock.now() + options_.backward_timeout;
  for (;;) {
    while (pass->task.has_ready() && !pass->error) {
      NodeTask task = pass->task.pop_ready();
      if (auto it = pass->send_ids.find(task.node.get()); it != pass->send_ids.end()) {
        pass->sends_pending.erase(it->second);
      }
      try {
        Engine::evaluate(pass->task, std::move(task));
      } catch (...) {
        pass->error = std::current_exception();
      }
      deadline = agent_.env().clock.now() + options_.backward_timeout;  // progress
    }
    if (pass->error) std::rethrow_exception(pass->error);
    if (pass->done()) return;
    runtime::FiberLock lock(pass->mutex);
    const bool woke = runtime::block_until(
        pass->progress, lock, [&] { return pass->task.has_ready() || pass->error || pass->done(); }, deadline,
        "DistEngine pass");
    if (!woke) {
      std::string waiting;
      for (MessageId id : pass->sends_pending) {
        waiting += (waiting.empty() ? "" : ", ") + pass->context->describe_send(id);
      }
      throw errors::timed_out("Error on Node " + std::to_string(agent_.self()) + ": backward pass of context " +
                              std::to_string(context) + " made no progress for " +
                              std::to_string(options_.backward_timeout.count() / 1000000) +
                              " ms; send functions still waiting for gradients: " +
                              (waiting.empty() ? "none" : waiting) + "; gradient RPCs outstanding: " +
                              std::to_string(pass->outstanding) +
                              ". An RPC whose result does not reach the loss never receives gradients.");
    }
  }
}

void DistEngine::backward(ContextId context_id, const autograd::variable_list& roots, bool retain_graph) {
  std::shared_ptr<DistAutogradContext> context = container_.share_context(context_id);
  if (passes_.count(context_id) != 0) {
    throw errors::invalid_argument("a backward pass of context " + std::to_string(context_id) +
                                   " is already running on node " + std::to_string(agent_.self()));
  }
  auto [edges, grads] = Engine::validate_roots(roots, {});
  std::shared_ptr<autograd::Node> graph_root = Engine::make_graph_root(std::move(edges), std::move(grads));
  std::shared_ptr<Pass> pass = begin_pass(context, retain_graph, {graph_root});
  pass->task.push_ready(NodeTask{graph_root, InputBuffer(0)});
  run_pass(context_id, pass);
}

void DistEngine::receive_gradients(WorkerId from, BackwardRequest request) {
  std::shared_ptr<DistAutogradContext> context = container_.share_context(request.context);
  auto send = std::dynamic_pointer_cast<SendRpcBackward>(context->retrieve_send_function(request.message));
  DAGSIM_ASSERT(send != nullptr);
  if (request.grads.size() != send->num_outputs()) {
    throw errors::autograd_error("gradients for autograd message id " + std::to_string(request.message) + " from node " +
                                 std::to_string(from) + ": " + std::to_string(request.grads.size()) +
                                 " tensors for " + std::to_string(send->num_outputs()) + " sent");
  }
  send->set_grads(std::move(request.grads));
  auto running = passes_.find(request.context);
  if (running != passes_.end()) {
    Pass& pass = *running->second;
    if (pass.sends_pending.count(request.message) == 0) {
      throw errors::autograd_error("gradients for autograd message id " + std::to_string(request.message) +
                                   " arrived twice in one backward pass");
    }
    pass.task.push_ready(NodeTask{send, InputBuffer(0)});
    pass.progress.notify_all();
    return;
  }
  std::shared_ptr<Pass> pass = begin_pass(context, request.retain_graph, {});
  pass->task.push_ready(NodeTask{send, InputBuffer(0)});
  run_pass(request.context, pass);
}

void DistEngine::send_gradients(WorkerId to, ContextId context, MessageId message, autograd::variable_list grads) {
  auto it = passes_.find(context);
  DAGSIM_ASSERT_MSG(it != passes_.end(), "a RecvRpcBackward ran outside a distributed backward pass");
  std::shared_ptr<Pass> pass = it->second;
  ++pass->outstanding;
  BackwardRequest request{context, message, pass->task.keep_graph, std::move(grads)};
  runtime::Future<std::vector<Tensor>> reply = agent_.request(
      to, make_backward_request(0, request), "backward pass of context " + std::to_string(context));
  reply.then([pass](runtime::Future<std::vector<Tensor>> done) {
    --pass->outstanding;
    try {
      done.get();
    } catch (...) {
      if (!pass->error) pass->error = std::current_exception();
    }
    pass->progress.notify_all();
  });
}

}  // namespace dagsim::dist_autograd
