#include "core/dist_autograd/dist_autograd.h"

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/rpc/call_messages.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {

using rpc::Message;
using rpc::MessageType;

using rpc::Bytes;
using rpc::from_bytes;
using rpc::to_bytes;

DistAutograd::DistAutograd(rpc::RpcAgent& agent, DistEngineOptions options)
    : agent_(agent), options_(options), container_(agent.self(), agent.env().incarnation),
      engine_(container_, agent, options), background_("dist_autograd", agent.env().spawner) {
  DAGSIM_ASSERT_MSG(options.attach_after.count() >= 0, "attach_after cannot be negative");
  agent_.set_extension(this);
  add_handlers();
  DAGSIM_ASSERT(agent_.has_handler(rpc::MessageType::backward_autograd_req) && agent_.has_handler(kAttachRequest));
}

void DistAutograd::check_serving(WorkerId from) const {
  // A handler runs on a fiber of this node, whose container makes ids for this node, and only
  // once the agent runs (it is the agent's handler fiber).
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "a distributed autograd handler outside a node fiber");
  DAGSIM_ASSERT_EQ(container_.worker_id(), agent_.self());
  DAGSIM_ASSERT_MSG(agent_.env().incarnation <= UINT16_MAX, "ids carry 16 bits of incarnation");
  (void)from;
}

void DistAutograd::add_handlers() {
  using rpc::MessageType;
  agent_.add_handler(MessageType::backward_autograd_req, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    BackwardRequest request = from_bytes<BackwardRequest>(payload);
    refuse_earlier_life(request.context, request.message);
    // Answered when this node's pass is done (or at once, when it joins a running pass).
    engine_.receive_gradients(from, std::move(request));
    return Bytes{};
  });
  agent_.add_handler(MessageType::rref_backward_req, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    const RRefBackwardRequest request = from_bytes<RRefBackwardRequest>(payload);
    engine_.backward(request.context, {rref_root(agent_.owned_value(request.rref))}, request.retain_graph);
    return Bytes{};
  });
  agent_.add_handler(kSmartMarkRequest, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    engine_.mark(from_bytes<SmartMarkRequest>(payload));  // answered once all it led to is marked
    return Bytes{};
  });
  agent_.add_handler(MessageType::cleanup_autograd_context_req, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    const ContextId context = from_bytes<CleanupRequest>(payload).context;
    if (container_.has_context(context)) abort_pass(context);
    if (auto workers = container_.release_context_if_present(context)) {
      notify_release(context, *workers, from);
    } else {
      // Released here already (by another worker's cleanup, a dead originator, an attach), or a
      // retry whose first answer was lost: cleanup is idempotent.
      DAGSIM_PROBE("dist_autograd.cleanup_of_unknown_context");
    }
    DAGSIM_ASSERT(!container_.has_context(context));
    return Bytes{};
  });
  agent_.add_handler(MessageType::termination_probe_req, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    const ProbeRequest probe = from_bytes<ProbeRequest>(payload);
    ProbeReport report = engine_.report(probe.context, probe.wave);
    // Paired with run_wave's checks on the prober's side: the report answers this probe.
    DAGSIM_ASSERT(report.context == probe.context && report.wave == probe.wave);
    return to_bytes(report);
  });
  agent_.add_handler(MessageType::backward_abort_req, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    const AbortRequest abort = from_bytes<AbortRequest>(payload);
    DAGSIM_PROBE("dist_autograd.pass_aborted_by_initiator");
    agent_.env().log.event("dist_autograd.aborted", "context " + std::to_string(abort.context) + " by node " + std::to_string(from));
    engine_.abort(abort.context, errors::autograd_error(abort.reason));
    DAGSIM_ASSERT(engine_.failing_or_idle(abort.context));  // a running pass unwinds at its next wait
    return Bytes{};
  });
  agent_.add_handler(kIncarnationRequest, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    if (!payload.empty()) throw errors::protocol_error("incarnation_req: carries no payload");
    return to_bytes(IncarnationReply{agent_.env().incarnation});
  });
  // The originator's side of attach_to_originator: known, and the caller is now one of the
  // context's workers; or not known: no such context here (released, or never).
  agent_.add_handler(kAttachRequest, [this](WorkerId from, const Bytes& payload) {
    check_serving(from);
    const ContextId context = from_bytes<AttachRequest>(payload).context;
    const bool known = container_.has_context(context);
    if (known) container_.retrieve_context(context).add_known_worker_id(from);
    DAGSIM_ASSERT(!known || container_.retrieve_context(context).known_worker_ids().count(from) == 1);
    return to_bytes(AttachReply{known});
  });
}

