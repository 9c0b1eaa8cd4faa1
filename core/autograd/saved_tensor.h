// SavedTensor: a tensor a backward node keeps from the forward pass (PyTorch's SavedVariable).
//
// It keeps the values (the storage) and the version the storage had when saved, but never the
// tensor's grad_fn: backward formulas need only values, and holding no graph keeps the graph
// acyclic (a node saving its own output would otherwise own itself) and lets graph destruction
// stay iterative. unpack() fails with PyTorch's errors when the graph was freed (retain_graph was
// false) or when the tensor was modified in place since it was saved.
#pragma once

#include <memory>
#include <string>

#include "core/tensor/tensor.h"

namespace dagsim::autograd {

class Node;

class SavedTensor {
 public:
  SavedTensor() = default;
  // `is_output`: `t` is an output of the node saving it (only used in the error text).
  SavedTensor(const Tensor& t, bool is_output);

  // The saved values, as a tensor without history. Throws graph_freed after reset(), and
  // modified_by_inplace when the storage's version moved since saving.
  Tensor unpack(std::string_view node_name) const;

  void reset() {
    data_ = Tensor();
    was_released_ = true;
  }
  bool defined() const { return data_.defined() || was_released_; }

 private:
  Tensor data_;  // shares storage with the saved tensor, no autograd meta
  uint32_t saved_version_ = 0;
  bool was_released_ = false;
  // For the error message only: which node produced the saved tensor.
  std::weak_ptr<Node> grad_fn_;
  uint32_t output_nr_ = 0;
  bool is_leaf_ = true;
};

}  // namespace dagsim::autograd
