// DistAutograd: distributed autograd on one node: its container, its engine, and the RPC
// extension that records send/recv functions on every RPC made inside a context (PyTorch's
// torch.distributed.autograd module, per node).
//
// Use (the PyTorch program, in C++):
//   DistAutograd::Context ctx(autograd);            // with dist_autograd.context() as ctx:
//   Tensor t3 = agent.rpc_sync(1, "add", {{t1, t2}})[0];
//   Tensor loss = sum(mul(t3, t4));
//   autograd.backward(ctx.id(), {loss});          //   dist_autograd.backward(ctx, [loss])
//   auto grads = autograd.get_gradients(ctx.id());  //   dist_autograd.get_gradients(ctx)
// Releasing a context (the guard's end) erases it here and asks every worker it exchanged
// autograd messages with to release it too; they pass the request on to theirs.
//
// On the agent, distributed autograd is two things: the extension that wraps calls made inside a
// context (forward_autograd_req/resp), and handlers for its own requests (backward passes, context
// cleanup, termination probes and aborts, incarnation probes, attaching a context), which sit
// beside any other service's handlers on the same node.
#pragma once

#include <deque>
#include <memory>

#include "core/dist_autograd/container.h"
#include "core/dist_autograd/dist_engine.h"
#include "core/rpc/rpc_agent.h"
#include "core/rpc/rpc_extension.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::dist_autograd {

struct DebugInfo {
  size_t num_autograd_contexts = 0;
  size_t num_current_backward_passes = 0;
};

class DistAutograd final : public rpc::RpcExtension {
 public:
  // Installs itself as `agent`'s extension; call before agent.start().
  DistAutograd(rpc::RpcAgent& agent, DistEngineOptions options = {});
  // Cancels background_: its fibers unwind at their next blocking point, never touching `this`.
  ~DistAutograd() override = default;

  // `with dist_autograd.context() as context_id`: a new current context, released at scope end.
  class Context {
   public:
    explicit Context(DistAutograd& owner);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ContextId id() const { return id_; }

   private:
    DistAutograd& owner_;
    ContextId id_;
    ContextScope scope_;
  };

  // mode: FAST (PyTorch's) or SMART (dist_engine.h, BackwardMode).
  void backward(ContextId context, const autograd::variable_list& roots, bool retain_graph = false,
                BackwardMode mode = BackwardMode::fast);
  std::vector<std::pair<Tensor, Tensor>> get_gradients(ContextId context);
  // RRef.backward(dist_autograd_ctx_id, retain_graph): on the owner, a backward with the RRef's
  // value as root (local autograd without a context, distributed with one); from a user, a
  // context is required and the owner runs it (RREF_BACKWARD_REQ), answering when it is done.
  // The value must be one tensor ("RRef should contain a tensor for .backward()").
  void rref_backward(const rpc::RRef& rref, std::optional<ContextId> context, bool retain_graph = false);
  // Erases the context (invalid_argument if unknown) and notifies its known workers.
  void release_context(ContextId context);
  DebugInfo debug_info() const;

  DistAutogradContainer& container() { return container_; }

  // RpcExtension
  rpc::Message outgoing_call(WorkerId to, rpc::Message call) override;
  rpc::Message incoming_response(WorkerId from, rpc::Message response) override;
  rpc::Message serve_call(WorkerId from, rpc::Message wrapped,
                          const std::function<rpc::Message(rpc::Message)>& run_call) override;
  // Beyond PyTorch (issue #26379): probes the peer; if that incarnation is gone (the probe fails,
  // or a later incarnation answers), contexts it originated are released here and passes that
  // depend on it fail naming it, instead of leaking or waiting for its gradients forever.
  void on_peer_failed(WorkerId peer, uint32_t incarnation, const std::string& reason) override;

 private:
  // The one tensor an RRef's value must be to be a backward's root.
  static Tensor rref_root(const std::vector<Tensor>& value);
  // The handlers of distributed autograd's requests (registered on the agent by the constructor).
  void add_handlers();
  // The preconditions every handler opens with.
  void check_serving(WorkerId from) const;
  // Beyond PyTorch: a backward request names its send function by the autograd message id that
  // the life which recorded it made (ids.h). One made by an earlier life of this node reached a
  // restart: that life and all it recorded died, so the pass fails as a connection failure naming
  // the death (as it would had the request left a moment earlier), not with PyTorch's "Could not
  // find ..." about state its sender could not know was gone.
  void refuse_earlier_life(ContextId context, MessageId message) const;
  // A pass still running on a released context fails instead of using it.
  void abort_pass(ContextId context);
  void notify_release(ContextId context, const std::set<WorkerId>& workers, std::optional<WorkerId> except);
  // One worker's release message, retried on failure (attempt counts the retries so far).
  void send_release(WorkerId worker, ContextId context, uint32_t attempt);

  void peer_gone(WorkerId peer, uint32_t incarnation, const std::string& reason);
  // Beyond PyTorch: a context that reached this node through another worker is released only if
  // that worker passes the release on. If it dies, this node asks the originator directly: one
  // that still has the context adds this node to its workers; one that does not means it is gone.
  void attach_to_originator(ContextId context);
  // A context from another worker arrived: attach it once it has lived attach_after.
  void note_foreign_context(ContextId context);
  void sweep_foreign_contexts();

  rpc::RpcAgent& agent_;
  DistEngineOptions options_;
  std::deque<std::pair<runtime::TimePoint, ContextId>> unattached_;  // foreign contexts, in arrival order
  bool sweeping_ = false;
  std::set<std::pair<WorkerId, uint32_t>> probing_;
  DistAutogradContainer container_;
  DistEngine engine_;
  // Expires with this object: a release reply that comes later (the agent fails what is pending
  // when it goes) finds it expired and touches nothing.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // The attach sweeper and the peer probes run here. Last, so it is destroyed (cancelled) first:
  // those fibers may outlive this object, and its cancellation unwinds them before they can
  // resume and use it (see cancel_scope.h).
  runtime::CancelScope background_;
};

}  // namespace dagsim::dist_autograd
