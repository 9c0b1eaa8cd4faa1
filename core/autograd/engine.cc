#include "core/autograd/engine.h"

#include <optional>

#include "core/tensor/device_guard.h"

#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

namespace dagsim::autograd {

namespace {

// The synthetic node a pass starts from; it returns the root gradients (PyTorch's GraphRoot).
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> edges, variable_list grads) : grads_(std::move(grads)) {
    for (Edge& edge : edges) add_next_edge(std::move(edge));
  }
  variable_list apply(variable_list&&) override { return grads_; }
  std::string_view name() const override { return "GraphRoot"; }

 private:
  variable_list grads_;
};

// Checks one gradient a node produced against the metadata of the input it flows into, and sums
// it down when it arrives broadcast (as PyTorch's validate_outputs does).
Tensor validate_output(const Node& fn, size_t index, const Edge& edge, Tensor grad) {
  const InputMetadata& meta = edge.function->input_metadata(edge.input_nr);
  if (grad.dtype() != meta.dtype) {
    throw errors::autograd_error("Function " + std::string(fn.name()) +
                                 " returned an invalid gradient at index " + std::to_string(index) +
                                 " - expected dtype " + std::string(dtype_name(meta.dtype)) +
                                 " but got " + std::string(dtype_name(grad.dtype())));
  }
  if (grad.device() != meta.device) {
    // As PyTorch's validate_outputs: a 0-dim gradient moves, any other is the formula's bug.
    if (grad.dim() != 0) {
      throw errors::autograd_error("Function " + std::string(fn.name()) + " returned an invalid gradient at index " +
                                   std::to_string(index) + " - expected device " + meta.device.str() + " but got " +
                                   grad.device().str());
    }
    grad = to_device(grad, meta.device);
  }
  if (grad.shape() == meta.shape) return grad;
  try {
    NoGradGuard no_grad;
    return sum_to(grad, meta.shape);
  } catch (const Error&) {
    throw errors::autograd_error("Function " + std::string(fn.name()) +
                                 " returned an invalid gradient at index " + std::to_string(index) +
                                 " - got " + shape_str(grad.shape()) +
                                 " but expected shape compatible with " + shape_str(meta.shape));
  }
}

}  // namespace

std::pair<std::vector<Edge>, variable_list> Engine::validate_roots(const variable_list& roots,
                                                                   const variable_list& grads) {
  if (roots.empty()) {
    throw errors::autograd_error("No tensors provided for gradient computation.");
  }
  if (!grads.empty() && grads.size() != roots.size()) {
    throw errors::autograd_error("got " + std::to_string(roots.size()) + " tensors and " +
                                 std::to_string(grads.size()) + " gradients");
  }
  std::vector<Edge> edges;
  variable_list root_grads;
  edges.reserve(roots.size());
  root_grads.reserve(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    const std::string element = "element " + std::to_string(i) + " of tensors";
    if (!root.defined()) throw errors::autograd_error(element + " is undefined");
    if (!root.requires_grad()) {
      throw errors::autograd_error(element + " does not require grad and does not have a grad_fn");
    }
    Tensor grad = i < grads.size() ? grads[i] : Tensor();
    if (!grad.defined()) {
      if (root.numel() != 1) {
        throw errors::autograd_error("grad can be implicitly created only for scalar outputs (" +
                                     element + " has shape " + shape_str(root.shape()) + ")");
      }
      grad = ones(root.shape(), root.dtype());
    } else if (grad.shape() != root.shape()) {
      throw errors::autograd_error("Mismatch in shape: grad_output[" + std::to_string(i) +
                                   "] has a shape of " + shape_str(grad.shape()) + " and output[" +
                                   std::to_string(i) + "] has a shape of " + shape_str(root.shape()) + ".");
    } else if (grad.dtype() != root.dtype()) {
      throw errors::autograd_error("Mismatch in dtype: grad_output[" + std::to_string(i) + "] is " +
                                   std::string(dtype_name(grad.dtype())) + " and output[" +
                                   std::to_string(i) + "] is " + std::string(dtype_name(root.dtype())) + ".");
    }
    edges.push_back(gradient_edge(root));
    root_grads.push_back(std::move(grad));
  }
  return {std::move(edges), std::move(root_grads)};
}

std::shared_ptr<Node> Engine::make_graph_root(std::vector<Edge> edges, variable_list grads) {
  return std::make_shared<GraphRoot>(std::move(edges), std::move(grads));
}

