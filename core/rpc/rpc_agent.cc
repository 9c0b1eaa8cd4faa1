#include "core/rpc/rpc_agent.h"

#include "core/rpc/call_messages.h"

namespace dagsim::rpc {

using runtime::Delivery;

RpcAgent::RpcAgent(runtime::Env& env, const FunctionRegistry& registry, RpcOptions options)
    : env_(env), registry_(registry), options_(options),
      ids_(env.self, static_cast<uint16_t>(env.incarnation)), rref_ids_(env.self, static_cast<uint16_t>(env.incarnation)) {}

RpcAgent::~RpcAgent() {
  for (auto& [id, pending] : pending_) env_.clock.cancel(pending.timer);
  // Destroying the promises completes their futures with broken_promise: no waiter hangs.
  pending_.clear();
}

void RpcAgent::start() {
  DAGSIM_ASSERT_MSG(!started_, "RpcAgent::start called twice");
  started_ = true;
  env_.spawner.spawn("rpc.listener", [this] { listen(); });
}

void RpcAgent::listen() {
  for (;;) {
    Delivery delivery;
    try {
      delivery = env_.transport.inbox().pop();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::channel_closed) return;  // shut down
      throw;
    }
    if (delivery.kind == Delivery::Kind::peer_failed) {
      fail_calls_to(delivery.peer, delivery.reason);
      if (extension_ != nullptr) extension_->on_peer_failed(delivery.peer, delivery.peer_incarnation, delivery.reason);
    } else {
      on_frame(delivery.peer, delivery.payload);
    }
  }
}

void RpcAgent::on_frame(WorkerId from, const runtime::Bytes& frame) {
  Message message;
  try {
    message = decode(frame, options_.limits);
  } catch (const Error& e) {
    // A peer that sends garbage gets nothing back: its request id cannot be trusted either.
    env_.log.event("rpc.bad_frame", "from node " + std::to_string(from) + ": " + e.detail());
    return;
  }
  const bool plain_response = message.type == MessageType::ret || message.type == MessageType::exception ||
                              message.type == MessageType::remote_ret || message.type == MessageType::rref_fetch_ret ||
                              message.type == MessageType::rref_ack;
  if (extension_ != nullptr && !plain_response) {
    if (!is_request(message.type)) {
      // Unwrapped on the listener: what the extension records (recv functions) must exist before
      // anyone waiting on the call runs.
      const uint64_t request_id = message.request_id;
      try {
        message = extension_->incoming_response(from, std::move(message));
      } catch (const Error& e) {
        finish(request_id, std::nullopt, std::make_exception_ptr(e));
        return;
      }
    }
  }
  switch (message.type) {
    case MessageType::call:
    case MessageType::remote_call:
    case MessageType::rref_fetch_call:
    case MessageType::rref_user_delete:
      ++handlers_;
      env_.spawner.spawn("rpc.handler", [this, from, message = std::move(message)]() mutable {
        serve(from, std::move(message));
      });
      return;
    case MessageType::ret:
    case MessageType::remote_ret:
    case MessageType::rref_fetch_ret:
    case MessageType::rref_ack:
      finish(message.request_id, std::move(message.tensors), nullptr);
      return;
    case MessageType::exception: {
      std::exception_ptr error;
      try {
        error = std::make_exception_ptr(read_exception(message));
      } catch (const Error& e) {
        error = std::make_exception_ptr(e);  // a malformed exception still ends the call
      }
      finish(message.request_id, std::nullopt, error);
      return;
    }
    default:
      if (extension_ != nullptr && is_request(message.type)) {
        ++handlers_;
        env_.spawner.spawn("rpc.handler", [this, from, message = std::move(message)]() mutable {
          serve(from, std::move(message));
        });
        return;
      }
      env_.log.event("rpc.unexpected", std::string(message_type_name(message.type)) + " from node " + std::to_string(from));
      return;
  }
}

void RpcAgent::serve(WorkerId from, Message request) {
  struct Done {
    RpcAgent& agent;
    ~Done() {
      --agent.handlers_;
      agent.notify_drained();
    }
  } done{*this};
  Message response;
  if (request.type == MessageType::call || request.type == MessageType::remote_call ||
      request.type == MessageType::rref_fetch_call || request.type == MessageType::rref_user_delete) {
    response = run_call(from, request);
  } else {
    DAGSIM_ASSERT(extension_ != nullptr);
    const uint64_t request_id = request.request_id;
    try {
      response = extension_->serve(from, std::move(request),
                                   [this, from](Message call) { return run_call(from, call); });
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      response = make_exception(request_id, env_.self, e);
    } catch (const std::exception& e) {
      response = make_exception(request_id, env_.self, errors::internal_error(e.what()));
    }
  }
  reply(from, response);
}