void DistAutograd::attach_to_originator(ContextId context) {
  const WorkerId originator = worker_of(static_cast<uint64_t>(context));
  if (originator == agent_.self() || !container_.has_context(context)) return;
  DAGSIM_ASSERT(runtime::current_fiber() != nullptr);  // it blocks on the originator's answer
  AttachReply answer;
  try {
    answer = from_bytes<AttachReply>(agent_.request_bytes(originator, kAttachRequest, to_bytes(AttachRequest{context}),
                                                          std::nullopt, "attach of context " + short_id(static_cast<uint64_t>(context)))
                                         .get());
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    // Unreachable: find out whether the originator is gone (and with it, its contexts).
    DAGSIM_PROBE("dist_autograd.attach_originator_unreachable");
    on_peer_failed(originator, incarnation_of(static_cast<uint64_t>(context)), e.detail());
    return;
  }
  if (answer.known) return;
  DAGSIM_PROBE("dist_autograd.orphan_released_on_attach");
  agent_.env().log.event("dist_autograd.orphan_released", "context " + std::to_string(context) + ": its originator released it");
  if (container_.has_context(context)) abort_pass(context);
  if (auto workers = container_.release_context_if_present(context)) notify_release(context, *workers, originator);
  DAGSIM_ASSERT(!container_.has_context(context));  // the originator released it: so do we
}

void DistAutograd::note_foreign_context(ContextId context) {
  if (options_.attach_after.count() <= 0) return;
  // Only contexts another worker started are attached (serve_call refuses our own released ones).
  DAGSIM_ASSERT(worker_of(static_cast<uint64_t>(context)) != agent_.self());
  DAGSIM_ASSERT(unattached_.empty() || unattached_.back().first <= agent_.env().clock.now());  // arrival order
  unattached_.emplace_back(agent_.env().clock.now(), context);
  if (sweeping_) return;
  sweeping_ = true;
  agent_.env().spawner.spawn(background_, "dist_autograd.attach", [this] { sweep_foreign_contexts(); });
}

void DistAutograd::sweep_foreign_contexts() {
  // Runs in background_: the node's death or this object's destruction unwinds it from its waits
  // (the sleep, the attach call), so it never resumes on a destroyed object.
  runtime::Clock& clock = agent_.env().clock;
  DAGSIM_ASSERT(sweeping_);  // one sweeper at a time
  while (!unattached_.empty()) {
    clock.sleep_until(unattached_.front().first + options_.attach_after);
    while (!unattached_.empty() && unattached_.front().first + options_.attach_after <= clock.now()) {
      const ContextId context = unattached_.front().second;
      unattached_.pop_front();
      attach_to_originator(context);  // nothing to do for one released meanwhile
    }
  }
  DAGSIM_ASSERT(unattached_.empty());  // a new arrival starts a new sweeper only once this one ends
  sweeping_ = false;
}

DistAutograd::Context::Context(DistAutograd& owner)
    : owner_(owner), id_(owner.container_.new_context().context_id()), scope_(id_) {
  DAGSIM_ASSERT(DistAutogradContainer::current_context_id() == id_);
}

DistAutograd::Context::~Context() {
  if (!owner_.container_.has_context(id_)) return;
  // A destructor must not throw: a release that waits for room on a full link (Note [room to
  // send]) unwinds when its fiber is cancelled or its node dies, and that exception leaving here
  // would terminate the process (found by DAGSIM_BUGGIFY("rpc.send_queue_full")). The context is
  // released here regardless; a worker not told yet releases it itself (attach_to_originator) or
  // died with it, as after any release that never got through. The caller's next wait unwinds.
  try {
    owner_.release_context(id_);
  } catch (const Error& e) {
    DAGSIM_ASSERT_MSG(runtime::is_unwinding(e), "a context's release throws only when its fiber unwinds: " + e.detail());
    DAGSIM_PROBE("dist_autograd.release_cut_short_by_unwinding");
    owner_.container_.release_context_if_present(id_);
  }
  DAGSIM_ASSERT(!owner_.container_.has_context(id_));
}

void DistAutograd::backward(ContextId context, const autograd::variable_list& roots, bool retain_graph, BackwardMode mode) {
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "a distributed backward blocks: run it on a node fiber");
  engine_.backward(context, roots, retain_graph, mode);
}

