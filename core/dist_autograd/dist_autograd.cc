#include "core/dist_autograd/dist_autograd.h"

#include "core/autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/rpc/call_messages.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {

using rpc::Message;
using rpc::MessageType;

namespace {
constexpr const char* kAttach = "dagsim.autograd.attach";
}  // namespace

DistAutograd::DistAutograd(rpc::RpcAgent& agent, DistEngineOptions options)
    : agent_(agent), options_(options), container_(agent.self(), agent.env().incarnation),
      engine_(container_, agent, options), background_("dist_autograd", agent.env().spawner) {
  agent_.set_extension(this);
  // The originator's side of attach_to_originator: 1 and the caller is now one of the context's
  // workers, or 0: no such context here (released, or never).
  agent_.add_local_function(kAttach, [this](rpc::CallContext& call, const rpc::CallArgs& args) {
    const auto context = static_cast<ContextId>(args.id(kAttach, "context"));
    const bool known = container_.has_context(context);
    if (known) container_.retrieve_context(context).add_known_worker_id(call.caller);
    return std::vector<Tensor>{from_values({1}, {known ? 1.0 : 0.0})};
  });
}

void DistAutograd::attach_to_originator(ContextId context) {
  const WorkerId originator = worker_of(static_cast<uint64_t>(context));
  if (originator == agent_.self() || !container_.has_context(context)) return;
  rpc::CallArgs args;
  args.set_id("context", static_cast<uint64_t>(context));
  std::vector<Tensor> answer;
  try {
    answer = agent_.rpc_sync(originator, kAttach, args);
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    // Unreachable: find out whether the originator is gone (and with it, its contexts).
    on_peer_failed(originator, incarnation_of(static_cast<uint64_t>(context)), e.detail());
    return;
  }
  if (answer.at(0).item() != 0.0) return;
  agent_.env().log.event("dist_autograd.orphan_released", "context " + std::to_string(context) + ": its originator released it");
  if (container_.has_context(context)) abort_pass(context);
  if (auto workers = container_.release_context_if_present(context)) notify_release(context, *workers, originator);
}

void DistAutograd::note_foreign_context(ContextId context) {
  if (options_.attach_after.count() <= 0) return;
  unattached_.emplace_back(agent_.env().clock.now(), context);
  if (sweeping_) return;
  sweeping_ = true;
  agent_.env().spawner.spawn(background_, "dist_autograd.attach", [this] { sweep_foreign_contexts(); });
}

void DistAutograd::sweep_foreign_contexts() {
  // Runs in background_: the node's death or this object's destruction unwinds it from its waits
  // (the sleep, the attach call), so it never resumes on a destroyed object.
  runtime::Clock& clock = agent_.env().clock;
  while (!unattached_.empty()) {
    clock.sleep_until(unattached_.front().first + options_.attach_after);
    while (!unattached_.empty() && unattached_.front().first + options_.attach_after <= clock.now()) {
      const ContextId context = unattached_.front().second;
      unattached_.pop_front();
      attach_to_originator(context);  // nothing to do for one released meanwhile
    }
  }
  sweeping_ = false;
}

DistAutograd::Context::Context(DistAutograd& owner)
    : owner_(owner), id_(owner.container_.new_context().context_id()), scope_(id_) {}

DistAutograd::Context::~Context() {
  if (owner_.container_.has_context(id_)) owner_.release_context(id_);
}

void DistAutograd::backward(ContextId context, const autograd::variable_list& roots, bool retain_graph) {
  engine_.backward(context, roots, retain_graph);
}

std::vector<std::pair<Tensor, Tensor>> DistAutograd::get_gradients(ContextId context) {
  return container_.retrieve_context(context).gradients();
}

void DistAutograd::release_context(ContextId context) {
  abort_pass(context);
  const std::set<WorkerId> workers = container_.release_context(context);
  notify_release(context, workers, std::nullopt);
}

void DistAutograd::notify_release(ContextId context, const std::set<WorkerId>& workers, std::optional<WorkerId> except) {
  for (WorkerId worker : workers) {
    if (worker == except || worker == agent_.self()) continue;
    try {
      // Fire and forget, as PyTorch: a worker that cannot be reached has lost the context anyway.
      agent_.request(worker, make_cleanup_request(0, context), "release of context " + std::to_string(context));
    } catch (const Error& e) {
      agent_.env().log.event("dist_autograd.release_failed", e.detail());
    }
  }
}

void DistAutograd::abort_pass(ContextId context) {
  engine_.abort(context, errors::autograd_error("Error on Node " + std::to_string(agent_.self()) + ": autograd context " +
                                                std::to_string(context) + " was released during its backward pass"));
}

void DistAutograd::on_peer_failed(WorkerId peer, uint32_t incarnation, const std::string& reason) {
  if (peer == agent_.self() || !probing_.insert({peer, incarnation}).second) return;
  // In background_: an unwinding probe (node death, this object's destruction) leaves by the
  // rethrow and never touches `this` again; every other way out forgets the probe.
  agent_.env().spawner.spawn(background_, "dist_autograd.probe", [this, peer, incarnation, reason] {
    try {
      const std::vector<Tensor> answer = agent_.rpc_sync(peer, "dagsim.incarnation", {});
      if (static_cast<uint32_t>(answer.at(0).item()) != incarnation) {
        peer_gone(peer, incarnation, reason + " (it restarted)");
      }  // else a passing connection failure
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      peer_gone(peer, incarnation, reason);
    }
    probing_.erase({peer, incarnation});
  });
}

