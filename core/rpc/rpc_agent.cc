#include "core/rpc/rpc_agent.h"

#include <exception>

#include "core/base/fiber_local.h"
#include "core/base/probe.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/gathered_frame.h"
#include "core/tensor/ops.h"

#include <algorithm>
#include <utility>
#include <mutex>

namespace dagsim::rpc {

namespace {
// The request the running fiber serves, if any: what park_request() parks.
struct ServingSlot {
  const RpcAgent* agent = nullptr;
  WorkerId from = 0;
  bool parked = false;
};
ServingSlot& serving_slot() {
  static FiberLocal<ServingSlot> slot;
  return slot.get();
}
}  // namespace

using runtime::Delivery;

RpcAgent::RpcAgent(runtime::Env& env, const FunctionRegistry& registry, RpcOptions options)
    : env_(env), registry_(registry), options_(options),
      request_ids_(static_cast<uint16_t>(env.incarnation), options.first_request_sequence),
      rref_ids_(env.self, static_cast<uint16_t>(env.incarnation)), admission_(options.admission) {
  DAGSIM_ASSERT_MSG(options_.default_timeout.count() > 0, "an RPC timeout must be positive");
  DAGSIM_ASSERT_MSG(options_.limits.max_frame_bytes > kFrameHeaderBytes, "a frame limit below the header");
  DAGSIM_ASSERT_MSG(env.incarnation <= UINT16_MAX, "ids carry 16 bits of a node's incarnation");
}

RpcAgent::~RpcAgent() {
  // The parent references go first, while the agent is whole: a user delete they send is refused
  // (stopping_), and an owned value they release is still here to drop.
  stopping_ = true;
  pending_children_.clear();
  for (auto& [id, pending] : pending_) env_.clock.cancel(pending.timer);
  stop_reaper();
  DAGSIM_ASSERT(timeouts_->stopped);  // the reaper never touches a destroyed agent
  // Destroying the promises completes their futures with broken_promise: no waiter hangs.
  pending_.clear();
}

void RpcAgent::start() {
  DAGSIM_ASSERT_MSG(!started_, "RpcAgent::start called twice");
  DAGSIM_ASSERT_MSG(pending_.empty() && admission_.serving() == 0, "RpcAgent: calls before start()");
  started_ = true;
  env_.spawner.spawn("rpc.listener", [this] { listen(); });
  env_.spawner.spawn("rpc.timeouts", [this, timeouts = timeouts_] { reap_timeouts(timeouts); });
}

void RpcAgent::listen() {
  DAGSIM_ASSERT(started_);
  for (;;) {
    Delivery delivery;
    try {
      delivery = env_.transport.inbox().pop();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::channel_closed) return;  // shut down
      throw;
    }
    if (delivery.kind == Delivery::Kind::peer_failed) {
      DAGSIM_ASSERT_MSG(delivery.peer != env_.self, "a node's connection to itself failed");
      fail_calls_to(delivery.peer, delivery.reason);
      if (extension_ != nullptr) extension_->on_peer_failed(delivery.peer, delivery.peer_incarnation, delivery.reason);
    } else {
      on_frame(delivery.peer, delivery.peer_incarnation, delivery.payload);
    }
  }
}