std::vector<std::pair<Tensor, Tensor>> DistAutograd::get_gradients(ContextId context) {
  return container_.retrieve_context(context).gradients();
}

Tensor DistAutograd::rref_root(const std::vector<Tensor>& value) {
  if (value.size() != 1) {
    throw errors::invalid_argument("RRef should contain a tensor for .backward() (it holds " + std::to_string(value.size()) +
                                   " tensors)");
  }
  return value[0];
}

void DistAutograd::rref_backward(const rpc::RRef& rref, std::optional<ContextId> context, bool retain_graph) {
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "RRef.backward blocks: run it on a node fiber");
  if (rref.is_owner()) {
    const Tensor root = rref_root(agent_.owned_value(rref.id()));
    if (!context) return autograd::Engine::backward({root}, {}, retain_graph);
    return engine_.backward(*context, {root}, retain_graph);
  }
  if (!context) throw errors::invalid_argument("User RRefs require 'dist_autograd_ctx_id' to be specified");
  agent_.request_bytes(rref.owner(), rpc::MessageType::rref_backward_req,
                       to_bytes(RRefBackwardRequest{rref.id(), *context, retain_graph}), std::nullopt,
                       "RRef backward of context " + short_id(static_cast<uint64_t>(*context)))
      .get();
}

void DistAutograd::release_context(ContextId context) {
  abort_pass(context);
  const std::set<WorkerId> workers = container_.release_context(context);
  DAGSIM_ASSERT(!container_.has_context(context));
  notify_release(context, workers, std::nullopt);
}

void DistAutograd::notify_release(ContextId context, const std::set<WorkerId>& workers, std::optional<WorkerId> except) {
  // Released here first: a worker that asks back (attach) must find it gone.
  DAGSIM_ASSERT(!container_.has_context(context));
  for (WorkerId worker : workers) {
    if (worker == except || worker == agent_.self()) continue;
    send_release(worker, context, 0);
  }
}

void DistAutograd::send_release(WorkerId worker, ContextId context, uint32_t attempt) {
  // Not waited for, as PyTorch's; a failed send is retried with backoff (PyTorch's sendWithRetries,
  // 20 retries), so a message lost on the way (a faulty agent, a connection that failed and came
  // back) does not leave the context on the peer. One that never gets through: the peer releases
  // it itself (attach_to_originator), or died with it.
  runtime::Future<Bytes> reply;
  try {
    reply = agent_.request_bytes(worker, rpc::MessageType::cleanup_autograd_context_req, to_bytes(CleanupRequest{context}),
                                 std::nullopt, "release of context " + short_id(static_cast<uint64_t>(context)));
  } catch (const Error& e) {
    // A request may wait for room on its link (Note [room to send]): a fiber cancelled there
    // unwinds, never touching `this` again.
    runtime::rethrow_if_unwinding(e);
    DAGSIM_PROBE("dist_autograd.release_not_sent");
    agent_.env().log.event("dist_autograd.release_failed", e.detail());
    return;
  }
  reply.then([this, alive = std::weak_ptr<int>(alive_), worker, context, attempt](runtime::Future<Bytes> done) {
    if (!done.has_error() || alive.expired()) return;
    if (attempt >= rpc::kSendRetries) {
      DAGSIM_PROBE("dist_autograd.release_gave_up");
      agent_.env().log.event("dist_autograd.release_failed", "context " + std::to_string(context) + " on node " +
                                                                 std::to_string(worker) + ": gave up after retries");
      return;
    }
    DAGSIM_PROBE("dist_autograd.release_retried");
    const runtime::Duration backoff = rpc::retry_backoff(attempt);
    agent_.env().spawner.spawn(background_, "dist_autograd.release_retry", [this, worker, context, attempt, backoff] {
      agent_.env().clock.sleep(backoff);
      send_release(worker, context, attempt + 1);
    });
  });
}

void DistAutograd::abort_pass(ContextId context) {
  engine_.abort(context, errors::autograd_error("Error on Node " + std::to_string(agent_.self()) + ": autograd context " +
                                                short_id(static_cast<uint64_t>(context)) + " was released during its backward pass"));
  DAGSIM_ASSERT(engine_.failing_or_idle(context));
}

