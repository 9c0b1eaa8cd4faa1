// RpcAgent: one node's RPC endpoint over its Env's Transport (PyTorch's RpcAgent, per node
// rather than per process, since a simulated world holds many nodes in one process).
//
// rpc_async sends a call to a registered function on another node (or this one) and returns a
// Future of its result tensors; rpc_sync waits for it. A listener fiber decodes every frame that
// arrives: calls run each on a fiber of their own (so a function may itself make RPCs and block),
// replies complete their pending futures, and a peer's failure fails every call pending on it.
// Services sit beside the calls: add_handler(type, fn) serves requests of one message type (byte
// payloads in and out, each on a fiber of its own), and request_bytes sends one. Distributed
// autograd's own requests (backward, cleanup, termination probes) are such handlers, so a store or
// rendezvous service shares a node with it.
//
// Threading: everything runs on fibers of the agent's node. Timer callbacks (the simulator's
// driver) only queue an expired call and wake the agent's timeout reaper fiber, which fails the
// call: no promise is ever completed, and no continuation spawned, from the driver (finish asserts
// it).
//
// Promises: every call ends, with its result or an error: the callee's error with its code and
// "Error on Node N: ..." text; timed_out after the call's timeout (the Clock's, so virtual time
// in the simulator); connection_failed naming the peer when its connection fails. A malformed
// frame is logged and dropped, never a crash; a request of a type nobody serves here gets an
// exception reply saying so. Calls are at most once: a call whose connection
// failed may still have run on the callee. shutdown() refuses new calls, waits for outstanding
// ones (ours and those we serve) and then stops the listener.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/base/ids.h"
#include "core/rpc/codec.h"
#include "core/rpc/device_maps.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/request_admission.h"
#include "core/rpc/rpc_extension.h"
#include "core/rpc/rref.h"
#include "core/runtime/env.h"
#include "core/runtime/future.h"

namespace dagsim::rpc {

using runtime::Duration;
using runtime::Future;

// A service's request handler: the request's payload in, the response's payload out. It runs on a
// fiber of its own and may block; a dagsim::Error it throws goes back to the caller as an
// exception reply with its code and "Error on Node N: ..." text, as a call's error does.
using Handler = std::function<Bytes(WorkerId from, const Bytes& payload)>;

// PyTorch's faulty agent (FaultyTensorPipeAgent), per message type: the first `count` requests of
// `type` this node sends fail at once with connection_failed (no `delay`), or go out `delay` late.
struct MessageFault {
  MessageType type = MessageType::call;
  uint32_t count = 0;
  std::optional<Duration> delay = std::nullopt;
};

// PyTorch's sendWithRetries, for the one-way messages that must get through (context releases, RRef
// deletes): a send that fails with timed_out or connection_failed is tried again after a backoff
// that grows 1.5 times a try, up to a cap, at most kSendRetries more times.
inline constexpr uint32_t kSendRetries = 20;
inline constexpr Duration kRetryBackoff = std::chrono::milliseconds(100);
inline constexpr Duration kRetryBackoffCap = std::chrono::seconds(2);
inline Duration retry_backoff(uint32_t attempt) {
  Duration backoff = kRetryBackoff;
  for (uint32_t i = 0; i < attempt && backoff < kRetryBackoffCap; ++i) backoff = backoff * 3 / 2;
  return std::min(backoff, kRetryBackoffCap);
}

struct RpcOptions {
  Duration default_timeout = std::chrono::seconds(60);
  CodecLimits limits;
  std::vector<MessageFault> message_faults = {};
  // Where tensors sent to each peer land there, and where replies to each peer land (the inverse
  // of the peer's map to this node): device_maps.h.
  std::map<WorkerId, DeviceMap> device_maps = {};
  std::map<WorkerId, DeviceMap> reverse_device_maps = {};
  // A planted bug, for the conformance suite to catch: the receiver's stream does not wait for
  // the copy that placed an incoming tensor on its GPU.
  bool skip_copy_event_wait = false;
  // How many requests this node serves at once, and how many bytes of them may wait
  // (request_admission.h).
  AdmissionLimits admission = {};
  // Where this life's request ids start (tests only: near the end of their 48 bits).
  uint64_t first_request_sequence = 1;
};

class RpcAgent {
 public:
  RpcAgent(runtime::Env& env, const FunctionRegistry& registry, RpcOptions options = {});
  // Fails what is still pending (broken_promise) and cancels its timers.
  ~RpcAgent();
  RpcAgent(const RpcAgent&) = delete;
  RpcAgent& operator=(const RpcAgent&) = delete;