Message RpcAgent::run_call(WorkerId from, const Message& request) {
  try {
    if (request.type == MessageType::rref_fetch_call) {
      return make_reply(MessageType::rref_fetch_ret, request.request_id,
                        owned_value(read_id_request(request, "rref.rref_id")));
    }
    if (request.type == MessageType::rref_user_delete) {
      const uint64_t id = read_id_request(request, "rref.rref_id");
      auto it = owned_.find(id);
      if (it != owned_.end() && !it->second->started) {
        it->second->deleted = true;  // its remote call has not run yet: drop the value when it has
      } else {
        owned_.erase(id);
      }
      return make_reply(MessageType::rref_ack, request.request_id);
    }
    if (request.type == MessageType::remote_call) {
      auto [id, call] = read_remote_call(request);
      std::shared_ptr<Owned> owned = owned_slot(id);
      if (owned->started) throw errors::invalid_argument("RRef " + std::to_string(id) + " was already created by a remote call");
      owned->started = true;
      struct Forget {
        RpcAgent& agent;
        uint64_t id;
        Owned& owned;
        ~Forget() {
          if (owned.deleted) agent.owned_.erase(id);
        }
      } forget{*this, id, *owned};
      runtime::Promise<std::vector<Tensor>>* promise = &owned->promise;
      try {
        promise->set_value(run_function(from, call));
        return make_reply(MessageType::remote_ret, request.request_id);
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        // The error waits in the RRef: to_here() raises it, as PyTorch's does.
        const Message failure = make_exception(request.request_id, env_.self, e);
        promise->set_exception(std::make_exception_ptr(read_exception(failure)));
        return make_reply(MessageType::remote_ret, request.request_id);
      }
    }
    Call call = read_call(request);
    return make_ret(request.request_id, run_function(from, call));
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);  // this node is dying: nobody left to reply
    return make_exception(request.request_id, env_.self, e);
  } catch (const std::exception& e) {
    return make_exception(request.request_id, env_.self, errors::internal_error(e.what()));
  }
}

std::vector<Tensor> RpcAgent::run_function(WorkerId from, const Call& call) {
  const RpcFunction* function = nullptr;
  if (auto local = local_functions_.find(call.function); local != local_functions_.end()) function = &local->second;
  if (function == nullptr) function = registry_.find(call.function);
  if (function == nullptr) {
    std::string known;
    for (const std::string& name : registry_.names()) known += (known.empty() ? "" : ", ") + name;
    throw errors::invalid_argument("unknown function '" + call.function + "'; registered: " + known);
  }
  CallContext context{this, from};
  if (call.args.rrefs.empty()) return (*function)(context, call.args);
  CallArgs args = call.args;
  for (uint64_t id : call.args.rrefs) {
    for (const Tensor& t : owned_value(id)) args.tensors.push_back(t);
  }
  return (*function)(context, args);
}

std::shared_ptr<RpcAgent::Owned> RpcAgent::owned_slot(uint64_t rref_id) {
  std::shared_ptr<Owned>& slot = owned_[rref_id];
  if (!slot) {
    slot = std::make_shared<Owned>();
    slot->value = slot->promise.get_future();
  }
  return slot;
}

std::vector<Tensor> RpcAgent::owned_value(uint64_t rref_id) {
  // A use may be served before the remote call that creates the value (handlers run in any order
  // under a random schedule): the slot is made by whichever comes first, as PyTorch's owner makes
  // its OwnerRRef on first reference. A remote call that never comes ends the wait after the RPC
  // timeout.
  std::shared_ptr<Owned> owned = owned_slot(rref_id);
  if (owned->started) return owned->value.get();
  try {
    return owned->value.get_until(env_.clock.now() + options_.default_timeout);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timed_out || owned->started) throw;
    if (auto it = owned_.find(rref_id); it != owned_.end() && it->second == owned) owned_.erase(it);
    throw errors::invalid_argument("RRef " + std::to_string(rref_id) + " is not owned by node " + std::to_string(env_.self) +
                                   ": no remote call created it (an RRef argument must live on the node that runs the function)");
  }
}

void RpcAgent::add_local_function(std::string name, RpcFunction function) {
  DAGSIM_ASSERT_MSG(registry_.find(name) == nullptr && local_functions_.count(name) == 0,
                    "function '" + name + "' registered twice");
  local_functions_.emplace(std::move(name), std::move(function));
}

void RpcAgent::reply(WorkerId to, const Message& message) {
  try {
    send(to, message);
  } catch (const Error& e) {
    // A result too large for a frame: the caller still gets an answer.
    if (e.code() != ErrorCode::invalid_argument || message.type == MessageType::exception) throw;
    send(to, make_exception(message.request_id, env_.self, e));
  }
}

