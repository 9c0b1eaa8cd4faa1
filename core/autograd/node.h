// Node and Edge: the backward graph, as PyTorch's torch::autograd::Node.
//
// A Node is one backward function. It receives the gradients of its forward op's outputs (its
// "inputs" in backward, numbered by the tensors' output_nr) and returns the gradients of the forward
// op's inputs, which flow along next_edges(): Edge{node, input_nr} says which node and which of its
// inputs the gradient goes to. An invalid edge (no node) means that forward input needed no grad.
//
// Invariants:
//  1. input_metadata(i) holds the shape and dtype of forward output i; the engine checks every
//     incoming gradient against it.
//  2. sequence_nr() increases with creation on one OS thread, so the ready queue runs later ops
//     first, as PyTorch's CPU ready queue does.
//  3. Destruction is iterative (see Note [Iterative graph destruction]): releasing a 100,000-node
//     chain never recurses 100,000 deep, which a fiber's small stack could not survive.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace dagsim::autograd {

using variable_list = std::vector<Tensor>;

class Node;

struct Edge {
  Edge() = default;
  Edge(std::shared_ptr<Node> function, uint32_t input_nr)
      : function(std::move(function)), input_nr(input_nr) {}
  bool is_valid() const { return function != nullptr; }

  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
};

struct InputMetadata {
  Shape shape;
  Dtype dtype = Dtype::float64;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Computes the gradients of the forward inputs from the gradients of the forward outputs.
  // REQUIRES: grads.size() == num_inputs(); each grad defined and shaped as input_metadata.
  // Returns one tensor per next edge (undefined where the edge is invalid or no grad flows).
  virtual variable_list apply(variable_list&& grads) = 0;

  // PyTorch's class name, e.g. "MulBackward0" becomes "MulBackward" here.
  virtual std::string_view name() const = 0;

  // Frees saved tensors once the graph is not retained; a later apply() must fail with graph_freed.
  virtual void release_variables() {}

  uint64_t sequence_nr() const { return sequence_nr_; }

  // The leaf whose gradient this node accumulates (AccumulateGrad), else nullptr.
  virtual const Tensor* leaf_variable() const { return nullptr; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const Edge& next_edge(size_t i) const { return next_edges_[i]; }
  size_t num_outputs() const { return next_edges_.size(); }
  void add_next_edge(Edge edge) { next_edges_.push_back(std::move(edge)); }

  uint32_t num_inputs() const { return static_cast<uint32_t>(input_metadata_.size()); }
  const InputMetadata& input_metadata(uint32_t i) const { return input_metadata_[i]; }
  // Records forward output `t`'s shape and dtype; returns its input number (its output_nr).
  uint32_t add_input_metadata(const Tensor& t);
  uint32_t add_input_metadata(InputMetadata meta);

  // Tensor hooks on the gradient of input `input_nr`, run before apply() in registration order.
  void add_pre_hook(uint32_t input_nr, TensorHook hook);
  // Runs the tensor hooks on `grads` in place (a hook's defined result replaces the gradient).
  // AccumulateGrad overrides it to run its leaf's hooks, which live on the tensor.
  virtual void call_tensor_pre_hooks(variable_list& grads);
  bool has_pre_hooks() const { return !pre_hooks_.empty(); }

  // Node hooks, run after the node in registration order (PyTorch's Node.register_hook): each sees
  // the node's outputs (its gradients for the next nodes; none for AccumulateGrad) and its inputs
  // (the gradients it got), and may return replacement outputs (an empty list keeps them).
  using PostHook = std::function<variable_list(const variable_list& outputs, const variable_list& inputs)>;
  void add_post_hook(PostHook hook);
  bool has_post_hooks() const { return !post_hooks_.empty(); }
  variable_list call_post_hooks(variable_list outputs, const variable_list& inputs);

 private:
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<InputMetadata> input_metadata_;
  std::vector<std::pair<uint32_t, TensorHook>> pre_hooks_;
  std::vector<PostHook> post_hooks_;
};

// The edge a gradient for `t` should flow along: to its grad_fn, or to its AccumulateGrad if it is
// a leaf that requires grad, or an invalid edge if it needs no grad.
Edge gradient_edge(const Tensor& t);

// True when grad mode is on and any of `inputs` requires grad: the op must record history.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

}  // namespace dagsim::autograd
