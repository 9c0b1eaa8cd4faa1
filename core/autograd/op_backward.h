// OpBackward: the backward node of one forward op, built from a closure.
//
// Each op in core/tensor writes its derivative beside its forward math (as micrograd does) and
// records it with record_op(): the saved tensors go into the node, where retain_graph and the
// version counter can police them, and the closure receives them unpacked. Grad formulas run with
// grad mode off, so backward never records a graph of its own (create_graph is not supported).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "core/autograd/node.h"
#include "core/autograd/saved_tensor.h"

namespace dagsim::autograd {

// What a backward closure receives.
struct BackwardArgs {
  // One per forward output, never undefined (the node fills zeros where no grad flowed).
  const variable_list& grads;
  // The tensors passed to record_op's saved_inputs then saved_outputs, unpacked and checked.
  const variable_list& saved;
  const std::vector<Edge>& edges;
  // Whether forward input i wants a gradient; a closure may skip work (and return an undefined
  // tensor) where it does not.
  bool needs(size_t i) const { return edges[i].is_valid(); }
};

// Returns one gradient per forward input (undefined where the input needs none).
using BackwardFn = std::function<variable_list(const BackwardArgs& args)>;

class OpBackward final : public Node {
 public:
  OpBackward(std::string_view name, BackwardFn fn) : name_(name), fn_(std::move(fn)) {}

  variable_list apply(variable_list&& grads) override;
  std::string_view name() const override { return name_; }
  void release_variables() override;

  void save(const Tensor& t, bool is_output) { saved_.emplace_back(t, is_output); }

 private:
  std::string_view name_;  // always a string literal
  BackwardFn fn_;
  std::vector<SavedTensor> saved_;
};

// Records `outputs` as produced by op `name` from `inputs`: builds an OpBackward with an edge per
// input, saves `saved_inputs` (forward inputs) and `saved_outputs` (forward outputs), and sets each
// output's grad_fn. Does nothing (and returns nullptr) when no input requires grad or grad mode is
// off. `name` must be a string literal.
std::shared_ptr<OpBackward> record_op(std::string_view name, const variable_list& inputs,
                                      const variable_list& outputs, BackwardFn fn,
                                      const variable_list& saved_inputs = {},
                                      const variable_list& saved_outputs = {});

}  // namespace dagsim::autograd