  // Spawns the listener. Call once, on a fiber of the agent's node or before the run.
  void start();

  Future<std::vector<Tensor>> rpc_async(WorkerId to, const std::string& function, CallArgs args,
                                        std::optional<Duration> timeout = std::nullopt);
  std::vector<Tensor> rpc_sync(WorkerId to, const std::string& function, CallArgs args,
                               std::optional<Duration> timeout = std::nullopt);

  // rpc.remote: runs `function` on `to`, which keeps the result; returns a user RRef at once
  // (an owner RRef when `to` is this node). Errors surface at to_here().
  RRef remote(WorkerId to, const std::string& function, CallArgs args);

  // A request that goes through the extension first (distributed autograd may wrap it), as
  // calls, remote calls and RRef fetches do.
  // `children`: forks this call carries (fork()), whose parent reference ends with the call.
  Future<std::vector<Tensor>> send_request(WorkerId to, Message message, const std::string& what,
                                           std::optional<Duration> timeout = std::nullopt,
                                           std::vector<uint64_t> children = {});
  // The value of an RRef this node owns (waits until its remote call ends; rethrows its error).
  std::vector<Tensor> owned_value(uint64_t rref_id);
  // The same value as a future (ready when its remote call ends), without waiting.
  Future<std::vector<Tensor>> owned_future(uint64_t rref_id) { return owned_slot(rref_id)->value; }
  // A function only this node serves (a service's entry point, e.g. the optimizer host's), run
  // bounded() as the registry's are.
  void add_local_function(std::string name, RpcFunction function,
                          uint64_t allocation_bound = kDefaultCallAllocationBytes);

  // A globally unique id (this node, its incarnation, a counter: ids.h) for something a caller
  // names on other nodes (RRefs, optimizers): exact, and never reused by a later life.
  uint64_t new_global_id() {
    const uint64_t id = rref_ids_.next();
    DAGSIM_ASSERT(worker_of(id) == env_.self && incarnation_of(id) == static_cast<uint16_t>(env_.incarnation));
    return id;
  }

  // RRef ownership and forks (rref_forks.cc). The owner's side of a handle of its own RRef whose
  // last copy went (RRef's destructor), as a user delete is for others: fork `fork_id` is gone,
  // and the value goes with the last fork.
  void release_fork(uint64_t rref_id, uint64_t fork_id);
  // A user delete of fork `fork_id` to `owner`, retried (kSendRetries) while it fails for want of
  // a connection: a delete lost on the way would keep the owner's value for ever.
  void send_user_delete(WorkerId owner, uint64_t rref_id, uint64_t fork_id, uint32_t attempt = 0);
  // The user handles alive on this node (RRef's constructor and destructor): shutdown() deletes
  // them all, as PyTorch's graceful shutdown does, so an owner that outlives this node keeps
  // nothing for it. forget_user_fork is false once shutdown() has deleted the fork.
  void note_user_fork(WorkerId owner, uint64_t rref_id, uint64_t fork_id) { user_forks_[fork_id] = {owner, rref_id}; }
  bool forget_user_fork(uint64_t fork_id) { return user_forks_.erase(fork_id) == 1; }
  // RRef values this node keeps (or waits for), and the live forks it counts for one of them.
  size_t owned_rrefs() const { return owned_.size(); }
  // Of those, the ones whose remote call ran (the rest are slots waiting for theirs).
  size_t owned_values() const;
  size_t forks_of(uint64_t rref_id) const;
  bool counts_fork(uint64_t rref_id, uint64_t fork_id) const;
  // One line per value kept: its RRef, whether its remote call ran, and each fork with its holder.
  std::string owned_report() const;
  // Forks this node sent that it still vouches for: neither accepted by their child nor ended
  // with the call that carried them.
  size_t pending_children() const { return pending_children_.size(); }

