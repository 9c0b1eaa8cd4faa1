#include "core/dist_autograd/dist_engine.h"

#include "core/autograd/engine.h"
#include "core/tensor/ops.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/base/planted.h"

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
  bool initiator = false;                         // the pass backward() started on this node
  uint64_t smart_token = 0;                       // SMART mode's discovery; 0: FAST mode
  bool evaluating = false;                        // a node of the graph is running now
  bool ended = false;                             // run_pass returned or threw
  std::exception_ptr error;
  runtime::FiberMutex mutex;
  runtime::FiberCondition progress;

  bool done() const { return sends_pending.empty() && outstanding == 0; }
};

DistEngine::DistEngine(DistAutogradContainer& container, rpc::RpcAgent& agent, DistEngineOptions options)
    : container_(container), agent_(agent), options_(options) {
  DAGSIM_ASSERT_MSG(options_.backward_timeout.count() > 0, "a backward timeout must be positive");
  DAGSIM_ASSERT_MSG(options_.termination_probe_interval.count() >= 0, "a probe interval cannot be negative");
  DAGSIM_ASSERT_EQ(container.worker_id(), agent.self());
}

GradientSender DistEngine::gradient_sender() {
  return [this](WorkerId to, ContextId context, MessageId message, autograd::variable_list grads) {
    send_gradients(to, context, message, std::move(grads));
  };
}

std::shared_ptr<DistEngine::Pass> DistEngine::begin_pass(std::shared_ptr<DistAutogradContext> context, bool keep_graph,
                                                         const std::vector<std::shared_ptr<autograd::Node>>& extra_roots,
                                                         uint64_t smart_token) {
  // Checked again here, not only where backward() starts: SMART discovery waits on peers, and a
  // peer's gradients for this context may begin a pass meanwhile. Its timing, so an error.
  if (passes_.count(context->context_id()) != 0) {
    throw errors::autograd_error("a backward pass of context " + short_id(static_cast<uint64_t>(context->context_id())) +
                                 " is already running on node " + std::to_string(agent_.self()) +
                                 " (a peer's gradients began one while this one started)");
  }
  auto pass = std::make_shared<Pass>(keep_graph);
  pass->context = context;
  pass->smart_token = smart_token;
  std::vector<autograd::Node*> roots;
  for (const auto& root : extra_roots) roots.push_back(root.get());
  for (const auto& [id, send] : context->send_functions()) {
    if (smart_token != 0 && !context->is_needed(smart_token, id)) continue;  // no root reaches it
    roots.push_back(send.get());
    pass->send_ids.emplace(send.get(), id);
    pass->sends_pending.insert(id);
  }
  DAGSIM_ASSERT_EQ(pass->send_ids.size(), pass->sends_pending.size());  // one pending entry per send function
  Engine::compute_dependencies(pass->task, roots);
  DistAutogradContext* ctx = context.get();
  pass->task.leaf_capture = [ctx](const Tensor& leaf, Tensor grad) {
    // Gradients accumulate in the context, never in .grad, and only for leaves that want them.
    DAGSIM_ASSERT(leaf.requires_grad() && leaf.grad_fn() == nullptr);
    ctx->accumulate_grad(leaf, std::move(grad));
  };
  const bool inserted = passes_.emplace(context->context_id(), pass).second;
  DAGSIM_ASSERT_MSG(inserted, "two passes of one context on one node");  // checked at the top; nothing blocked since
  return pass;
}

void DistEngine::abort(ContextId context, const Error& error) {
  auto it = passes_.find(context);
  if (it == passes_.end()) return;
  if (!it->second->error) it->second->error = std::make_exception_ptr(error);
  DAGSIM_ASSERT(it->second->error != nullptr);  // the first error stays; the pass ends with one
  it->second->progress.notify_all();
}

bool DistEngine::failing_or_idle(ContextId context) const {
  auto it = passes_.find(context);
  return it == passes_.end() || it->second->error != nullptr;
}

