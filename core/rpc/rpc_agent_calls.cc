// RpcAgent, the caller's side (rpc_agent.h): sending calls and handler requests, the pending
// calls they leave, and how each ends: with its response (finish), its error or a failed
// connection (fail, fail_calls_to), or its timeout, which the reaper fiber applies after the
// clock's timer only woke it (timer callbacks run outside the node's fibers).
#include <algorithm>
#include <mutex>

#include "core/base/buggify.h"
#include "core/base/probe.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/rpc_agent.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/fiber_context.h"

namespace dagsim::rpc {

// How long a call waits for room when DAGSIM_BUGGIFY("rpc.send_queue_full") fires.
constexpr runtime::Duration kBuggifyRoomWait = std::chrono::milliseconds(20);

void RpcAgent::reap_timeouts(std::shared_ptr<Timeouts> timeouts) {
  for (;;) {
    uint64_t id = 0;
    {
      runtime::FiberLock lock(timeouts->mutex);
      runtime::block_until(
          timeouts->wake, lock, [&] { return timeouts->stopped || !timeouts->expired.empty(); }, std::nullopt,
          "RpcAgent timeouts");
      // Stopped first: the agent may be gone (only `timeouts` is ours then).
      if (timeouts->stopped) return;
      id = timeouts->expired.front();
      timeouts->expired.pop_front();
    }
    auto it = pending_.find(id);
    if (it == pending_.end()) {
      DAGSIM_PROBE("rpc.timeout_after_call_ended");
      continue;  // it ended between the timer and now
    }
    const Pending& pending = it->second;
    // Its deadline passed on this node's clock (the timer fired at or after it).
    DAGSIM_ASSERT(pending.limit.count() > 0);
    DAGSIM_PROBE("rpc.timeout_fired");
    fail(id, std::make_exception_ptr(errors::timed_out(pending.what + " to " + env_.peer_name(pending.to) +
                                                       " timed out after " +
                                                       std::to_string(pending.limit.count() / 1000000) + " ms")));
    DAGSIM_ASSERT(pending_.count(id) == 0);
  }
}

void RpcAgent::stop_reaper() {
  runtime::FiberLock lock(timeouts_->mutex);
  timeouts_->stopped = true;
  timeouts_->wake.notify_all();
}

bool RpcAgent::forces_autograd(const std::string& function, const CallArgs& args) const {
  // PyTorch's forceGradRecording: a builtin op is recorded only when a tensor argument requires
  // grad; a user function always is, since it may return tensors that require grad or make
  // nested calls (test_worker_ids_recorded, test_grad_only_on_return_value). RRef arguments are
  // values on the callee that may require grad.
  return !args.rrefs.empty() || !registry_.is_builtin(function);
}

Future<std::vector<Tensor>> RpcAgent::rpc_async(WorkerId to, const std::string& function, CallArgs args,
                                                std::optional<Duration> timeout) {
  return send_call(to, MessageType::call, 0, function, args, "rpc '" + function + "'", timeout);
}

Future<std::vector<Tensor>> RpcAgent::send_call(WorkerId to, MessageType type, uint64_t rref_id, const std::string& function,
                                                const CallArgs& args, const std::string& what,
                                                std::optional<Duration> timeout) {
  std::vector<RRefForkData> forks;
  std::vector<uint64_t> children;
  for (const RRef& rref : args.rrefs) {
    forks.push_back(fork(rref, to));
    children.push_back(forks.back().fork_id);
  }
  Message call = type == MessageType::call ? make_call(0, function, args, std::move(forks))
                                           : make_remote_call(0, rref_id, function, args, std::move(forks));
  if (forces_autograd(function, args)) call.flags |= kForceAutograd;
  DAGSIM_ASSERT(call.type == type && call.tensors.size() == args.tensors.size());
  try {
    return send_request(to, std::move(call), what, timeout, children);
  } catch (...) {
    end_children(children);  // never sent: nothing will accept them
    throw;
  }
}

Future<std::vector<Tensor>> RpcAgent::send_request(WorkerId to, Message message, const std::string& what,
                                                   std::optional<Duration> timeout, std::vector<uint64_t> children) {
  DAGSIM_ASSERT_MSG(message.type == MessageType::call || message.type == MessageType::remote_call ||
                        message.type == MessageType::rref_fetch_call,
                    "send_request sends calls, remote calls and RRef fetches");
  // The response answers the call, whether or not the extension wraps it.
  const MessageType expects = response_type_of(message.type);
  if (extension_ != nullptr) message = extension_->outgoing_call(to, std::move(message));
  Pending pending{to, what, expects, TensorPromise{}, timeout.value_or(options_.default_timeout)};
  pending.children = std::move(children);
  Future<std::vector<Tensor>> future = std::get<TensorPromise>(pending.promise).get_future();
  start_request(to, message, expects, std::move(pending));
  return future;
}

RRef RpcAgent::remote(WorkerId to, const std::string& function, CallArgs args) {
  const uint64_t id = rref_ids_.next();
  DAGSIM_ASSERT(worker_of(id) == env_.self);  // owners tell RRefs apart by their creator's id
  // The acknowledgement only says the owner has the call; its outcome waits in the RRef.
  send_call(to, MessageType::remote_call, id, function, args, "remote '" + function + "'", std::nullopt);
  // The creator's fork is the RRef id itself: the owner counts it when the remote call runs.
  return RRef(*this, to, id, id);
}

Future<std::vector<Tensor>> RpcAgent::request(WorkerId to, Message message, const std::string& what,
                                              std::optional<Duration> timeout) {
  DAGSIM_ASSERT_MSG(message.type == MessageType::rref_user_delete || message.type == MessageType::rref_fork_request ||
                        message.type == MessageType::rref_child_accept,
                    "request sends what no handler or call covers");
  const MessageType expects = response_type_of(message.type);
  Pending pending{to, what, expects, TensorPromise{}, timeout.value_or(options_.default_timeout)};
  Future<std::vector<Tensor>> future = std::get<TensorPromise>(pending.promise).get_future();
  start_request(to, message, expects, std::move(pending));
  return future;
}

Future<Bytes> RpcAgent::request_bytes(WorkerId to, MessageType type, Bytes payload, std::optional<Duration> timeout,
                                      std::string what) {
  DAGSIM_ASSERT_MSG(is_request(type) && type != MessageType::call && type != MessageType::remote_call &&
                        type != MessageType::rref_fetch_call && type != MessageType::forward_autograd_req,
                    "request_bytes sends handler requests, not calls");
  Message message;
  message.type = type;
  message.payload = std::move(payload);
  const MessageType expects = response_type_of(type);
  if (what.empty()) what = std::string(message_type_name(type)) + " request";
  Pending pending{to, std::move(what), expects, BytesPromise{}, timeout.value_or(options_.default_timeout)};
  Future<Bytes> future = std::get<BytesPromise>(pending.promise).get_future();
  start_request(to, message, expects, std::move(pending));
  return future;
}

void RpcAgent::start_request(WorkerId to, Message& message, MessageType expects, Pending pending) {
  if (!started_ || stopping_) {
    throw errors::invalid_argument(pending.what + " to " + env_.peer_name(to) + ": the RPC agent of " +
                                   env_.peer_name(env_.self) + (stopping_ ? " is shut down" : " is not started"));
  }
  DAGSIM_ASSERT_MSG(is_request(message.type), "RpcAgent sends requests only");
  DAGSIM_ASSERT(!is_request(expects) && expects != MessageType::exception);
  DAGSIM_ASSERT_MSG(pending.limit.count() > 0, "an RPC timeout must be positive");
  const std::optional<uint64_t> next_id = request_ids_.next();
  if (!next_id) {
    throw errors::invalid_argument(pending.what + " to " + env_.peer_name(to) + ": " + env_.peer_name(env_.self) +
                                   " has sent 2^48 - 1 requests in this life, all its request ids; restart it");
  }
  const uint64_t id = *next_id;
  // Paired with on_response: replies are matched only to ids this life of the node handed out.
  DAGSIM_ASSERT(pending_.count(id) == 0);
  message.request_id = id;
  // The timer only wakes the reaper (Timeouts): it runs outside the node's fibers.
  pending.timer = env_.clock.call_at(env_.clock.now() + pending.limit, [timeouts = timeouts_, id] {
    std::lock_guard<runtime::FiberMutex> lock(timeouts->mutex);
    timeouts->expired.push_back(id);
    timeouts->wake.notify_all();
  });
  const runtime::TimePoint deadline = env_.clock.now() + pending.limit;
  pending_.emplace(id, std::move(pending));
  try {
    if (injected_fault(to, id, message)) return;
    // Room on the link first (Note [room to send] in transport.h), within the call's own timeout:
    // a call that timed out while it waited is not sent at all.
    bool room = to == env_.self || env_.transport.wait_for_room(to, deadline);
    if (room && to != env_.self && runtime::current_fiber() != nullptr && DAGSIM_BUGGIFY("rpc.send_queue_full")) {
      // As if this node's queue to `to` were tiny (a TCP transport's bound, Note [room to send]):
      // the call waits for room a while, within its own deadline, then goes or times out. A wait
      // cut short by the caller's cancellation or its node's death unwinds, as the transport's own
      // wait_for_room does (callers in destructors catch it: DistAutograd::Context).
      env_.clock.sleep_until(std::min(deadline, env_.clock.now() + kBuggifyRoomWait));
      room = env_.clock.now() < deadline;
    }
    // Its deadline passed while it waited (its timer may not have failed it yet), or it did.
    if ((!room && env_.clock.now() >= deadline) || pending_.count(id) == 0) {
      DAGSIM_PROBE("rpc.call_timed_out_waiting_for_room");
      return;
    }
    send(to, message);
  } catch (const Error& e) {
    fail(id, std::current_exception());
    runtime::rethrow_if_unwinding(e);
  } catch (...) {
    fail(id, std::current_exception());
  }
}

bool RpcAgent::injected_fault(WorkerId to, uint64_t id, const Message& message) {
  for (MessageFault& fault : options_.message_faults) {
    if (fault.type != message.type || fault.count == 0) continue;
    --fault.count;
    if (!fault.delay) {
      DAGSIM_PROBE("rpc.injected_message_failure");
      fail(id, std::make_exception_ptr(errors::connection_failed(
                   std::string("faulty agent of node ") + std::to_string(env_.self) + ": a " + message_type_name(message.type) +
                   " to " + env_.peer_name(to) + " failed as the scenario asks (" + std::to_string(fault.count) +
                   " more to fail)")));
      return true;
    }
    // Late, on a fiber of its own; the request's timer runs from now, as the caller's wait does.
    env_.spawner.spawn("rpc.delayed", [this, to, id, message, delay = *fault.delay] {
      env_.clock.sleep(delay);
      // Not once the request has ended (timed out, say): a late copy would act on its own.
      if (!stopping_ && pending_.count(id) != 0) {
        send(to, message);
      } else {
        DAGSIM_PROBE("rpc.delayed_request_dropped_after_end");
      }
    });
    return true;
  }
  return false;
}

std::vector<Tensor> RpcAgent::rpc_sync(WorkerId to, const std::string& function, CallArgs args,
                                       std::optional<Duration> timeout) {
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "rpc_sync blocks: call it on a node fiber");
  return rpc_async(to, function, std::move(args), timeout).get();
}