  // Sends a request message answered with tensors (an RRef delete) and returns the tensors of its
  // response, or its error. `what` names it in timeout and failure messages.
  Future<std::vector<Tensor>> request(WorkerId to, Message message, const std::string& what,
                                      std::optional<Duration> timeout = std::nullopt);

  // Serves requests of `type` with `handler`; its replies have type response_type_of(type).
  // `type` is a request type the agent does not serve itself (not a call, a remote call, an RRef
  // request or forward_autograd_req); one handler per type (asserted).
  void add_handler(MessageType type, Handler handler);
  bool has_handler(MessageType type) const { return handlers_.count(type) != 0; }
  // Called by a handler, on its fiber, before it waits on something other than this node's work
  // (a store watch or wait): the request is parked (request_admission.h), so waiting calls cannot
  // hold every handler fiber while the requests that would end their wait queue behind them.
  // Nothing outside a handler of this agent, or past the peer's max_parked_per_peer.
  void park_request();

  // Sends a request of `type` carrying `payload` to `to`'s handler for it; the future holds the
  // handler's reply payload. The same promises as rpc_async: the handler's error with its code and
  // text, timed_out after `timeout` (the default timeout if none), connection_failed naming the
  // peer, and an exception reply if `to` has no handler for `type`. `what` names it in errors
  // (the type's name by default).
  Future<Bytes> request_bytes(WorkerId to, MessageType type, Bytes payload,
                              std::optional<Duration> timeout = std::nullopt, std::string what = {});

  // Installs the extension (distributed autograd). Before start(); the agent does not own it.
  void set_extension(RpcExtension* extension) {
    DAGSIM_ASSERT_MSG(!started_ && extension_ == nullptr, "set_extension: once, before start()");
    extension_ = extension;
  }

  // Graceful: refuses new calls, waits (up to the default timeout) for outstanding calls and
  // handlers, then stops the listener. Throws timed_out if they do not drain.
  void shutdown();

  runtime::Env& env() { return env_; }
  const FunctionRegistry& registry() const { return registry_; }
  WorkerId self() const { return env_.self; }
  size_t pending_calls() const { return pending_.size(); }
  // Requests served now, and waiting for a fiber (request_admission.h).
  const RequestAdmission& admission() const { return admission_; }
  // From now on every function call and remote call this node is asked to run fails with
  // connection_failed saying `reason`, as calls to a process that is gone do; what is not a call
  // (handlers, RRef fetches and deletes, distributed autograd's own messages) is still served. An
  // elastic node whose agent ended uses it: its workers are gone, though its node lives on.
  void refuse_calls(std::string reason) { refusing_ = std::move(reason); }

 private:
  using TensorPromise = runtime::Promise<std::vector<Tensor>>;
  using BytesPromise = runtime::Promise<Bytes>;
  struct Pending {
    WorkerId to;
    std::string what;
    MessageType expects;  // the response type that completes it (an exception always may)
    std::variant<TensorPromise, BytesPromise> promise;
    Duration limit{0};
    runtime::TimerId timer = 0;
    std::vector<uint64_t> children = {};  // forks it carries: their parent reference ends with it
  };
  // Calls whose timer fired. Timer callbacks run outside the node's fibers (the simulator's
  // driver): they only queue the id and wake the reaper fiber, which fails the call. Shared, so
  // a timer or the reaper never touches a destroyed agent.
  struct Timeouts {
    std::deque<uint64_t> expired;
    bool stopped = false;
    runtime::FiberMutex mutex;
    runtime::FiberCondition wake;
  };