void DistAutograd::refuse_earlier_life(ContextId context, MessageId message) const {
  const auto id = static_cast<uint64_t>(message);
  const uint32_t life = agent_.env().incarnation;
  // Another worker's id, or one of a life not yet begun, is no send function of ours: the
  // context's own lookup refuses it as PyTorch does.
  if (worker_of(id) != agent_.self() || incarnation_of(id) >= life) return;
  throw errors::connection_failed("Error on Node " + std::to_string(agent_.self()) + ": backward pass of context " +
                                  short_id(static_cast<uint64_t>(context)) + " reached " + agent_.env().peer_name(agent_.self()) +
                                  " in life " + std::to_string(life + 1) + ", but its send function " + short_id(id) +
                                  " was recorded by life " + std::to_string(incarnation_of(id) + 1) + ", which died");
}

void DistAutograd::on_peer_failed(WorkerId peer, uint32_t incarnation, const std::string& reason) {
  DAGSIM_ASSERT(incarnation <= UINT16_MAX);
  if (peer == agent_.self() || !probing_.insert({peer, incarnation}).second) return;
  // In background_: an unwinding probe (node death, this object's destruction) leaves by the
  // rethrow and never touches `this` again; every other way out forgets the probe.
  agent_.env().spawner.spawn(background_, "dist_autograd.probe", [this, peer, incarnation, reason] {
    try {
      const IncarnationReply answer =
          from_bytes<IncarnationReply>(agent_.request_bytes(peer, kIncarnationRequest, {}, std::nullopt, "incarnation probe").get());
      if (answer.incarnation != incarnation) {
        DAGSIM_PROBE("dist_autograd.peer_restarted_found_by_probe");
        peer_gone(peer, incarnation, reason + " (it restarted)");
      } else {
        DAGSIM_PROBE("dist_autograd.peer_failure_was_passing");
      }
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      DAGSIM_PROBE("dist_autograd.peer_unreachable_declared_gone");
      peer_gone(peer, incarnation, reason);
    }
    DAGSIM_ASSERT(probing_.count({peer, incarnation}) == 1);  // paired with on_peer_failed's insert
    probing_.erase({peer, incarnation});
  });
}

void DistAutograd::peer_gone(WorkerId peer, uint32_t incarnation, const std::string& reason) {
  DAGSIM_ASSERT(peer != agent_.self());  // on_peer_failed never probes this node
  const std::string who = agent_.env().peer_name(peer);
  std::vector<ContextId> through_dead_peer;
  for (ContextId id : container_.context_ids()) {
    if (!container_.has_context(id)) continue;
    const bool originated = worker_of(static_cast<uint64_t>(id)) == peer && incarnation_of(static_cast<uint64_t>(id)) == incarnation;
    const bool involved = container_.retrieve_context(id).known_worker_ids().count(peer) != 0;
    if (!originated && !involved) continue;
    engine_.abort(id, errors::connection_failed("Error on Node " + std::to_string(agent_.self()) + ": " + who +
                                                (originated ? ", which started autograd context " : ", which takes part in autograd context ") +
                                                short_id(static_cast<uint64_t>(id)) + ", failed: " + reason));
    if (originated) {
      // Nobody will release it now: do it here, and tell the others that know it.
      DAGSIM_PROBE("dist_autograd.context_released_by_dead_originator");
      agent_.env().log.event("dist_autograd.orphan_released", "context " + std::to_string(id) + " of " + who);
      if (auto workers = container_.release_context_if_present(id)) notify_release(id, *workers, peer);
      DAGSIM_ASSERT(!container_.has_context(id));
    } else {
      DAGSIM_PROBE("dist_autograd.pass_aborted_by_dead_participant");
      through_dead_peer.push_back(id);
    }
  }
  // Negative space: nothing this node holds was started by the dead incarnation.
  for (ContextId id : container_.contexts_created_by(peer)) {
    DAGSIM_ASSERT(incarnation_of(static_cast<uint64_t>(id)) != incarnation);
  }
  // The dead peer may have been our only link to their originator: attach to it directly.
  for (ContextId id : through_dead_peer) attach_to_originator(id);
}

DebugInfo DistAutograd::debug_info() const {
  return {container_.num_contexts(), engine_.passes_in_flight()};
}