void RpcAgent::on_frame(WorkerId from, uint32_t from_incarnation, const runtime::Bytes& frame) {
  // Preconditions: the transport hands frames only to a started agent, on one of its node's
  // fibers (the listener, or a call to itself); ids carry 16 bits of a node's incarnation, and a
  // frame from this node comes from this incarnation.
  DAGSIM_ASSERT_MSG(started_, "RpcAgent: a frame arrived before start()");
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "RpcAgent: a frame handled outside a node fiber");
  DAGSIM_ASSERT_MSG(from_incarnation <= UINT16_MAX, "an incarnation beyond what ids can carry");
  DAGSIM_ASSERT(from != env_.self || from_incarnation == env_.incarnation);
  Message message;
  const size_t frame_size = frame.size();
  try {
    // Both callers hand over a buffer of their own (the delivery's, the local send's): decoding
    // takes it, so that a TCP frame's tensors alias it (gathered_frame.h). The signature keeps
    // const& only to spare the header's 68 dependents a rebuild; it should take the Bytes by value.
    message = decode(std::move(const_cast<runtime::Bytes&>(frame)), options_.limits, frame_integrity());
  } catch (const Error& e) {
    // A peer that sends garbage gets nothing back: its request id cannot be trusted either.
    DAGSIM_PROBE("rpc.bad_frame_dropped");
    env_.log.event("rpc.bad_frame", "from node " + std::to_string(from) + ": " + e.detail());
    return;
  }
  DAGSIM_ASSERT(is_known_message_type(static_cast<uint16_t>(message.type)));  // decode's promise
  if (!message.devices.empty()) {
    try {
      place_on_devices(message);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      env_.log.event("rpc.bad_device", "from " + env_.peer_name(from) + ": " + e.detail());
      if (is_request(message.type)) {
        reply(from, make_exception(message.request_id, env_.self, e));
      } else if (request_ids_.is_ours(message.request_id)) {
        fail(message.request_id, std::make_exception_ptr(e));
      }
      return;
    }
  }
  if (from != env_.self) note_incarnation(from, from_incarnation);
  if (!is_request(message.type)) {
    on_response(from, std::move(message));
    return;
  }
  if (admission_.try_start(from)) return spawn_handler(from, from_incarnation, std::move(message));
  const uint64_t request_id = message.request_id;
  if (admission_.defer(WaitingRequest{from, from_incarnation, std::move(message), frame_size})) {
    DAGSIM_PROBE("rpc.request_deferred_by_admission");
    return;
  }
  DAGSIM_PROBE("rpc.request_refused_overloaded");
  // Past every bound: refused at once, with an answer that costs no fiber.
  const std::string why = "node " + std::to_string(env_.self) + " is overloaded: it serves " +
                          std::to_string(admission_.serving()) + " requests (" + std::to_string(admission_.serving_for(from)) +
                          " of them node " + std::to_string(from) + "'s) and " + std::to_string(admission_.backlog_bytes()) +
                          " bytes of requests wait, its limit; this one was refused";
  env_.log.event("rpc.overloaded", why);
  reply(from, make_exception(request_id, env_.self, errors::overloaded(why)));
}

void RpcAgent::spawn_handler(WorkerId from, uint32_t from_incarnation, Message request) {
  env_.spawner.spawn("rpc.handler", [this, from, from_incarnation, request = std::move(request)]() mutable {
    serve(from, from_incarnation, std::move(request));
  });
}

void RpcAgent::start_waiting() {
  while (std::optional<WaitingRequest> next = admission_.next()) {
    spawn_handler(next->from, next->from_incarnation, std::move(next->message));
  }
}

void RpcAgent::on_response(WorkerId from, Message response) {
  DAGSIM_ASSERT(!is_request(response.type));
  const uint64_t request_id = response.request_id;
  if (!request_ids_.is_ours(request_id)) {
    // Not an id this life of the node handed out (an earlier life's, or a confused or forged
    // peer's): an earlier incarnation's call is not this one's to finish.
    DAGSIM_PROBE("rpc.reply_for_dead_incarnation");
    env_.log.event("rpc.stray_response", std::string(message_type_name(response.type)) + " from node " +
                                             std::to_string(from) + " for request " + std::to_string(request_id));
    return;
  }
  if (response.type == MessageType::forward_autograd_resp) {
    if (extension_ == nullptr) {
      fail(request_id, std::make_exception_ptr(errors::protocol_error(
                           "a forward_autograd_resp from node " + std::to_string(from) + ", but node " +
                           std::to_string(env_.self) + " runs no distributed autograd")));
      return;
    }
    // Unwrapped on the listener: what the extension records (recv functions) must exist before
    // anyone waiting on the call runs.
    try {
      response = extension_->incoming_response(from, std::move(response));
    } catch (const Error& e) {
      fail(request_id, std::make_exception_ptr(e));
      return;
    }
    DAGSIM_ASSERT_MSG(response.request_id == request_id && response.type != MessageType::forward_autograd_resp,
                      "the extension unwraps a response into a plain one for the same request");
  }
  if (response.type == MessageType::exception) {
    std::exception_ptr error;
    try {
      error = std::make_exception_ptr(read_exception(response));
    } catch (const Error& e) {
      error = std::make_exception_ptr(e);  // a malformed exception still ends the call
    }
    fail(request_id, error);
    return;
  }
  finish(request_id, from, std::move(response));
}