void Engine::compute_dependencies(GraphTask& task, const std::vector<Node*>& roots) {
  // The walk starts from the roots in the order given and follows each node's edges in order, so
  // its order is a function of the graph and the caller, never of addresses (graph_task.h,
  // invariant 4). The counts come out the same in any order; the order is fixed anyway, so that
  // nothing added to the walk later (a limit, a trace of it) can see the allocator's order.
  NodeSet root_set;
  std::vector<Node*> stack;
  for (Node* root : roots) {
    DAGSIM_ASSERT(root != nullptr);
    if (root_set.insert(root)) stack.push_back(root);
  }
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const Edge& edge : fn->next_edges()) {
      Node* next = edge.function.get();
      if (next == nullptr) continue;
      // The count doubles as the "seen" mark: a node's first edge is its first visit (roots
      // were visited at the start).
      if (++task.dependencies[next] == 1 && !root_set.contains(next)) stack.push_back(next);
    }
  }
}

void Engine::init_exec_info(GraphTask& task, Node* graph_root, const std::vector<Edge>& outputs,
                            bool accumulate) {
  task.captured.assign(outputs.size(), Tensor());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& edge = outputs[i];
    DAGSIM_ASSERT(edge.is_valid());
    GraphTask::ExecInfo& info = task.exec_info[edge.function.get()];
    if (accumulate && edge.function->leaf_variable() != nullptr) {
      info.needed = true;
    } else {
      info.captures.push_back({edge.input_nr, i});
    }
  }
  // Post-order walk: a node is needed when one of its next nodes is needed or captures.
  struct Frame {
    Node* node;
    size_t next_child;
  };
  NodeSet visited;
  visited.insert(graph_root);
  std::vector<Frame> stack{{graph_root, 0}};
  while (!stack.empty()) {
    Frame& frame = stack.back();
    if (frame.next_child < frame.node->num_outputs()) {
      Node* child = frame.node->next_edge(frame.next_child++).function.get();
      if (child != nullptr && visited.insert(child)) stack.push_back({child, 0});
      continue;
    }
    Node* node = frame.node;
    stack.pop_back();
    bool needed = false;
    for (const Edge& edge : node->next_edges()) {
      if (!edge.is_valid()) continue;
      const auto info = task.exec_info.find(edge.function.get());
      if (info && (info->needed || !info->captures.empty())) {
        needed = true;
        break;
      }
    }
    if (needed) task.exec_info[node].needed = true;
  }
}

namespace {
// The one device the defined gradients are on, or nullopt where there are none or they differ
// (a recv node of an rpc that returned tensors of two devices: each formula then guards itself).
std::optional<Device> common_device(const variable_list& grads) {
  std::optional<Device> device;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    if (!device) {
      device = g.device();
    } else if (*device != g.device()) {
      return std::nullopt;
    }
  }
  return device;
}
}  // namespace