  void listen();
  void reap_timeouts(std::shared_ptr<Timeouts> timeouts);
  void on_frame(WorkerId from, uint32_t from_incarnation, const runtime::Bytes& frame);
  void on_response(WorkerId from, Message response);
  void serve(WorkerId from, uint32_t from_incarnation, Message request);
  // Starts a handler fiber for an admitted request.
  void spawn_handler(WorkerId from, uint32_t from_incarnation, Message request);
  // Starts the waiting requests that may start now (a handler finished).
  void start_waiting();
  // The response to a request of a type the agent does not serve itself: the handler's, or the
  // extension's for a forward_autograd_req. Throws what they throw.
  Message serve_other(WorkerId from, Message request);
  // Runs a call, remote call or RRef fetch: its reply, or an exception reply.
  Message run_call(WorkerId from, const Message& call);
  std::vector<Tensor> run_function(WorkerId from, const struct Call& call);
  // Whether a call with `function` records autograd even without tensors that require grad.
  bool forces_autograd(const std::string& function, const CallArgs& args) const;
  // A call or remote call of `type` carrying `args`, its RRef arguments forked for `to`.
  Future<std::vector<Tensor>> send_call(WorkerId to, MessageType type, uint64_t rref_id, const std::string& function,
                                        const CallArgs& args, const std::string& what, std::optional<Duration> timeout);

  // RRef forks (rref_forks.cc). Who holds a fork: a node's life.
  struct Holder {
    WorkerId worker = 0;
    uint32_t incarnation = 0;
  };
  // The parent's side: a fork of `rref` for a call's callee; this node keeps `rref` alive until
  // the child accepts the fork or the call ends (Pending::children).
  RRefForkData fork(const RRef& rref, WorkerId to);
  // RREF_CHILD_ACCEPT from `from`: the parent lets go of fork `fork_id` if `from` is its child.
  void on_child_accepted(uint64_t fork_id, WorkerId from);
  void end_children(const std::vector<uint64_t>& children);
  // The child's side: handles for the forks a call from `from` carries, each counted by its owner
  // first (RREF_FORK_REQUEST, or at once here when this node owns it), its parent then told
  // (RREF_CHILD_ACCEPT). Throws, naming the RRef, when an owner does not count a fork.
  std::vector<RRef> adopt(WorkerId from, const std::vector<RRefForkData>& forks);
  // The owner's side: counts fork `fork_id` held by `holder`; false when it was released already
  // or `holder`'s life is over (a later one has been heard from).
  bool add_fork(uint64_t rref_id, uint64_t fork_id, Holder holder);
  // Whether a later life of `worker` than `incarnation` was heard from (never for this node).
  bool life_over(WorkerId worker, uint32_t incarnation) const;
  // Drops the value of `rref_id` once no fork is left and its remote call ran (or never will:
  // its creator died first).
  void drop_if_unused(uint64_t rref_id);
  // A frame from `peer`'s life `incarnation`: forks its earlier lives held are gone with them.
  void note_incarnation(WorkerId peer, uint32_t incarnation);
  // Serves a user delete, fork request or child accept.
  Message serve_rref_request(WorkerId from, uint32_t from_incarnation, const Message& request);
  // The values a function gets for its RRef arguments, in order: the owned ones' values, and for
  // a builtin op the others' too, fetched from their owners.
  std::vector<Tensor> rref_values(const std::string& function, const std::vector<RRef>& rrefs);
  // `room_by`: wait for room on the link until then first (Note [room to send] in transport.h);
  // nullopt never waits (the listener, which must keep reading).
  void reply(WorkerId to, const Message& message, std::optional<runtime::TimePoint> room_by = std::nullopt);
  // The message as it goes to `to`: GPU tensors staged to the host and every tensor's target
  // device named (device_maps.h). Throws invalid_argument, PyTorch's text, for a GPU tensor the
  // map does not place.
  Message staged_for(WorkerId to, const Message& message) const;
  // Puts a decoded message's tensors on the devices it names: each copied on a stream of its own,
  // which the device's current stream then waits on (through an event, not a synchronisation).
  void place_on_devices(Message& message);
  void send(WorkerId to, const Message& message, std::optional<runtime::TimePoint> room_by = std::nullopt);
  // The transport's MACs guard frames when it has them (FrameIntegrity); the same both ways, and
  // for calls to oneself, which never leave the node.
  FrameIntegrity frame_integrity() const {
    return env_.transport.authenticated() ? FrameIntegrity::transport_mac : FrameIntegrity::checksum;
  }
  // Registers a pending call of `message` (its id set here), arms its timer and sends it.
  void start_request(WorkerId to, Message& message, MessageType expects, Pending pending);
  // Completes and forgets a pending call with its response; false if it already ended (a late
  // reply). A response of the wrong type, or from another peer, fails the call (protocol_error).
  bool finish(uint64_t request_id, WorkerId from, Message response);
  bool fail(uint64_t request_id, std::exception_ptr error);
  void fail_calls_to(WorkerId peer, const std::string& reason);
  void notify_drained();
  void stop_reaper();

