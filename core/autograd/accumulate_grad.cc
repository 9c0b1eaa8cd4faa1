#include "core/autograd/accumulate_grad.h"

#include "core/tensor/device_guard.h"

#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

namespace dagsim::autograd {

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  DAGSIM_ASSERT(variable_.defined());
  DAGSIM_ASSERT(variable_.is_leaf());
  add_input_metadata(variable_);
}

void AccumulateGrad::accumulate_into(Tensor* slot, Tensor grad) {
  DAGSIM_ASSERT(grad.defined());
  NoGradGuard no_grad;
  if (!slot->defined()) {
    // Steal the buffer when the engine holds the only reference, as PyTorch does; otherwise copy,
    // so a later in-place accumulation cannot write into a tensor someone else sees. Both counts
    // matter: AddBackward hands one gradient tensor to both of its inputs, so two leaves can be
    // offered the same TensorImpl (one storage owner, two handles); stealing it for both would
    // alias their .grad and double-count every later accumulation.
    *slot = grad.use_count() == 1 && grad.storage().use_count() == 1 && !grad.requires_grad() ? grad : clone(grad);
    return;
  }
  DAGSIM_ASSERT(slot->shape() == grad.shape());
  add_(*slot, grad);
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  DAGSIM_ASSERT_EQ(grads.size(), size_t{1});
  if (!grads[0].defined()) return {};
  Tensor grad = variable_.grad();
  accumulate_into(&grad, std::move(grads[0]));
  variable_.set_grad(grad);
  // User code: off any device the engine opened for this node (a factory in a hook makes a CPU
  // tensor, as PyTorch's does).
  DeviceGuard::Suspend off_device;
  for (const PostAccumulateGradHook& hook : variable_.post_accumulate_grad_hooks()) hook(variable_);
  return {};
}

void AccumulateGrad::call_tensor_pre_hooks(variable_list& grads) {
  Node::call_tensor_pre_hooks(grads);
  for (const TensorHook& hook : variable_.leaf_hooks()) {
    Tensor replaced = hook(grads[0]);
    if (replaced.defined()) grads[0] = std::move(replaced);
  }
}

}  // namespace dagsim::autograd