void Engine::evaluate(GraphTask& task, NodeTask node_task) {
  Node* fn = node_task.node.get();
  variable_list inputs = node_task.inputs.release();
  fn->call_tensor_pre_hooks(inputs);

  if (!task.exec_info.empty()) {
    const auto info = task.exec_info.find(fn);
    if (!info) return;
    for (const GraphTask::Capture& capture : info->captures) {
      task.captured[capture.output_index] = inputs[capture.input_nr];
    }
    if (!info->needed) return;
  }

  // Node hooks see what went in; only a node that has them pays for the copy (which also keeps a
  // leaf's gradient from being stolen: the hooks may still hold it).
  const variable_list hook_inputs = fn->has_post_hooks() ? inputs : variable_list{};
  if (const Tensor* leaf = fn->leaf_variable(); leaf != nullptr && task.leaf_capture) {
    // Distributed autograd's capture of a leaf (PyTorch's DistAccumulateGradCaptureHook): pre-hooks
    // ran, the gradient goes to the context, then the node's hooks run.
    if (inputs[0].defined()) task.leaf_capture(*leaf, std::move(inputs[0]));
    if (fn->has_post_hooks()) fn->call_post_hooks({}, hook_inputs);
    return;
  }

  variable_list outputs;
  if (const std::optional<Device> device = common_device(inputs); device && !device->is_cpu()) {
    // As PyTorch's engine runs a node on its inputs' device and stream: what the backward
    // formula allocates lands there. Its gradients came from the same stream, in order, so the
    // guard reads none of them (and holds none: a leaf may still steal its gradient's buffer).
    DeviceGuard on_device("backward", inputs);
    on_device.forget_reads();
    outputs = fn->apply(std::move(inputs));
  } else {
    outputs = fn->apply(std::move(inputs));
  }
  if (fn->has_post_hooks()) outputs = fn->call_post_hooks(std::move(outputs), hook_inputs);
  if (!task.keep_graph) fn->release_variables();
  if (outputs.size() != fn->num_outputs()) {
    throw errors::autograd_error("Function " + std::string(fn->name()) + " returned " +
                                 std::to_string(outputs.size()) + " gradients, expected " +
                                 std::to_string(fn->num_outputs()));
  }

  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& edge = fn->next_edge(i);
    if (!edge.is_valid()) continue;
    Node* next = edge.function.get();
    const auto dependencies = task.dependencies.find(next);
    DAGSIM_ASSERT_MSG(dependencies, "dependency not found for a next node");
    DAGSIM_ASSERT(*dependencies > 0);
    const bool is_ready = --*dependencies == 0;
    if (is_ready) task.dependencies.erase(dependencies);

    Tensor grad = outputs[i].defined() ? validate_output(*fn, i, edge, std::move(outputs[i])) : Tensor();
    const auto pending = task.not_ready.find(next);
    if (!pending) {
      InputBuffer buffer(next->num_inputs());
      buffer.add(edge.input_nr, std::move(grad));
      if (is_ready) {
        task.push_ready(NodeTask{edge.function, std::move(buffer)});
      } else {
        task.not_ready.emplace(next, std::move(buffer));
      }
    } else {
      pending->add(edge.input_nr, std::move(grad));
      if (is_ready) {
        task.push_ready(NodeTask{edge.function, std::move(*pending)});
        task.not_ready.erase(pending);
      }
    }
  }
}

void Engine::run(GraphTask& task) {
  while (task.has_ready()) evaluate(task, task.pop_ready());
}

namespace {

// The shared body of backward() and grad().
variable_list execute(const variable_list& roots, const variable_list& grads, bool retain_graph,
                      const variable_list& inputs, bool accumulate) {
  auto [edges, root_grads] = Engine::validate_roots(roots, grads);
  std::vector<Edge> output_edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    if (!input.defined() || !input.requires_grad()) {
      throw errors::autograd_error("One of the differentiated Tensors (input " + std::to_string(i) +
                                   ") does not require grad");
    }
    output_edges.push_back(gradient_edge(input));
  }
  std::shared_ptr<Node> graph_root = Engine::make_graph_root(std::move(edges), std::move(root_grads));
  GraphTask task(retain_graph);
  Engine::compute_dependencies(task, {graph_root.get()});
  if (!output_edges.empty()) Engine::init_exec_info(task, graph_root.get(), output_edges, accumulate);
  task.push_ready(NodeTask{graph_root, InputBuffer(0)});
  Engine::run(task);
  return std::move(task.captured);
}

}  // namespace

void Engine::backward(const variable_list& roots, const variable_list& grads, bool retain_graph,
                      const variable_list& inputs) {
  variable_list captured = execute(roots, grads, retain_graph, inputs, /*accumulate=*/true);
  // Non-leaf inputs were captured at their grad_fn; give them a .grad as PyTorch does.
  for (size_t i = 0; i < captured.size(); ++i) {
    if (!captured[i].defined() || inputs[i].is_leaf()) continue;
    Tensor grad = inputs[i].grad();
    {
      NoGradGuard no_grad;
      grad = grad.defined() ? add(grad, captured[i]) : clone(captured[i]);
    }
    inputs[i].set_grad(grad);
  }
}

variable_list Engine::grad(const variable_list& roots, const variable_list& inputs,
                           const variable_list& grads, bool retain_graph, bool allow_unused) {
  if (inputs.empty()) throw errors::autograd_error("grad requires non-empty inputs.");
  variable_list captured = execute(roots, grads, retain_graph, inputs, /*accumulate=*/false);
  for (size_t i = 0; i < captured.size(); ++i) {
    if (!captured[i].defined() && !allow_unused) {
      throw errors::autograd_error(
          "One of the differentiated Tensors (input " + std::to_string(i) +
          ") appears to not have been used in the graph. Set allow_unused=true if this is the "
          "desired behavior.");
    }
  }
  return captured;
}

}  // namespace dagsim::autograd
