#include "core/autograd/saved_tensor.h"

#include "core/autograd/node.h"

namespace dagsim::autograd {

SavedTensor::SavedTensor(const Tensor& t, bool is_output) {
  DAGSIM_ASSERT(t.defined());
  data_ = Tensor(std::make_shared<TensorImpl>(t.storage(), t.shape(), t.dtype()));
  saved_version_ = t.version();
  if (!is_output && t.grad_fn()) grad_fn_ = t.grad_fn();
  output_nr_ = t.output_nr();
  is_leaf_ = !is_output && t.is_leaf();
}

Tensor SavedTensor::unpack(std::string_view node_name) const {
  if (was_released_) {
    throw errors::graph_freed(
        "Trying to backward through the graph a second time (or directly access saved tensors "
        "after they have already been freed). Saved intermediate values of the graph are freed "
        "when you call backward(). Specify retain_graph=true if you need to backward through the "
        "graph a second time (in " + std::string(node_name) + ")");
  }
  DAGSIM_ASSERT(data_.defined());
  if (data_.version() != saved_version_) {
    std::string which;
    if (!is_leaf_) {
      std::shared_ptr<Node> producer = grad_fn_.lock();
      which = ", which is output " + std::to_string(output_nr_) + " of " +
              std::string(producer ? producer->name() : node_name) + ",";
    }
    throw errors::modified_by_inplace(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [" + describe(data_) + "]" + which + " is at version " +
        std::to_string(data_.version()) + "; expected version " + std::to_string(saved_version_) +
        " instead (needed by " + std::string(node_name) + ")");
  }
  return data_;
}

}  // namespace dagsim::autograd