void DistEngine::run_pass(ContextId context, const std::shared_ptr<Pass>& pass) {
  struct Forget {
    DistEngine& engine;
    ContextId context;
    Pass& pass;
    ~Forget() {
      DAGSIM_ASSERT(!pass.ended);  // one run per pass
      engine.passes_.erase(context);
      pass.ended = true;
      pass.progress.notify_all();  // the detector, if any, stops
    }
  } forget{*this, context, *pass};
  agent_.env().log.event("autograd", "pass begins, context " + std::to_string(context) +
                                         (pass->initiator ? " (this node's backward)" : " (gradients from a peer)"));
  struct Ended {
    runtime::Log& log;
    ContextId context;
    ~Ended() { log.event("autograd", "pass ends, context " + std::to_string(context)); }
  } ended{agent_.env().log, context};
  runtime::Clock& clock = agent_.env().clock;
  const runtime::Duration probe_interval = options_.termination_probe_interval;
  bool detecting = !pass->initiator || probe_interval.count() <= 0;  // only the initiator detects
  runtime::TimePoint deadline = clock.now() + options_.backward_timeout;
  for (;;) {
    // Registered for as long as it runs: gradients and aborts find it by its context.
    DAGSIM_ASSERT(passes_.count(context) == 1 && passes_.at(context) == pass);
    while (pass->task.has_ready() && !pass->error) {
      NodeTask task = pass->task.pop_ready();
      if (auto it = pass->send_ids.find(task.node.get()); it != pass->send_ids.end()) {
        pass->sends_pending.erase(it->second);
      }
      pass->evaluating = true;
      // Profiling (PyTorch's dist_autograd profiling): each function of the pass, in the trace.
      agent_.env().log.event("autograd", std::string(task.node->name()) + " context " + std::to_string(context));
      try {
        Engine::evaluate(pass->task, std::move(task));
      } catch (...) {
        DAGSIM_PROBE("dist_autograd.function_failed_in_pass");
        pass->error = std::current_exception();
      }
      pass->evaluating = false;
      deadline = clock.now() + options_.backward_timeout;  // progress
    }
    DAGSIM_ASSERT(!pass->evaluating);
    if (pass->error) std::rethrow_exception(pass->error);
    if (pass->done()) {
      DAGSIM_ASSERT(!pass->task.has_ready() && pass->outstanding == 0);
      pass->context->note_pass_completed();
      return;
    }
    // Idle: wait for gradients, replies or an abort. The first time the initiator stays idle for
    // the probe interval, it starts termination detection beside the pass.
    const runtime::TimePoint wake_at = detecting ? deadline : std::min(deadline, clock.now() + probe_interval);
    runtime::FiberLock lock(pass->mutex);
    const bool woke = runtime::block_until(
        pass->progress, lock, [&] { return pass->task.has_ready() || pass->error || pass->done(); }, wake_at,
        "DistEngine pass");
    if (!woke && wake_at < deadline) {
      DAGSIM_ASSERT(pass->initiator);  // only the initiator ever wakes early to detect
      DAGSIM_PROBE("dist_autograd.termination_detection_started");
      detecting = true;
      agent_.env().spawner.spawn("dist_autograd.termination", [this, context, pass] { detect_termination(context, pass); });
      continue;
    }
    if (!woke) {
      DAGSIM_ASSERT(!pass->done() && !pass->error);  // the predicate was false at the deadline
      DAGSIM_PROBE("dist_autograd.backward_timed_out_without_progress");
      std::string waiting;
      for (MessageId id : pass->sends_pending) {
        waiting += (waiting.empty() ? "" : ", ") + pass->context->describe_send(id);
      }
      throw errors::timed_out("Error on Node " + std::to_string(agent_.self()) + ": backward pass of context " +
                              short_id(static_cast<uint64_t>(context)) + " made no progress for " +
                              std::to_string(options_.backward_timeout.count() / 1000000) +
                              " ms; send functions still waiting for gradients: " +
                              (waiting.empty() ? "none" : waiting) + "; gradient RPCs outstanding: " +
                              std::to_string(pass->outstanding) +
                              ". An RPC whose result does not reach the loss never receives gradients.");
    }
  }
}

