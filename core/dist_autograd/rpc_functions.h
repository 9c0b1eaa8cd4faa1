// SendRpcBackward and RecvRpcBackward: the autograd functions distributed autograd records on
// every RPC that carries tensors requiring grad (PyTorch's functions/sendrpc_backward.h and
// recvrpc_backward.h).
//
// On the sender, SendRpcBackward takes the place of the RPC in the local graph: its next edges
// lead to the sent tensors' history, and in the backward pass it hands on the gradients that
// arrived from the peer (set_grads). It has no inputs: FAST mode runs it as one more root.
// On the receiver, RecvRpcBackward becomes the grad_fn of the received tensors: a leaf of the
// local graph whose apply() sends the gradients it receives back to the sender, through the
// GradientSender it was given (the RPC layer's), addressed by context and message id.
#pragma once

#include <functional>
#include <memory>

#include "core/autograd/node.h"
#include "core/dist_autograd/context.h"

namespace dagsim::dist_autograd {

class SendRpcBackward final : public autograd::Node {
 public:
  // The gradients the peer's RecvRpcBackward sent for this message; one per next edge.
  // REQUIRES: one per next edge (DistEngine::receive_gradients refuses other counts first).
  void set_grads(autograd::variable_list grads) {
    DAGSIM_ASSERT_EQ(grads.size(), num_outputs());
    grads_ = std::move(grads);
  }
  const autograd::variable_list& grads() const { return grads_; }

  autograd::variable_list apply(autograd::variable_list&& inputs) override;
  std::string_view name() const override { return "SendRpcBackward"; }

 private:
  autograd::variable_list grads_;
};

// Sends `grads` for (context, message) to worker `to`; the RPC layer's BACKWARD_AUTOGRAD_REQ.
using GradientSender =
    std::function<void(WorkerId to, ContextId context, MessageId message, autograd::variable_list grads)>;

class RecvRpcBackward final : public autograd::Node {
 public:
  RecvRpcBackward(ContextId context, MessageId message, WorkerId from, GradientSender sender)
      : context_(context), message_(message), from_(from), sender_(std::move(sender)) {
    DAGSIM_ASSERT_MSG(sender_ != nullptr, "a RecvRpcBackward must be able to send its gradients back");
  }

  // Fills gradients that did not flow with zeros (from the input metadata), then sends them.
  // Returns nothing: the receiver's graph ends here.
  autograd::variable_list apply(autograd::variable_list&& grads) override;
  std::string_view name() const override { return "RecvRpcBackward"; }

  WorkerId from_worker() const { return from_; }
  MessageId message_id() const { return message_; }

 private:
  ContextId context_;
  MessageId message_;
  WorkerId from_;
  GradientSender sender_;
};

class DistAutogradContainer;

// Records the sending side of an RPC in `context` (PyTorch's addSendRpcBackward): when any of
// `tensors` requires grad, a SendRpcBackward with edges to their history is stored under a new
// message id. The peer becomes a known worker either way. Returns the message id.
MessageId record_send(DistAutogradContainer& container, DistAutogradContext& context, WorkerId to,
                      const std::vector<Tensor>& tensors);

// Records the receiving side (PyTorch's addRecvRpcBackward): tensors that arrived requiring grad
// get one RecvRpcBackward as their grad_fn, stored under the sender's message id; the sender
// becomes a known worker. `requires_grad[i]` says whether tensor i required grad on the sender.
void record_recv(DistAutogradContext& context, WorkerId from, MessageId message, std::vector<Tensor>& tensors,
                 const std::vector<bool>& requires_grad, GradientSender sender);

}  // namespace dagsim::dist_autograd