void RpcAgent::serve(WorkerId from, uint32_t from_incarnation, Message request) {
  DAGSIM_ASSERT(admission_.serving_for(from) > 0);  // admitted before this fiber was spawned
  ServingSlot& slot = serving_slot();
  DAGSIM_ASSERT(slot.agent == nullptr);  // one request per handler fiber
  slot = ServingSlot{this, from, false};
  struct Done {
    RpcAgent& agent;
    WorkerId from;
    ServingSlot& slot;
    ~Done() {
      const bool parked = std::exchange(slot, ServingSlot{}).parked;
      if (parked) {
        agent.admission_.finished_parked(from);
      } else {
        agent.admission_.finished(from);
      }
      // Not while unwinding (the node is dying or its scope cancelled): nothing new starts then.
      if (std::uncaught_exceptions() == 0) agent.start_waiting();
      agent.notify_drained();
    }
  } done{*this, from, slot};
  DAGSIM_ASSERT(is_request(request.type));
  const uint64_t request_id = request.request_id;
  Message response;
  if (request.type == MessageType::call || request.type == MessageType::remote_call ||
      request.type == MessageType::rref_fetch_call) {
    response = run_call(from, request);
  } else if (is_rref_request(request.type)) {
    response = serve_rref_request(from, from_incarnation, request);
  } else {
    try {
      response = serve_other(from, std::move(request));
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      response = make_exception(request_id, env_.self, e);
    } catch (const std::exception& e) {
      response = make_exception(request_id, env_.self, errors::internal_error(e.what()));
    }
  }
  // Paired with on_response's checks: every reply answers the request it serves.
  DAGSIM_ASSERT_MSG(response.request_id == request_id && !is_request(response.type), "a reply answers its request");
  // A caller that does not read its replies holds this handler (and its admission) for at most
  // the default timeout; by then it has given up on the call.
  reply(from, response, env_.clock.now() + options_.default_timeout);
}

Message RpcAgent::serve_other(WorkerId from, Message request) {
  const MessageType type = request.type;
  DAGSIM_ASSERT(type != MessageType::call && type != MessageType::remote_call && !is_rref_request(type));  // serve runs those
  if (type == MessageType::forward_autograd_req && extension_ != nullptr) {
    return extension_->serve_call(from, std::move(request), [this, from](Message call) {
      DAGSIM_ASSERT_MSG(call.type != MessageType::forward_autograd_req, "the extension runs the call it unwrapped");
      return run_call(from, call);
    });
  }
  auto it = handlers_.find(type);
  if (it == handlers_.end()) {
    throw errors::protocol_error("node " + std::to_string(env_.self) + " has no handler for message type " +
                                 message_type_name(type) + " (" + std::to_string(static_cast<uint16_t>(type)) + ")");
  }
  if (!request.tensors.empty()) throw errors::protocol_error("a handler's request carries bytes only, not tensors");
  // Copied: a handler may block, and the map may change meanwhile (another service registering).
  const Handler handler = it->second;
  Message response;
  response.type = response_type_of(type);
  response.request_id = request.request_id;
  response.payload = handler(from, request.payload);
  return response;
}