void DistEngine::backward(ContextId context_id, const autograd::variable_list& roots, bool retain_graph, BackwardMode mode) {
  std::shared_ptr<DistAutogradContext> context = container_.share_context(context_id);
  if (passes_.count(context_id) != 0) {
    throw errors::invalid_argument("a backward pass of context " + short_id(static_cast<uint64_t>(context_id)) +
                                   " is already running on node " + std::to_string(agent_.self()));
  }
  // PyTorch's DistEngine::validateRootsAndRetrieveEdges, with its texts (test_backward_invalid_args):
  // stricter than the local engine's, a root must be a scalar with a gradient function.
  if (roots.empty()) throw errors::autograd_error("No tensors provided for gradient computation.");
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    const std::string which = "root " + std::to_string(i);
    if (!root.defined()) throw errors::autograd_error(which + " is undefined");
    if (!root.requires_grad()) throw errors::autograd_error("requires_grad not set on " + which);
    if (root.numel() != 1) {
      throw errors::autograd_error(which + " (shape " + shape_str(root.shape()) + ") is not a scalar, all roots need to be scalar");
    }
    if (root.grad_fn() == nullptr) throw errors::autograd_error(which + " does not have a valid gradient function.");
  }
  auto [edges, grads] = Engine::validate_roots(roots, {});
  std::shared_ptr<autograd::Node> graph_root = Engine::make_graph_root(std::move(edges), std::move(grads));
  uint64_t smart_token = 0;
  if (mode == BackwardMode::smart) {
    smart_token = agent_.new_global_id();  // unique across workers and incarnations
    discover(*context, smart_token, {graph_root.get()});
  }
  std::shared_ptr<Pass> pass = begin_pass(context, retain_graph, {graph_root}, smart_token);
  pass->initiator = true;
  pass->task.push_ready(NodeTask{graph_root, InputBuffer(0)});
  run_pass(context_id, pass);
  // Returned without an error: every send function ran and every gradient RPC was answered.
  DAGSIM_ASSERT(pass->ended && pass->done() && pass->error == nullptr);
}

void DistEngine::receive_gradients(WorkerId from, BackwardRequest request) {
  std::shared_ptr<DistAutogradContext> context = container_.share_context(request.context);
  // The request is received now; its reply (a result or an error) counts as sent when we return,
  // a little before the agent sends it, which only delays detection.
  context->note_gradient_message_received();
  struct Replied {
    DistAutogradContext& context;
    ~Replied() { context.note_gradient_message_sent(); }
  } replied{*context};
  auto send = std::dynamic_pointer_cast<SendRpcBackward>(context->retrieve_send_function(request.message));
  DAGSIM_ASSERT(send != nullptr);
  DAGSIM_ASSERT_EQ(worker_of(static_cast<uint64_t>(request.message)), agent_.self());  // our own send's id
  if (request.grads.size() != send->num_outputs()) {
    throw errors::autograd_error("gradients for autograd message id " + std::to_string(request.message) + " from node " +
                                 std::to_string(from) + ": " + std::to_string(request.grads.size()) +
                                 " tensors for " + std::to_string(send->num_outputs()) + " sent");
  }
  send->set_grads(std::move(request.grads));
  auto running = passes_.find(request.context);
  if (running != passes_.end()) {
    Pass& pass = *running->second;
    if (pass.context != context) {
      // The context was released (its pass aborted, still unwinding) and made again by a later
      // call: these gradients belong to neither life of it.
      throw errors::autograd_error("gradients for autograd message id " + std::to_string(request.message) +
                                   " arrived for context " + short_id(static_cast<uint64_t>(request.context)) +
                                   " while the pass of its released predecessor is still ending on node " +
                                   std::to_string(agent_.self()));
    }
    if (pass.sends_pending.count(request.message) == 0) {
      throw errors::autograd_error("gradients for autograd message id " + std::to_string(request.message) +
                                   " arrived twice in one backward pass");
    }
    pass.task.push_ready(NodeTask{send, InputBuffer(0)});
    DAGSIM_ASSERT(pass.task.has_ready());  // the running pass picks it up when it wakes
    pass.progress.notify_all();
    return;
  }
  if (request.smart_token != 0 && !context->is_needed(request.smart_token, request.message)) {
    throw errors::autograd_error("gradients for autograd message id " + std::to_string(request.message) +
                                 ", which SMART-mode discovery did not mark on node " + std::to_string(agent_.self()));
  }
  std::shared_ptr<Pass> pass = begin_pass(context, request.retain_graph, {}, request.smart_token);
  DAGSIM_ASSERT(!pass->initiator && pass->sends_pending.count(request.message) == 1);
  pass->task.push_ready(NodeTask{send, InputBuffer(0)});
  run_pass(request.context, pass);
}

