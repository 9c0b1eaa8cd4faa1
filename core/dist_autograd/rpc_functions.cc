#include "core/dist_autograd/rpc_functions.h"

#include "core/autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/dist_autograd/container.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {

autograd::variable_list SendRpcBackward::apply(autograd::variable_list&& inputs) {
  DAGSIM_ASSERT_MSG(inputs.empty(), "SendRpcBackward is a root: it takes no inputs");
  if (grads_.size() != num_outputs()) {
    throw errors::autograd_error("SendRpcBackward: expected " + std::to_string(num_outputs()) +
                                 " gradient(s) from the peer, got " + std::to_string(grads_.size()));
  }
  // The peer sent host values (payload tensors are the cpu's); each goes back to the device of
  // the tensor it is the gradient of, as PyTorch's reverse device map places it.
  autograd::variable_list grads = grads_;
  for (size_t i = 0; i < grads.size(); ++i) {
    const autograd::Edge& edge = next_edge(i);
    if (!grads[i].defined() || !edge.is_valid()) continue;
    const Device home = edge.function->input_metadata(edge.input_nr).device;
    if (grads[i].device() != home) grads[i] = to_device(grads[i], home);
  }
  return grads;
}

autograd::variable_list RecvRpcBackward::apply(autograd::variable_list&& grads) {
  // The engine hands one gradient slot per input (record_recv made one per received tensor), so
  // positions line up with the sender's edges.
  DAGSIM_ASSERT_EQ(grads.size(), static_cast<size_t>(num_inputs()));
  autograd::NoGradGuard no_grad;
  for (uint32_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) grads[i] = zeros_on(input_metadata(i).shape, input_metadata(i).dtype, input_metadata(i).device);
  }
  sender_(from_, context_, message_, std::move(grads));
  return {};
}

MessageId record_send(DistAutogradContainer& container, DistAutogradContext& context, WorkerId to,
                      const std::vector<Tensor>& tensors) {
  const MessageId id = container.new_autograd_message_id();
  DAGSIM_ASSERT(context.send_functions().count(id) == 0);  // fresh ids: a send is recorded once
  context.add_known_worker_id(to);
  if (!autograd::GradMode::is_enabled() || !autograd::any_requires_grad(tensors)) return id;
  auto send = std::make_shared<SendRpcBackward>();
  // One edge per sent tensor, in order; an invalid edge where a tensor needs no grad, so the
  // peer's gradients line up by position.
  for (const Tensor& t : tensors) send->add_next_edge(autograd::gradient_edge(t));
  // Paired with RecvRpcBackward::apply on the peer: one edge per sent tensor, in order.
  DAGSIM_ASSERT_EQ(send->num_outputs(), tensors.size());
  context.add_send_function(id, std::move(send));
  return id;
}

void record_recv(DistAutogradContext& context, WorkerId from, MessageId message, std::vector<Tensor>& tensors,
                 const std::vector<bool>& requires_grad, GradientSender sender) {
  DAGSIM_ASSERT_EQ(tensors.size(), requires_grad.size());
  // The id comes off the wire: a sender's ids carry its own worker id (record_send), so one that
  // names another worker is forged, and could collide with ids of this node or a third.
  if (worker_of(static_cast<uint64_t>(message)) != from) {
    throw errors::protocol_error("autograd message id " + std::to_string(message) + " from node " + std::to_string(from) +
                                 " names node " + std::to_string(worker_of(static_cast<uint64_t>(message))) +
                                 " as its sender");
  }
  context.add_known_worker_id(from);
  bool any = false;
  for (bool r : requires_grad) any = any || r;
  if (!any) return;
  auto recv = std::make_shared<RecvRpcBackward>(context.context_id(), message, from, std::move(sender));
  // Every tensor gets an input slot, so gradient positions match the sender's edges.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint32_t input_nr = recv->add_input_metadata(tensors[i]);
    DAGSIM_ASSERT_EQ(input_nr, static_cast<uint32_t>(i));  // slot i is tensor i
    if (requires_grad[i]) tensors[i].set_history(recv, input_nr);
  }
  context.add_recv_function(message, std::move(recv));
}

}  // namespace dagsim::dist_autograd
