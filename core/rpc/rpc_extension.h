// RpcExtension: how distributed autograd rides on the RPC agent without the agent knowing it
// (PyTorch puts this in the RPC layer's message processing; we keep the layers one-way:
// dist_autograd depends on rpc, never the reverse).
//
// The agent asks its extension (if any) to transform each outgoing call (wrap it with autograd
// metadata), to turn each response of a type the agent does not know back into a plain ret or
// exception (recording what it must), and to serve requests of types the agent does not serve
// itself (backward passes, context cleanup), on a handler fiber of their own.
#pragma once

#include <functional>
#include <string>

#include "core/base/ids.h"
#include "core/rpc/message.h"

namespace dagsim::rpc {

class RpcExtension {
 public:
  virtual ~RpcExtension() = default;

  // Caller side: the message to send for `call` (a plain call message). Runs on the caller's
  // fiber, so it sees the caller's current autograd context.
  virtual Message outgoing_call(WorkerId to, Message call) = 0;

  // Caller side: a response whose type the agent does not know; returns a ret or an exception.
  virtual Message incoming_response(WorkerId from, Message response) = 0;

  // Callee side: a request whose type the agent does not serve; returns the response. May block.
  // `run_call` runs a plain call message through the registry and returns its ret or exception.
  virtual Message serve(WorkerId from, Message request, const std::function<Message(Message)>& run_call) = 0;

  // The connection to `peer`'s incarnation `incarnation` failed (after the agent failed the calls
  // pending on it). Runs on the listener: it must not block (spawn a fiber to probe, say).
  virtual void on_peer_failed(WorkerId peer, uint32_t incarnation, const std::string& reason) {}
};

}  // namespace dagsim::rpc
