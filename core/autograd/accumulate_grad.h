// AccumulateGrad: the backward node of a leaf that requires grad. It adds the incoming gradient
// into the leaf's .grad (creating it on first use, accumulating across backward calls, as PyTorch
// does), then runs the leaf's post-accumulate hooks. The distributed engine bypasses it and
// captures the gradient into the autograd context instead (GraphTask::leaf_capture).
#pragma once

#include <vector>

#include "core/autograd/node.h"

namespace dagsim::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);

  variable_list apply(variable_list&& grads) override;
  std::string_view name() const override { return "AccumulateGrad"; }

  const Tensor& variable() const { return variable_; }
  const Tensor* leaf_variable() const override { return &variable_; }

  // The leaf's tensor hooks (Tensor::register_hook on a leaf).
  void call_tensor_pre_hooks(variable_list& grads) override;

  // `*slot += grad` if the slot holds a gradient, else a copy of `grad` (or `grad` itself when
  // nobody else holds it). Shared with the distributed context's gradient accumulation.
  static void accumulate_into(Tensor* slot, Tensor grad);

 private:
  Tensor variable_;
};

}  // namespace dagsim::autograd