bool RpcAgent::finish(uint64_t request_id, WorkerId from, Message response) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) {
    DAGSIM_PROBE("rpc.late_reply_after_call_ended");
    return false;  // timed out or failed already: a late reply
  }
  const Pending& pending = it->second;
  if (response.type != pending.expects || from != pending.to) {
    return fail(request_id, std::make_exception_ptr(errors::protocol_error(
                                pending.what + " to " + env_.peer_name(pending.to) + ": a " +
                                message_type_name(response.type) + " from node " + std::to_string(from) +
                                " cannot answer it (expected a " + message_type_name(pending.expects) + ")")));
  }
  if (std::holds_alternative<BytesPromise>(pending.promise) && !response.tensors.empty()) {
    return fail(request_id, std::make_exception_ptr(errors::protocol_error(
                                pending.what + ": a handler's reply from node " + std::to_string(from) + " carries tensors")));
  }
  // Promises complete on the node's fibers only: a continuation (Future::then) spawns its fiber
  // from here, and the simulator's driver must never do that.
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "RpcAgent: a call completed outside a node fiber");
  Pending done = std::move(it->second);
  pending_.erase(it);
  env_.clock.cancel(done.timer);
  end_children(done.children);
  if (auto* tensors = std::get_if<TensorPromise>(&done.promise)) {
    tensors->set_value(std::move(response.tensors));
  } else {
    std::get<BytesPromise>(done.promise).set_value(std::move(response.payload));
  }
  DAGSIM_ASSERT(pending_.count(request_id) == 0);  // a call ends once: a late reply finds nothing
  notify_drained();
  return true;
}