void DistEngine::send_gradients(WorkerId to, ContextId context, MessageId message, autograd::variable_list grads) {
  auto it = passes_.find(context);
  DAGSIM_ASSERT_MSG(it != passes_.end(), "a RecvRpcBackward ran outside a distributed backward pass");
  std::shared_ptr<Pass> pass = it->second;
  DAGSIM_ASSERT(pass->evaluating);
  DAGSIM_ASSERT(pass->context->context_id() == context && !grads.empty());  // RecvRpcBackward runs inside the pass's evaluation
  ++pass->outstanding;
  pass->context->note_gradient_message_sent();
  // Gradients travel as host values; the peer puts each on its tensor's device (SendRpcBackward).
  for (Tensor& g : grads) {
    if (g.defined() && !g.device().is_cpu()) g = to_device(g, Device::cpu());
  }
  BackwardRequest request{context, message, pass->task.keep_graph, std::move(grads), pass->smart_token};
  // Answered only when the peer's own pass is done, which may take long: bounded by the backward
  // timeout, not the RPC timeout. Whether the peer is alive is the detector's probes' business.
  runtime::Future<rpc::Bytes> reply =
      agent_.request_bytes(to, rpc::MessageType::backward_autograd_req, rpc::to_bytes(request), options_.backward_timeout,
                           "backward pass of context " + short_id(static_cast<uint64_t>(context)));
  reply.then([pass](runtime::Future<rpc::Bytes> done) {
    DAGSIM_ASSERT(pass->outstanding > 0);  // paired with send_gradients' increment
    --pass->outstanding;
    pass->context->note_gradient_message_received();  // the reply, or the failure standing for it
    try {
      done.get();
    } catch (...) {
      // A peer's pass failed (or it could not be reached): its error comes back along the chain
      // of gradient RPCs and fails this pass too.
      DAGSIM_PROBE("dist_autograd.backward_error_propagated");
      if (!pass->error) pass->error = std::current_exception();
    }
    pass->progress.notify_all();
  });
}

ProbeReport DistEngine::report(ContextId context, uint64_t wave) {
  ProbeReport out{context, wave};
  if (!container_.has_context(context)) return out;
  const std::shared_ptr<DistAutogradContext> ctx = container_.share_context(context);
  out.has_context = true;
  out.sent = ctx->gradient_messages_sent();
  out.received = ctx->gradient_messages_received();
  out.known_workers.assign(ctx->known_worker_ids().begin(), ctx->known_worker_ids().end());
  const std::string where = " on node " + std::to_string(agent_.self());
  if (auto it = passes_.find(context); it != passes_.end()) {
    const Pass& pass = *it->second;
    out.busy = pass.task.has_ready() || pass.evaluating;
    for (MessageId id : pass.sends_pending) out.waiting.push_back(clip(ctx->describe_send(id) + where, kMaxDescription));
    DAGSIM_ASSERT(!out.busy || out.has_context);
  } else if (ctx->passes_completed() == 0) {
    // No pass ever started here: no gradient reached any of its send functions.
    for (const auto& [id, send] : ctx->send_functions()) {
      out.waiting.push_back(clip(ctx->describe_send(id) + where, kMaxDescription));
    }
  }
  return out;
}

