// The wire payloads of distributed autograd (PyTorch's rpc_with_autograd, propagate_gradients_req
// and cleanup_autograd_context_req):
//   - forward_autograd_req/resp wrap a call or its result with (context id, autograd message id,
//     sending worker) and which tensors required grad on the sender;
//   - backward_autograd_req carries the gradients for one send function (context, message id,
//     retain_graph), in the order of the send function's edges;
//   - cleanup_autograd_context_req names a context to release.
// Each is a struct with one layout description (rpc/wire.h); the backward and cleanup requests
// are handler payloads (bytes, gradients included). Every reader bounds its lengths and throws
// protocol_error naming the field.
#pragma once

#include <vector>

#include "core/dist_autograd/context.h"
#include "core/rpc/message.h"
#include "core/rpc/wire.h"

namespace dagsim::dist_autograd {

// At most one flag or gradient per tensor a frame may carry (CodecLimits::max_tensors).
inline constexpr size_t kMaxTensorsPerMessage = 65536;

struct AutogradMetadata {
  ContextId context = 0;
  MessageId message = 0;
  WorkerId from = 0;
};

struct WithAutograd {
  rpc::Message inner;  // the wrapped call or result, with its tensors
  AutogradMetadata meta;
  std::vector<bool> requires_grad;  // one per tensor
};

// The payload of a forward_autograd_req/resp: the wrapped message's type, flags and payload, the
// metadata, and one requires-grad flag per tensor (the tensors travel beside it, unchanged).
struct ForwardHeader {
  static constexpr const char* kName = "forward_autograd";
  uint16_t wrapped_type = 0;
  uint32_t wrapped_flags = 0;
  ContextId context = 0;
  MessageId message = 0;
  WorkerId from = 0;
  std::vector<bool> requires_grad;
  rpc::Bytes payload;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("autograd.wrapped_type", m.wrapped_type);
    io.num("autograd.wrapped_flags", m.wrapped_flags);
    io.num("autograd.context_id", m.context);
    io.num("autograd.message_id", m.message);
    io.num("autograd.from_worker", m.from);
    io.flags("autograd.requires_grad", m.requires_grad, kMaxTensorsPerMessage);
    io.blob("autograd.payload", m.payload, rpc::kUnbounded);
  }
};

// `type` is forward_autograd_req (wrapping a request) or forward_autograd_resp (a response).
rpc::Message wrap_with_autograd(rpc::MessageType type, const rpc::Message& inner, const AutogradMetadata& meta);
WithAutograd unwrap_autograd(const rpc::Message& message);

struct BackwardRequest {
  static constexpr const char* kName = "backward_autograd_req";
  ContextId context = 0;
  MessageId message = 0;
  bool retain_graph = false;
  std::vector<Tensor> grads;
  // SMART mode (beyond PyTorch): the discovery that marked the send functions this pass runs; 0 for
  // FAST mode, where a pass runs every send function of the context.
  uint64_t smart_token = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("backward.context_id", m.context);
    io.num("backward.message_id", m.message);
    io.num("backward.retain_graph", m.retain_graph);
    io.list("backward.grads", m.grads, kMaxTensorsPerMessage, [&](auto& g) { io.tensor("backward.grad", g); });
    io.num("backward.smart_token", m.smart_token);
  }
};

struct CleanupRequest {
  static constexpr const char* kName = "cleanup_autograd_context_req";
  ContextId context = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("cleanup.context_id", m.context);
  }
};

// RREF_BACKWARD_REQ: the owner of RRef `rref` runs a distributed backward of `context` with the
// RRef's value as its root (PyTorch's RRefBackwardReq), and answers when it is done.
struct RRefBackwardRequest {
  static constexpr const char* kName = "rref_backward_req";
  uint64_t rref = 0;
  ContextId context = 0;
  bool retain_graph = false;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("rref_backward.rref_id", m.rref);
    io.num("rref_backward.context_id", m.context);
    io.num("rref_backward.retain_graph", m.retain_graph);
  }
};

// Distributed autograd's services beyond PyTorch's table (rpc::kDistAutogradServices).
// incarnation_req (empty payload) -> IncarnationReply: which life of the node answers (the probe
// of a peer whose connection failed).
inline constexpr rpc::MessageType kIncarnationRequest = rpc::service_request(rpc::kDistAutogradServices + 0);
// attach_req (AttachRequest) -> AttachReply: the originator's side of attaching a context.
inline constexpr rpc::MessageType kAttachRequest = rpc::service_request(rpc::kDistAutogradServices + 1);

struct IncarnationReply {
  static constexpr const char* kName = "incarnation_resp";
  uint32_t incarnation = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("incarnation.incarnation", m.incarnation);
  }
};

struct AttachRequest {
  static constexpr const char* kName = "attach_req";
  ContextId context = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("attach.context_id", m.context);
  }
};

// SMART mode's discovery (beyond PyTorch; RFC #23110): the backward pass `token` of `context` needs
// these send functions of the receiver (a recv function it reaches on the sender's side). The
// receiver marks them, finds what they reach in turn, and answers once all of that is marked.
inline constexpr rpc::MessageType kSmartMarkRequest = rpc::service_request(rpc::kDistAutogradServices + 2);

struct SmartMarkRequest {
  static constexpr const char* kName = "smart_mark_req";
  ContextId context = 0;
  uint64_t token = 0;
  std::vector<MessageId> sends;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("smart.context_id", m.context);
    io.num("smart.token", m.token);
    io.list("smart.sends", m.sends, kMaxTensorsPerMessage, [&](auto& id) { io.num("smart.message_id", id); });
  }
};

// known: the caller is now one of the context's workers; not known: no such context here.
struct AttachReply {
  static constexpr const char* kName = "attach_resp";
  bool known = false;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("attach.known", m.known);
  }
};

}  // namespace dagsim::dist_autograd
