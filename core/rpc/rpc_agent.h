// RpcAgent: one node's RPC endpoint over its Env's Transport (PyTorch's RpcAgent, per node
// rather than per process, since a simulated world holds many nodes in one process).
//
// rpc_async sends a call to a registered function on another node (or this one) and returns a
// Future of its result tensors; rpc_sync waits for it. A listener fiber decodes every frame that
// arrives: calls run each on a fiber of their own (so a function may itself make RPCs and block),
// replies complete their pending futures, and a peer's failure fails every call pending on it.
//
// Promises: every call ends, with its result or an error: the callee's error with its code and
// "Error on Node N: ..." text; timed_out after the call's timeout (the Clock's, so virtual time
// in the simulator); connection_failed naming the peer when its connection fails. A malformed
// frame is logged and dropped, never a crash. Calls are at most once: a call whose connection
// failed may still have run on the callee. shutdown() refuses new calls, waits for outstanding
// ones (ours and those we serve) and then stops the listener.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "core/rpc/codec.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/rpc_extension.h"
#include "core/rpc/rref.h"
#include "core/runtime/env.h"
#include "core/runtime/future.h"

namespace dagsim::rpc {

using runtime::Duration;
using runtime::Future;

struct RpcOptions {
  Duration default_timeout = std::chrono::seconds(60);
  CodecLimits limits;
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
  Future<std::vector<Tensor>> send_request(WorkerId to, Message message, const std::string& what,
                                           std::optional<Duration> timeout = std::nullopt);
  // The value of an RRef this node owns (waits until its remote call ends; rethrows its error).
  std::vector<Tensor> owned_value(uint64_t rref_id);
  // A function only this node serves (a service's entry point, e.g. the optimizer host's).
  void add_local_function(std::string name, RpcFunction function);

  // The owner side of an RRef whose last user is gone.
  void drop_owned(uint64_t rref_id) { owned_.erase(rref_id); }
  size_t owned_rrefs() const { return owned_.size(); }

  // Sends any request message (the extension's: backward passes, cleanup) and returns the
  // tensors of its ret, or its error. `what` names it in timeout and failure messages.
  Future<std::vector<Tensor>> request(WorkerId to, Message message, const std::string& what,
                                      std::optional<Duration> timeout = std::nullopt);

  // Installs the extension (distributed autograd). Before start(); the agent does not own it.
  void set_extension(RpcExtension* extension) { extension_ = extension; }

  // Graceful: refuses new calls, waits (up to the default timeout) for outstanding calls and
  // handlers, then stops the listener. Throws timed_out if they do not drain.
  void shutdown();

  runtime::Env& env() { return env_; }
  const FunctionRegistry& registry() const { return registry_; }
  WorkerId self() const { return env_.self; }
  size_t pending_calls() const { return pending_.size(); }

 private:
  struct Pending {
    WorkerId to;
    std::string function;
    runtime::Promise<std::vector<Tensor>> promise;
    runtime::TimerId timer = 0;
  };

  void listen();
  void on_frame(WorkerId from, const runtime::Bytes& frame);
  void serve(WorkerId from, Message request);
  // Runs a call, remote call or RRef request: its reply, or an exception reply.
  Message run_call(WorkerId from, const Message& call);
  std::vector<Tensor> run_function(WorkerId from, const struct Call& call);
  void reply(WorkerId to, const Message& message);
  void send(WorkerId to, const Message& message);
  // Completes and forgets a pending call; false if it already ended (a late reply).
  bool finish(uint64_t request_id, std::optional<std::vector<Tensor>> value, std::exception_ptr error);
  void fail_calls_to(WorkerId peer, const std::string& reason);
  void notify_drained();

  runtime::Env& env_;
  const FunctionRegistry& registry_;
  RpcOptions options_;
  IdGenerator ids_;
  IdGenerator rref_ids_;
  // Values this node owns for RRefs, by RRef id; the future completes when the remote call ends.
  struct Owned {
    runtime::Promise<std::vector<Tensor>> promise;
    Future<std::vector<Tensor>> value;
    bool started = false;  // its remote call is running or ran
    bool deleted = false;  // the user deleted it before its remote call ran
  };
  // The slot of `rref_id`, made empty if it is new.
  std::shared_ptr<Owned> owned_slot(uint64_t rref_id);
  // Shared, so a remote call still running keeps its slot if the user deletes the RRef meanwhile.
  std::map<uint64_t, std::shared_ptr<Owned>> owned_;
  std::map<uint64_t, Pending> pending_;
  size_t handlers_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  RpcExtension* extension_ = nullptr;
  std::map<std::string, RpcFunction, std::less<>> local_functions_;
  runtime::FiberMutex drain_mutex_;
  runtime::FiberCondition drained_;
};

}  // namespace dagsim::rpc
