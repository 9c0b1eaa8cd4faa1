// The wire payloads of distributed autograd (PyTorch's rpc_with_autograd, propagate_gradients_req
// and cleanup_autograd_context_req):
//   - forward_autograd_req/resp wrap a call or its result with (context id, autograd message id,
//     sending worker) and which tensors required grad on the sender;
//   - backward_autograd_req carries the gradients for one send function (context, message id,
//     retain_graph), in the order of the send function's edges;
//   - cleanup_autograd_context_req names a context to release.
// Every reader bounds its lengths and throws protocol_error naming the field.
#pragma once

#include <vector>

#include "core/dist_autograd/context.h"
#include "core/rpc/message.h"

namespace dagsim::dist_autograd {

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

// `type` is forward_autograd_req (wrapping a request) or forward_autograd_resp (a response).
rpc::Message wrap_with_autograd(rpc::MessageType type, const rpc::Message& inner, const AutogradMetadata& meta);
WithAutograd unwrap_autograd(const rpc::Message& message);

struct BackwardRequest {
  ContextId context = 0;
  MessageId message = 0;
  bool retain_graph = false;
  std::vector<Tensor> grads;
};
rpc::Message make_backward_request(uint64_t request_id, const BackwardRequest& request);
BackwardRequest read_backward_request(const rpc::Message& message);

rpc::Message make_cleanup_request(uint64_t request_id, ContextId context);
ContextId read_cleanup_request(const rpc::Message& message);

}  // namespace dagsim::dist_autograd