  runtime::Env& env_;
  // RpcOptions::message_faults: true when `message` (request `id`) was failed or delayed.
  bool injected_fault(WorkerId to, uint64_t id, const Message& message);

  const FunctionRegistry& registry_;
  RpcOptions options_;
  RequestIds request_ids_;
  IdGenerator rref_ids_;
  // Values this node owns for RRefs, by RRef id; the future completes when the remote call ends.
  struct Owned {
    runtime::Promise<std::vector<Tensor>> promise;
    Future<std::vector<Tensor>> value;
    bool started = false;  // its remote call is running or ran, or never will (its creator died)
    std::map<uint64_t, Holder> forks;  // live forks, by fork id
    // The creator's fork deleted before its remote call ran (handlers run in any order): the
    // remote call must not count it then.
    bool creator_released = false;
  };
  // The slot of `rref_id`, made empty if it is new.
  std::shared_ptr<Owned> owned_slot(uint64_t rref_id);
  // Ends the wait for a value whose creator died before its remote call arrived.
  void abandon(uint64_t rref_id, Owned& owned);
  // Shared, so a remote call still running keeps its slot if the user deletes the RRef meanwhile.
  std::map<uint64_t, std::shared_ptr<Owned>> owned_;
  // Values dropped lately (drop_if_unused), for twice the default timeout: a use that comes
  // after is refused, never a fresh wait for a value that is gone.
  std::set<uint64_t> dropped_;
  std::deque<std::pair<runtime::TimePoint, uint64_t>> dropped_order_;
  // Forks this node sent, by fork id: the parent's reference each keeps until its child accepts.
  struct PendingChild {
    RRef rref;
    WorkerId child = 0;
  };
  std::map<uint64_t, PendingChild> pending_children_;
  // The latest life heard from, per peer (note_incarnation).
  std::map<WorkerId, uint32_t> incarnations_;
  std::map<uint64_t, Pending> pending_;
  RequestAdmission admission_;  // requests served now (each on a fiber of its own) and waiting
  bool started_ = false;
  bool stopping_ = false;
  std::string refusing_;  // refuse_calls()'s reason; empty while calls are served
  RpcExtension* extension_ = nullptr;
  std::map<MessageType, Handler> handlers_;
  std::shared_ptr<Timeouts> timeouts_ = std::make_shared<Timeouts>();
  std::map<uint64_t, std::pair<WorkerId, uint64_t>> user_forks_;  // fork id -> (owner, RRef id)
  // Expires with the agent: a retry's continuation checks it before touching the agent.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::map<std::string, RpcFunction, std::less<>> local_functions_;
  std::map<Device, int> copy_streams_;  // per GPU, the stream incoming tensors are copied on
  runtime::FiberMutex drain_mutex_;
  runtime::FiberCondition drained_;
};

}  // namespace dagsim::rpc
