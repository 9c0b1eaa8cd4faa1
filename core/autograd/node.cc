#include "core/autograd/node.h"

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/grad_mode.h"

namespace dagsim::autograd {

namespace {
// Per OS thread, like PyTorch's sequence numbers; all of a simulated world runs on one thread, so
// the numbering follows the deterministic schedule.
thread_local uint64_t next_sequence_nr = 0;
}  // namespace

Node::Node() : sequence_nr_(next_sequence_nr++) {}

// Note [Iterative graph destruction]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Destroying a node drops its edges, which may destroy the next node, and so on: a chain of N ops
// would recurse N deep. Instead, a node whose only owner is the edge being dropped has its own
// edges stolen onto an explicit stack before it dies, so every destructor below runs with no edges
// left. Saved tensors hold no grad_fn (saved_tensor.h), so they cannot start a chain either.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  for (Edge& edge : next_edges_) {
    if (edge.function) stack.push_back(std::move(edge.function));
  }
  next_edges_.clear();
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    if (node.use_count() == 1) {
      for (Edge& edge : node->next_edges_) {
        if (edge.function) stack.push_back(std::move(edge.function));
      }
      node->next_edges_.clear();
    }
    // `node` dies here with no edges when we held the last reference.
  }
}

uint32_t Node::add_input_metadata(const Tensor& t) {
  return add_input_metadata(InputMetadata{t.shape(), t.dtype(), t.device()});
}

uint32_t Node::add_input_metadata(InputMetadata meta) {
  input_metadata_.push_back(std::move(meta));
  return static_cast<uint32_t>(input_metadata_.size() - 1);
}

void Node::add_pre_hook(uint32_t input_nr, TensorHook hook) {
  DAGSIM_ASSERT(input_nr < num_inputs());
  pre_hooks_.emplace_back(input_nr, std::move(hook));
}

void Node::call_tensor_pre_hooks(variable_list& grads) {
  for (auto& [input_nr, hook] : pre_hooks_) {
    Tensor replaced = hook(grads[input_nr]);
    if (replaced.defined()) grads[input_nr] = std::move(replaced);
  }
}

void Node::add_post_hook(PostHook hook) {
  DAGSIM_ASSERT(hook != nullptr);
  post_hooks_.push_back(std::move(hook));
}

variable_list Node::call_post_hooks(variable_list outputs, const variable_list& inputs) {
  for (const PostHook& hook : post_hooks_) {
    variable_list replaced = hook(outputs, inputs);
    if (replaced.empty()) continue;
    if (replaced.size() != outputs.size()) {
      throw errors::autograd_error("a hook of " + std::string(name()) + " returned " + std::to_string(replaced.size()) +
                                   " gradients for " + std::to_string(outputs.size()));
    }
    outputs = std::move(replaced);
  }
  return outputs;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return Edge();
  if (t.grad_fn()) return Edge(t.grad_fn(), t.output_nr());
  return Edge(t.grad_accumulator(), 0);
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

}  // namespace dagsim::autograd