void DistAutograd::peer_gone(WorkerId peer, uint32_t incarnation, const std::string& reason) {
  const std::string who = "node " + std::to_string(peer);
  std::vector<ContextId> through_dead_peer;
  for (ContextId id : container_.context_ids()) {
    if (!container_.has_context(id)) continue;
    const bool originated = worker_of(static_cast<uint64_t>(id)) == peer && incarnation_of(static_cast<uint64_t>(id)) == incarnation;
    const bool involved = container_.retrieve_context(id).known_worker_ids().count(peer) != 0;
    if (!originated && !involved) continue;
    engine_.abort(id, errors::connection_failed("Error on Node " + std::to_string(agent_.self()) + ": " + who +
                                                (originated ? ", which started autograd context " : ", which takes part in autograd context ") +
                                                std::to_string(id) + ", failed: " + reason));
    if (originated) {
      // Nobody will release it now: do it here, and tell the others that know it.
      agent_.env().log.event("dist_autograd.orphan_released", "context " + std::to_string(id) + " of " + who);
      if (auto workers = container_.release_context_if_present(id)) notify_release(id, *workers, peer);
    } else {
      through_dead_peer.push_back(id);
    }
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
  if (!CallLabelScope::current().empty()) context.set_send_label(message, CallLabelScope::current());
  return wrap_with_autograd(MessageType::forward_autograd_req, call, {*current, message, agent_.self()});
}

Message DistAutograd::incoming_response(WorkerId from, Message response) {
  switch (response.type) {
    case MessageType::forward_autograd_resp: {
      WithAutograd unwrapped = unwrap_autograd(response);
      if (!container_.has_context(unwrapped.meta.context)) {
        return rpc::make_exception(response.request_id, from,
                                   errors::autograd_error("autograd context " + std::to_string(unwrapped.meta.context) +
                                                          " was released before the reply arrived"));
      }
      DistAutogradContext& context = container_.retrieve_context(unwrapped.meta.context);
      record_recv(context, from, unwrapped.meta.message, unwrapped.inner.tensors, unwrapped.requires_grad,
                  engine_.gradient_sender());
      return std::move(unwrapped.inner);
    }
    case MessageType::termination_probe_resp:
      engine_.deposit_report(from, read_probe_report(response));
      return rpc::make_ret(response.request_id, {});
    case MessageType::backward_autograd_resp:
    case MessageType::cleanup_autograd_context_resp:
    case MessageType::backward_abort_resp:
      return rpc::make_ret(response.request_id, {});
    default:
      throw errors::protocol_error(std::string("unexpected response type ") + rpc::message_type_name(response.type));
  }
}

Message DistAutograd::serve(WorkerId from, Message request, const std::function<Message(Message)>& run_call) {
  switch (request.type) {
    case MessageType::forward_autograd_req: {
      WithAutograd unwrapped = unwrap_autograd(request);
      const bool arrives = !container_.has_context(unwrapped.meta.context);
      const bool ours = worker_of(static_cast<uint64_t>(unwrapped.meta.context)) == agent_.self();
      if (arrives && ours) {
        // Only new_context() makes this node's contexts: a call in one it no longer has arrived
        // after its release (a late nested call). Recreating it would leak it.
        throw errors::autograd_error("Error on Node " + std::to_string(agent_.self()) + ": autograd context " +
                                     std::to_string(unwrapped.meta.context) + " was released before this call arrived");
      }
      DistAutogradContext& context = container_.get_or_create_context(unwrapped.meta.context);
      if (arrives) note_foreign_context(unwrapped.meta.context);
      record_recv(context, from, unwrapped.meta.message, unwrapped.inner.tensors, unwrapped.requires_grad,
                  engine_.gradient_sender());
      Message result;
      {
        // The function runs in the caller's context: nested RPCs it makes are recorded there.
        ContextScope scope(unwrapped.meta.context);
        result = run_call(std::move(unwrapped.inner));
      }
      // Results travel back recorded (a ret, or an RRef's value); a remote call's acknowledgement
      // carries nothing: its value stays on this node, in the context's graph.
      if ((result.type != MessageType::ret && result.type != MessageType::rref_fetch_ret) ||
          !container_.has_context(unwrapped.meta.context)) {
        return result;
      }
      DistAutogradContext& still = container_.retrieve_context(unwrapped.meta.context);
      const MessageId message = record_send(container_, still, from, result.tensors);
      return wrap_with_autograd(MessageType::forward_autograd_resp, result,
                                {unwrapped.meta.context, message, agent_.self()});
    }
    case MessageType::backward_autograd_req: {
      const uint64_t id = request.request_id;
      engine_.receive_gradients(from, read_backward_request(request));
      Message reply;
      reply.type = MessageType::backward_autograd_resp;
      reply.request_id = id;
      return reply;
    }
    case MessageType::cleanup_autograd_context_req: {
      const ContextId context = read_cleanup_request(request);
      if (container_.has_context(context)) abort_pass(context);
      if (auto workers = container_.release_context_if_present(context)) notify_release(context, *workers, from);
      Message reply;
      reply.type = MessageType::cleanup_autograd_context_resp;
      reply.request_id = request.request_id;
      return reply;
    }
    case MessageType::termination_probe_req: {
      const auto [context, wave] = read_probe_request(request);
      return make_probe_report(request.request_id, engine_.report(context, wave));
    }
    case MessageType::backward_abort_req: {
      const auto [context, reason] = read_abort_request(request);
      agent_.env().log.event("dist_autograd.aborted", "context " + std::to_string(context) + " by node " + std::to_string(from));
      engine_.abort(context, errors::autograd_error(reason));
      Message reply;
      reply.type = MessageType::backward_abort_resp;
      reply.request_id = request.request_id;
      return reply;
    }
    default:
      throw errors::protocol_error(std::string("no handler for request type ") + rpc::message_type_name(request.type));
  }
}

}  // namespace dagsim::dist_autograd
