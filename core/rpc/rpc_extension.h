// RpcExtension: how distributed autograd rides on the RPC agent without the agent knowing it
// (PyTorch puts this in the RPC layer's message processing; we keep the layers one-way:
// dist_autograd depends on rpc, never the reverse).
//
// The extension only wraps: on the caller's side it wraps each outgoing call with autograd
// metadata and unwraps the response (forward_autograd_resp) back into a plain one, recording what
// it must; on the callee's side it unwraps a wrapped call (forward_autograd_req), runs it in its
// autograd context and wraps the result. Requests of distributed autograd's own (backward passes,
// context cleanup, termination probes) are handlers on the agent (RpcAgent::add_handler), like any
// other service's.
#pragma once

#include <functional>
#include <string>

#include "core/base/ids.h"
#include "core/rpc/message.h"

namespace dagsim::rpc {

class RpcExtension {
 public:
  virtual ~RpcExtension() = default;

  // Caller side: the message to send for `call` (a call, remote call or RRef fetch). Runs on the
  // caller's fiber, so it sees the caller's current autograd context.
  virtual Message outgoing_call(WorkerId to, Message call) = 0;

  // Caller side: a forward_autograd_resp; returns the plain response (or an exception) it wraps.
  // Runs on the listener.
  virtual Message incoming_response(WorkerId from, Message response) = 0;

  // Callee side: a forward_autograd_req; returns the response. May block (on a handler fiber of
  // its own). `run_call` runs a plain call message and returns its reply or exception reply.
  virtual Message serve_call(WorkerId from, Message wrapped, const std::function<Message(Message)>& run_call) = 0;

  // The connection to `peer`'s incarnation `incarnation` failed (after the agent failed the calls
  // pending on it). Runs on the listener: it must not block (spawn a fiber to probe, say).
  virtual void on_peer_failed(WorkerId peer, uint32_t incarnation, const std::string& reason) {}
};

}  // namespace dagsim::rpc