void RpcAgent::send(WorkerId to, const Message& message) {
  runtime::Bytes frame = encode(message, options_.limits);
  if (to == env_.self) {
    // A call to oneself goes through the same encode/decode, on a fiber, as a remote one.
    env_.spawner.spawn("rpc.local", [this, frame = std::move(frame)] { on_frame(env_.self, frame); });
    return;
  }
  env_.transport.send(to, std::move(frame));
}

Future<std::vector<Tensor>> RpcAgent::rpc_async(WorkerId to, const std::string& function, CallArgs args,
                                                std::optional<Duration> timeout) {
  Message call = make_call(0, function, args);
  // RRef arguments are values on the callee that may require grad: record the call whatever the
  // caller's own tensors need (PyTorch forces recording for calls that can touch remote state).
  if (!args.rrefs.empty()) call.flags |= kForceAutograd;
  return send_request(to, std::move(call), "rpc '" + function + "'", timeout);
}

Future<std::vector<Tensor>> RpcAgent::send_request(WorkerId to, Message message, const std::string& what,
                                                   std::optional<Duration> timeout) {
  if (extension_ != nullptr) message = extension_->outgoing_call(to, std::move(message));
  return request(to, std::move(message), what, timeout);
}

RRef RpcAgent::remote(WorkerId to, const std::string& function, CallArgs args) {
  const uint64_t id = rref_ids_.next();
  // The acknowledgement only says the owner has the call; its outcome waits in the RRef.
  Message call = make_remote_call(0, id, function, args);
  if (!args.rrefs.empty()) call.flags |= kForceAutograd;  // as rpc_async: RRef values may require grad
  send_request(to, std::move(call), "remote '" + function + "'");
  return RRef(*this, to, id);
}

Future<std::vector<Tensor>> RpcAgent::request(WorkerId to, Message message, const std::string& what,
                                              std::optional<Duration> timeout) {
  if (!started_ || stopping_) {
    throw errors::invalid_argument(what + " to node " + std::to_string(to) + ": the RPC agent of node " +
                                   std::to_string(env_.self) + (stopping_ ? " is shut down" : " is not started"));
  }
  DAGSIM_ASSERT_MSG(is_request(message.type), "RpcAgent::request sends requests only");
  const uint64_t id = ids_.next();
  message.request_id = id;
  Pending& pending = pending_[id];
  pending.to = to;
  pending.function = what;
  Future<std::vector<Tensor>> future = pending.promise.get_future();
  const Duration limit = timeout.value_or(options_.default_timeout);
  pending.timer = env_.clock.call_at(env_.clock.now() + limit, [this, id, to, what, limit] {
    finish(id, std::nullopt,
           std::make_exception_ptr(errors::timed_out(what + " to node " + std::to_string(to) + " timed out after " +
                                                     std::to_string(limit.count() / 1000000) + " ms")));
  });
  try {
    send(to, message);
  } catch (...) {
    finish(id, std::nullopt, std::current_exception());
  }
  return future;
}

std::vector<Tensor> RpcAgent::rpc_sync(WorkerId to, const std::string& function, CallArgs args,
                                       std::optional<Duration> timeout) {
  return rpc_async(to, function, std::move(args), timeout).get();
}

bool RpcAgent::finish(uint64_t request_id, std::optional<std::vector<Tensor>> value, std::exception_ptr error) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return false;  // timed out or failed already: a late reply
  Pending pending = std::move(it->second);
  pending_.erase(it);
  env_.clock.cancel(pending.timer);
  if (error) {
    pending.promise.set_exception(error);
  } else {
    pending.promise.set_value(std::move(*value));
  }
  notify_drained();
  return true;
}

void RpcAgent::fail_calls_to(WorkerId peer, const std::string& reason) {
  std::vector<uint64_t> ids;
  for (const auto& [id, pending] : pending_) {
    if (pending.to == peer) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    const std::string function = pending_.at(id).function;
    finish(id, std::nullopt,
           std::make_exception_ptr(errors::connection_failed(function + " to node " + std::to_string(peer) + ": " +
                                                             reason)));
  }
}

void RpcAgent::notify_drained() {
  if (stopping_ && pending_.empty() && handlers_ == 0) drained_.notify_all();
}

void RpcAgent::shutdown() {
  stopping_ = true;
  runtime::FiberLock lock(drain_mutex_);
  const bool drained = runtime::block_until(
      drained_, lock, [this] { return pending_.empty() && handlers_ == 0; },
      env_.clock.now() + options_.default_timeout, "RpcAgent::shutdown");
  if (!drained) {
    throw errors::timed_out("RpcAgent::shutdown of node " + std::to_string(env_.self) + ": " +
                            std::to_string(pending_.size()) + " call(s) and " + std::to_string(handlers_) +
                            " handler(s) still outstanding");
  }
  env_.transport.inbox().close();
}

}  // namespace dagsim::rpc