bool RpcAgent::fail(uint64_t request_id, std::exception_ptr error) {
  DAGSIM_ASSERT(error != nullptr);
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return false;
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "RpcAgent: a call failed outside a node fiber");
  Pending done = std::move(it->second);
  pending_.erase(it);
  env_.clock.cancel(done.timer);
  end_children(done.children);
  std::visit([&](auto& promise) { promise.set_exception(error); }, done.promise);
  DAGSIM_ASSERT(pending_.count(request_id) == 0);
  notify_drained();
  return true;
}

void RpcAgent::fail_calls_to(WorkerId peer, const std::string& reason) {
  std::vector<uint64_t> ids;
  for (const auto& [id, pending] : pending_) {
    if (pending.to == peer) ids.push_back(id);
  }
  if (!ids.empty()) DAGSIM_PROBE("rpc.future_failed_by_peer_death");
  for (uint64_t id : ids) {
    const std::string what = pending_.at(id).what;
    fail(id, std::make_exception_ptr(errors::connection_failed(what + " to " + env_.peer_name(peer) + ": " + reason)));
  }
  // Every call pending on it ended (ending one may start another, a user delete of an RRef it
  // carried: that one stands on its own).
  DAGSIM_ASSERT(std::none_of(ids.begin(), ids.end(), [this](uint64_t id) { return pending_.count(id) != 0; }));
}

}  // namespace dagsim::rpc