void DistEngine::detect_termination(ContextId context, std::shared_ptr<Pass> pass) {
  auto over = [&pass] { return pass->ended || pass->error || pass->done(); };
  DAGSIM_ASSERT_MSG(pass->initiator, "only the initiating pass detects termination");
  std::optional<Wave> previous;
  while (!over()) {
    Wave reached;
    std::string lost;
    std::optional<Wave> wave = run_wave(context, ++waves_, reached, lost);
    if (over()) return;
    if (!lost.empty()) {
      DAGSIM_PROBE("dist_autograd.termination_lost_a_worker");
      fail_everywhere(context, *pass, reached,
                      "Error on Node " + std::to_string(agent_.self()) + ": backward pass of context " +
                          short_id(static_cast<uint64_t>(context)) + " lost a worker: " + lost);
      return;
    }
    if (wave && quiescent(*wave)) {
      DAGSIM_ASSERT(wave->count(agent_.self()) == 1);  // every wave starts with this node's report
      if (previous && proves_termination(*previous, *wave)) {
        DAGSIM_PROBE("dist_autograd.termination_proved_unfinishable");
        fail_everywhere(context, *pass, *wave, describe_unfinishable(agent_.self(), context, *wave));
        return;
      }
      previous = std::move(wave);
      DAGSIM_ASSERT(quiescent(*previous));  // the first of the two waves proves_termination compares
      continue;  // the confirming wave, at once
    }
    previous.reset();
    runtime::FiberLock lock(pass->mutex);
    runtime::block_until(pass->progress, lock, over, agent_.env().clock.now() + options_.termination_probe_interval,
                         "termination detection");
  }
}

std::optional<Wave> DistEngine::run_wave(ContextId context, uint64_t wave_id, Wave& wave, std::string& lost) {
  DAGSIM_ASSERT(wave.empty() && lost.empty());
  wave.emplace(agent_.self(), report(context, wave_id));
  if (!wave.begin()->second.has_context) return std::nullopt;
  std::set<WorkerId> asked{agent_.self()};
  std::vector<WorkerId> frontier = wave.begin()->second.known_workers;
  while (!frontier.empty()) {
    // Probe every newly learnt worker of this round at once (each within the RPC timeout), then
    // learn from their reports.
    std::vector<std::pair<WorkerId, runtime::Future<rpc::Bytes>>> replies;
    for (WorkerId worker : frontier) {
      if (!asked.insert(worker).second) continue;
      // Planted (core/base/planted.h, autograd_probe_timeout): a probe bounded by the probe interval.
      const std::optional<runtime::Duration> probe_timeout =
          DAGSIM_PLANTED("autograd_probe_timeout") ? std::optional(options_.termination_probe_interval) : std::nullopt;
      replies.emplace_back(worker, agent_.request_bytes(worker, rpc::MessageType::termination_probe_req,
                                                        rpc::to_bytes(ProbeRequest{context, wave_id}), probe_timeout,
                                                        "termination probe of context " + short_id(static_cast<uint64_t>(context))));
    }
    frontier.clear();
    for (auto& [worker, reply] : replies) {
      ProbeReport report;
      try {
        report = rpc::from_bytes<ProbeReport>(reply.get());
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        // A worker that cannot answer within the RPC timeout (dead, crashed, cut off) will not
        // send or answer gradients either: the pass cannot finish.
        if (e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed) lost = e.detail();
        return std::nullopt;
      }
      // A report for another probe than ours would be a peer's bug: no wave of it.
      if (report.context != context || report.wave != wave_id || !report.has_context) return std::nullopt;
      for (WorkerId next : report.known_workers) frontier.push_back(next);
      wave.emplace(worker, std::move(report));
    }
  }
  // A complete wave: every worker reached knows the context, and this node is among them.
  DAGSIM_ASSERT(wave.size() == asked.size() && wave.count(agent_.self()) == 1);
  return wave;
}

void DistEngine::fail_everywhere(ContextId context, Pass& pass, const Wave& wave, const std::string& reason) {
  DAGSIM_ASSERT(!reason.empty() && pass.initiator);
  agent_.env().log.event("dist_autograd.unfinishable", reason);
  for (const auto& [worker, report] : wave) {
    if (worker == agent_.self()) continue;
    try {
      // Fire and forget: a worker we cannot reach fails its pass by its own timeout.
      agent_.request_bytes(worker, rpc::MessageType::backward_abort_req,
                           rpc::to_bytes(AbortRequest{context, clip(reason, kMaxReason)}), std::nullopt,
                           "abort of context " + short_id(static_cast<uint64_t>(context)));
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);  // cancelled while it waited for room to send
      agent_.env().log.event("dist_autograd.abort_failed", e.detail());
    }
  }
  if (!pass.error) pass.error = std::make_exception_ptr(errors::autograd_error(reason));
  DAGSIM_ASSERT(pass.error != nullptr);
  pass.progress.notify_all();
}

}  // namespace dagsim::dist_autograd
