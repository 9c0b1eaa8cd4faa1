// DistEngine: FAST-mode distributed backward on one node (PyTorch's DistEngine; see the seed
// design note and shared/reference/dist_autograd.md).
//
// A pass over context C on this node computes dependencies from its roots plus every send
// function of C, then runs the local engine's ready queue. A RecvRpcBackward it reaches sends its
// gradients to the peer's send function (BACKWARD_AUTOGRAD_REQ) and counts the RPC as outstanding.
// Gradients arriving for one of this node's send functions either start a pass here (the first
// request of C: it runs until done and only then is answered) or join the pass already running
// (answered at once). A pass is done when every send function of C has run and every gradient
// RPC it sent has been answered; leaf gradients accumulate into C, never into .grad.
//
// Beyond PyTorch: no pass waits forever. A failed gradient RPC (a peer's error, its death, a
// timeout) fails the pass with that error. When the initiating pass has been idle for the probe
// interval, it runs termination detection (termination.h): once waves prove that no worker can
// make progress, the pass fails on every worker with an error naming the send functions that never
// received gradients (an RPC whose result was unused: PyTorch's FAST mode hangs there). As the
// last safety net, a pass that makes no progress for the backward timeout fails, naming the same.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/autograd/graph_task.h"
#include "core/dist_autograd/autograd_messages.h"
#include "core/dist_autograd/container.h"
#include "core/dist_autograd/rpc_functions.h"
#include "core/dist_autograd/termination.h"
#include "core/rpc/rpc_agent.h"

namespace dagsim::dist_autograd {

// FAST: PyTorch's mode; every send function of the context must receive gradients, so an RPC
// whose result does not reach the roots fails the pass (naming it). SMART (PyTorch RFC #23110,
// never built there): a discovery first marks, across the workers, the send functions the roots
// reach; the pass runs only those, so unused RPC results neither block nor fail it.
enum class BackwardMode : uint8_t { fast, smart };

struct DistEngineOptions {
  runtime::Duration backward_timeout = std::chrono::seconds(60);
  // How long the initiating pass waits idle before termination detection's first wave (and
  // between waves that found work). Zero turns detection off (the timeout alone remains).
  runtime::Duration termination_probe_interval = std::chrono::milliseconds(100);
  // A context this node did not start, still here after this long, is attached to the node that
  // started it (which then counts this node among its workers), so its release reaches this node
  // even if the worker that brought it here died silently. Zero: never.
  runtime::Duration attach_after = std::chrono::seconds(2);
};

class DistEngine {
 public:
  DistEngine(DistAutogradContainer& container, rpc::RpcAgent& agent, DistEngineOptions options = {});

  // torch.distributed.autograd.backward(context_id, roots, retain_graph) on the initiating node.
  void backward(ContextId context, const autograd::variable_list& roots, bool retain_graph,
                BackwardMode mode = BackwardMode::fast);

  // SMART mode's discovery on this node (a kSmartMarkRequest): marks the send functions, then
  // what they reach, here and on the peers; returns when all of it is marked.
  void mark(const SmartMarkRequest& request);

  // Gradients for one of this node's send functions (a BACKWARD_AUTOGRAD_REQ); returns when the
  // request may be answered. Runs on an RPC handler fiber.
  void receive_gradients(WorkerId from, BackwardRequest request);

  // The GradientSender every RecvRpcBackward of this node uses.
  GradientSender gradient_sender();

  size_t passes_in_flight() const { return passes_.size(); }
  // No pass of `context` runs here, or the one that runs has failed (and unwinds at its next wait).
  bool failing_or_idle(ContextId context) const;

  // Fails the pass of `context` running on this node, if any, with `error` (its context was
  // released, or its originator died); the pass unwinds at its next wait.
  void abort(ContextId context, const Error& error);

  // Termination detection (termination.h): this node's report for one wave.
  ProbeReport report(ContextId context, uint64_t wave);

 private:
  struct Pass;
  // A pass over the context's send functions (SMART: only those discovery `smart_token` marked).
  std::shared_ptr<Pass> begin_pass(std::shared_ptr<DistAutogradContext> context, bool keep_graph,
                                   const std::vector<std::shared_ptr<autograd::Node>>& extra_roots, uint64_t smart_token);
  // SMART mode (smart_mode.cc): marks, for discovery `token`, every send function of any worker
  // that `start` reaches through recv functions, waiting for the peers' marks.
  void discover(DistAutogradContext& context, uint64_t token, std::vector<autograd::Node*> start);
  void run_pass(ContextId context, const std::shared_ptr<Pass>& pass);
  void send_gradients(WorkerId to, ContextId context, MessageId message, autograd::variable_list grads);
  // The initiator's detector fiber: waves until the pass ends, or fails it when they prove it
  // can never finish.
  void detect_termination(ContextId context, std::shared_ptr<Pass> pass);
  // One wave over the context's workers, collecting reports into `reached`; nullopt if a worker
  // lacks the context or did not answer (then `lost` says which and why, if it timed out or its
  // connection failed).
  std::optional<Wave> run_wave(ContextId context, uint64_t wave, Wave& reached, std::string& lost);
  // Fails the pass here with `reason`, and on every worker in `workers` by an abort message.
  void fail_everywhere(ContextId context, Pass& pass, const Wave& workers, const std::string& reason);

  DistAutogradContainer& container_;
  rpc::RpcAgent& agent_;
  DistEngineOptions options_;
  std::map<ContextId, std::shared_ptr<Pass>> passes_;
  uint64_t waves_ = 0;  // wave numbers, unique on this node
};

}  // namespace dagsim::dist_autograd