Message RpcAgent::run_call(WorkerId from, const Message& request) {
  DAGSIM_ASSERT_MSG(request.type == MessageType::call || request.type == MessageType::remote_call ||
                        request.type == MessageType::rref_fetch_call,
                    "run_call runs calls and RRef fetches only");
  try {
    if (request.type == MessageType::rref_fetch_call) {
      return make_reply(MessageType::rref_fetch_ret, request.request_id, owned_value(read_rref_request(request).rref_id));
    }
    if (request.type == MessageType::remote_call) {
      auto [id, call] = read_remote_call(request);
      if (life_over(worker_of(id), incarnation_of(id))) {
        DAGSIM_PROBE("rpc.remote_call_from_dead_creator_refused");
        throw errors::connection_failed("RRef " + std::to_string(id) + ": its creator, node " + std::to_string(worker_of(id)) +
                                        ", has restarted since it sent this remote call, which is not run");
      }
      std::shared_ptr<Owned> owned = owned_slot(id);
      if (owned->started) throw errors::invalid_argument("RRef " + std::to_string(id) + " was already created by a remote call");
      // The creator's fork (the RRef id), unless the creator let go of it already: counted before
      // the slot is started, so a refusal leaves nobody waiting on a value never set.
      if (!owned->creator_released) add_fork(id, id, Holder{worker_of(id), incarnation_of(id)});
      owned->started = true;
      DAGSIM_ASSERT(!owned->promise.is_set());  // started once: its value is set once
      struct Forget {
        RpcAgent& agent;
        uint64_t id;
        ~Forget() { agent.drop_if_unused(id); }  // the value outlives its call only for its forks
      } forget{*this, id};
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
  if (!refusing_.empty()) throw errors::connection_failed(refusing_);
  const RpcFunction* function = nullptr;
  if (auto local = local_functions_.find(call.function); local != local_functions_.end()) function = &local->second;
  if (function == nullptr) function = registry_.find(call.function);
  if (function == nullptr) {
    std::string known;
    for (const std::string& name : registry_.names()) known += (known.empty() ? "" : ", ") + name;
    throw errors::invalid_argument("unknown function '" + call.function + "'; registered: " + known);
  }
  DAGSIM_ASSERT(*function != nullptr);
  CallContext context{this, from};
  DAGSIM_ASSERT(call.args.rrefs.empty());  // decoded calls carry forks, adopted here
  if (call.forks.empty()) return (*function)(context, call.args);
  CallArgs args = call.args;
  args.rrefs = adopt(from, call.forks);
  for (Tensor& t : rref_values(call.function, args.rrefs)) args.tensors.push_back(std::move(t));
  DAGSIM_ASSERT(args.tensors.size() >= call.args.tensors.size());  // the caller's first, then the RRefs' values
  return (*function)(context, args);
}

void RpcAgent::add_local_function(std::string name, RpcFunction function, uint64_t allocation_bound) {
  DAGSIM_ASSERT_MSG(!name.empty() && function != nullptr, "a local function needs a name and a body");
  DAGSIM_ASSERT_MSG(registry_.find(name) == nullptr && local_functions_.count(name) == 0,
                    "function '" + name + "' registered twice");
  // Under the same checks as the registry's functions: a peer calls it the same way.
  RpcFunction checked = bounded(name, allocation_bound, std::move(function));
  local_functions_.emplace(std::move(name), std::move(checked));
}

void RpcAgent::reply(WorkerId to, const Message& message, std::optional<runtime::TimePoint> room_by) {
  DAGSIM_ASSERT_MSG(!is_request(message.type), "reply sends responses only");
  try {
    send(to, message, room_by);
  } catch (const Error& e) {
    // A result too large for a frame: the caller still gets an answer.
    if (e.code() != ErrorCode::invalid_argument || message.type == MessageType::exception) throw;
    DAGSIM_PROBE("rpc.reply_too_large_sent_as_exception");
    send(to, make_exception(message.request_id, env_.self, e), room_by);
  }
}

Message RpcAgent::staged_for(WorkerId to, const Message& message) const {
  const auto& maps = is_request(message.type) ? options_.device_maps : options_.reverse_device_maps;
  const auto map = maps.find(to);
  Message staged;
  staged.type = message.type;
  staged.flags = message.flags;
  staged.request_id = message.request_id;
  staged.payload = message.payload;
  staged.devices = target_devices(message.tensors, map == maps.end() ? nullptr : &map->second, env_.peer_name(to),
                                  is_request(message.type));
  staged.tensors.reserve(message.tensors.size());
  for (const Tensor& t : message.tensors) {
    // To the host by a copy on the current stream, which the sending fiber waits for.
    staged.tensors.push_back(t.device().is_cpu() ? t : to_device(detach(t), Device::cpu()));
  }
  return staged;
}

void RpcAgent::place_on_devices(Message& message) {
  DAGSIM_ASSERT(message.devices.size() == message.tensors.size());
  for (size_t i = 0; i < message.tensors.size(); ++i) {
    const Device target = message.devices[i];
    if (target.is_cpu()) continue;
    const std::shared_ptr<DeviceBackend> gpu = backend_for(target);
    const auto [stream, fresh] = copy_streams_.try_emplace(target, 0);
    if (fresh) stream->second = gpu->new_stream();
    const Tensor& host = message.tensors[i];
    Tensor placed = Tensor::empty_on(host.shape(), host.dtype(), target);
    const int current = gpu->current_stream();
    DeviceEvent copied;
    {
      struct Restore {
        DeviceBackend& gpu;
        int stream;
        ~Restore() { gpu.set_current_stream(stream); }
      } restore{*gpu, current};
      gpu->set_current_stream(stream->second);
      gpu->write_from_host(*placed.storage(), static_cast<const std::byte*>(host.raw_data()), host.nbytes());
      copied = gpu->record(stream->second);
    }
    // What runs next on this GPU (the call, or whoever waits on the reply) starts after the copy.
    if (!options_.skip_copy_event_wait) gpu->wait(current, copied);
    message.tensors[i] = std::move(placed);
  }
  message.devices.clear();
}

void RpcAgent::send(WorkerId to, const Message& message, std::optional<runtime::TimePoint> room_by) {
  bool plain = options_.device_maps.empty() && options_.reverse_device_maps.empty();
  for (const Tensor& t : message.tensors) plain = plain && t.device().is_cpu();
  // A transport that writes frames in pieces (TCP) gets version-2 frames whose tensors leave from
  // their own storage (gathered_frame.h); the others, and calls to oneself, contiguous ones.
  if (auto* gathering = to == env_.self ? nullptr : dynamic_cast<GatheringTransport*>(&env_.transport)) {
    GatheredFrame frame = plain ? encode_gathered(message, options_.limits, frame_integrity())
                                : encode_gathered(staged_for(to, message), options_.limits, frame_integrity());
    DAGSIM_ASSERT(frame.size >= kFrameHeaderBytes && frame.size <= options_.limits.max_frame_bytes);
    if (room_by) env_.transport.wait_for_room(to, *room_by);
    gathering->send_gathered(to, std::move(frame));
    return;
  }
  runtime::Bytes frame = plain ? encode(message, options_.limits, frame_integrity())
                               : encode(staged_for(to, message), options_.limits, frame_integrity());
  DAGSIM_ASSERT(frame.size() >= kFrameHeaderBytes && frame.size() <= options_.limits.max_frame_bytes);
  if (to == env_.self) {
    // A call to oneself goes through the same encode/decode, on a fiber, as a remote one.
    env_.spawner.spawn("rpc.local", [this, frame = std::move(frame)]() mutable {
      DAGSIM_ASSERT(frame.size() >= kFrameHeaderBytes);
      on_frame(env_.self, env_.incarnation, frame);
    });
    return;
  }
  // Past the deadline the frame goes anyway: the bound it waited for is the transport's soft one,
  // and its hard one still holds (Note [room to send]).
  if (room_by) env_.transport.wait_for_room(to, *room_by);
  env_.transport.send(to, std::move(frame));
}

void RpcAgent::add_handler(MessageType type, Handler handler) {
  DAGSIM_ASSERT_MSG(is_request(type) && is_known_message_type(static_cast<uint16_t>(type)),
                    "add_handler: a known request type");
  DAGSIM_ASSERT_MSG(type != MessageType::call && type != MessageType::remote_call && !is_rref_request(type) &&
                        type != MessageType::forward_autograd_req,
                    std::string("add_handler: the agent serves ") + message_type_name(type) + " itself");
  DAGSIM_ASSERT_MSG(handler != nullptr, "add_handler: a handler");
  const bool inserted = handlers_.emplace(type, std::move(handler)).second;
  DAGSIM_ASSERT_MSG(inserted, std::string("add_handler: a second handler for ") + message_type_name(type) + " (" +
                                  std::to_string(static_cast<uint16_t>(type)) + ")");
}

void RpcAgent::park_request() {
  ServingSlot& slot = serving_slot();
  if (slot.agent != this || slot.parked) return;
  if (!admission_.park(slot.from)) {
    DAGSIM_PROBE("rpc.park_refused_at_the_peer_limit");
    return;
  }
  DAGSIM_PROBE("rpc.request_parked");
  slot.parked = true;
  start_waiting();  // the fiber it held for others may serve a waiting request now
}

void RpcAgent::notify_drained() {
  DAGSIM_ASSERT(!stopping_ || started_);  // shutdown() requires a started agent
  if (stopping_ && pending_.empty() && admission_.idle()) drained_.notify_all();
}

void RpcAgent::shutdown() {
  DAGSIM_ASSERT_MSG(started_, "RpcAgent::shutdown before start()");
  // PyTorch's graceful shutdown: every user handle still alive here is deleted on its owner first
  // (the drain below waits for the answers); the handles themselves send nothing later.
  for (const auto& [fork_id, user] : std::exchange(user_forks_, {})) send_user_delete(user.first, user.second, fork_id);
  stopping_ = true;
  runtime::FiberLock lock(drain_mutex_);
  const bool drained = runtime::block_until(
      drained_, lock, [this] { return pending_.empty() && admission_.idle(); },
      env_.clock.now() + options_.default_timeout, "RpcAgent::shutdown");
  if (!drained) {
    throw errors::timed_out("RpcAgent::shutdown of node " + std::to_string(env_.self) + ": " +
                            std::to_string(pending_.size()) + " call(s) and " +
                            std::to_string(admission_.serving() + admission_.parked() + admission_.waiting()) +
                            " handler(s) still outstanding");
  }
  DAGSIM_ASSERT(pending_.empty() && admission_.idle());  // drained: nothing can complete after the reaper stops
  stop_reaper();
  env_.transport.inbox().close();
}

}  // namespace dagsim::rpc
