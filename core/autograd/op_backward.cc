#include "core/autograd/op_backward.h"

#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

namespace dagsim::autograd {

variable_list OpBackward::apply(variable_list&& grads) {
  DAGSIM_ASSERT_EQ(grads.size(), size_t{num_inputs()});
  for (uint32_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      const InputMetadata& meta = input_metadata(i);
      grads[i] = zeros_on(meta.shape, meta.dtype, meta.device);
    }
  }
  variable_list saved;
  saved.reserve(saved_.size());
  for (const SavedTensor& s : saved_) saved.push_back(s.unpack(name_));
  NoGradGuard no_grad;
  variable_list result = fn_(BackwardArgs{grads, saved, next_edges()});
  DAGSIM_ASSERT_EQ(result.size(), num_outputs());
  return result;
}

void OpBackward::release_variables() {
  for (SavedTensor& s : saved_) s.reset();
}

std::shared_ptr<OpBackward> record_op(std::string_view name, const variable_list& inputs,
                                      const variable_list& outputs, BackwardFn fn,
                                      const variable_list& saved_inputs,
                                      const variable_list& saved_outputs) {
  if (!any_requires_grad(inputs)) return nullptr;
  auto node = std::make_shared<OpBackward>(name, std::move(fn));
  for (const Tensor& input : inputs) node->add_next_edge(gradient_edge(input));
  for (const Tensor& t : saved_inputs) node->save(t, /*is_output=*/false);
  for (const Tensor& t : saved_outputs) node->save(t, /*is_output=*/true);
  for (const Tensor& output : outputs) {
    const uint32_t output_nr = node->add_input_metadata(output);
    output.set_history(node, output_nr);
  }
  return node;
}

}  // namespace dagsim::autograd