Message DistAutograd::outgoing_call(WorkerId to, Message call) {
  const std::optional<ContextId> current = DistAutogradContainer::current_context_id();
  // Outside a context, or with nothing to differentiate, the call goes out plain (PyTorch's
  // builtin-op rule).
  const bool forced = (call.flags & rpc::kForceAutograd) != 0;
  if (!current || !autograd::GradMode::is_enabled() || (!forced && !autograd::any_requires_grad(call.tensors))) return call;
  DistAutogradContext& context = container_.retrieve_context(*current);
  const MessageId message = record_send(container_, context, to, call.tensors);
  // Paired with serve_call and incoming_response: message ids are this node's, never reused.
  DAGSIM_ASSERT(worker_of(static_cast<uint64_t>(message)) == agent_.self());
  DAGSIM_ASSERT(context.known_worker_ids().count(to) == 1);
  if (!CallLabelScope::current().empty()) context.set_send_label(message, CallLabelScope::current());
  return wrap_with_autograd(MessageType::forward_autograd_req, call, {*current, message, agent_.self()});
}

Message DistAutograd::incoming_response(WorkerId from, Message response) {
  DAGSIM_ASSERT_MSG(response.type == MessageType::forward_autograd_resp, "the agent unwraps only autograd responses here");
  WithAutograd unwrapped = unwrap_autograd(response);
  if (!container_.has_context(unwrapped.meta.context)) {
    DAGSIM_PROBE("dist_autograd.reply_after_context_released");
    return rpc::make_exception(response.request_id, from,
                               errors::autograd_error("autograd context " + short_id(static_cast<uint64_t>(unwrapped.meta.context)) +
                                                      " was released before the reply arrived"));
  }
  DistAutogradContext& context = container_.retrieve_context(unwrapped.meta.context);
  record_recv(context, from, unwrapped.meta.message, unwrapped.inner.tensors, unwrapped.requires_grad,
              engine_.gradient_sender());
  DAGSIM_ASSERT(unwrapped.inner.request_id == response.request_id && !rpc::is_request(unwrapped.inner.type));
  return std::move(unwrapped.inner);
}

Message DistAutograd::serve_call(WorkerId from, Message wrapped, const std::function<Message(Message)>& run_call) {
  check_serving(from);
  DAGSIM_ASSERT_MSG(wrapped.type == MessageType::forward_autograd_req, "serve_call serves wrapped calls only");
  WithAutograd unwrapped = unwrap_autograd(wrapped);
  const bool arrives = !container_.has_context(unwrapped.meta.context);
  const bool ours = worker_of(static_cast<uint64_t>(unwrapped.meta.context)) == agent_.self();
  if (arrives && ours) {
    // Only new_context() makes this node's contexts: a call in one it no longer has arrived
    // after its release (a late nested call). Recreating it would leak it.
    DAGSIM_PROBE("dist_autograd.call_after_own_context_released");
    throw errors::autograd_error("Error on Node " + std::to_string(agent_.self()) + ": autograd context " +
                                 short_id(static_cast<uint64_t>(unwrapped.meta.context)) + " was released before this call arrived");
  }
  DistAutogradContext& context = container_.get_or_create_context(unwrapped.meta.context);
  DAGSIM_ASSERT(container_.has_context(unwrapped.meta.context) && context.context_id() == unwrapped.meta.context);
  if (arrives) note_foreign_context(unwrapped.meta.context);
  record_recv(context, from, unwrapped.meta.message, unwrapped.inner.tensors, unwrapped.requires_grad,
              engine_.gradient_sender());
  const uint64_t request_id = unwrapped.inner.request_id;
  Message result;
  {
    // The function runs in the caller's context: nested RPCs it makes are recorded there.
    ContextScope scope(unwrapped.meta.context);
    result = run_call(std::move(unwrapped.inner));
  }
  DAGSIM_ASSERT(result.request_id == request_id && !rpc::is_request(result.type));
  // Results travel back recorded (a ret, or an RRef's value); a remote call's acknowledgement
  // carries nothing: its value stays on this node, in the context's graph.
  if (result.type != MessageType::ret && result.type != MessageType::rref_fetch_ret) return result;
  if (!container_.has_context(unwrapped.meta.context)) {
    DAGSIM_PROBE("dist_autograd.context_released_during_call");
    return result;
  }
  DistAutogradContext& still = container_.retrieve_context(unwrapped.meta.context);
  const MessageId message = record_send(container_, still, from, result.tensors);
  return wrap_with_autograd(MessageType::forward_autograd_resp, result, {unwrapped.meta.context, message, agent_.self()});
}

}  // namespace dagsim::dist_autograd
