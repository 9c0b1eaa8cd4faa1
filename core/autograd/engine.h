// Engine: the local autograd engine, with PyTorch's semantics (torch.autograd.backward and
// torch.autograd.grad), built from pieces the distributed engine reuses.
//
// A pass: compute_dependencies() counts, from the roots, how many edges lead into each node;
// nodes whose counts drop to zero go to the GraphTask's ready queue; run() pops and evaluates
// them until the queue is empty. Everything is iterative (no recursion in the graph's depth) and
// runs on the calling fiber: the engine starts no threads or fibers of its own, so the
// distributed engine can interleave it with network work and push more ready tasks between runs.
#pragma once

#include <vector>

#include "core/autograd/graph_task.h"
#include "core/autograd/node.h"

namespace dagsim::autograd {

class Engine {
 public:
  // torch.autograd.backward. `grads[i]` may be undefined for a scalar root (a one is implied).
  // With `inputs` non-empty, only gradients for those tensors are accumulated and only nodes on a
  // path to them run. Throws autograd_error (bad roots), graph_freed, modified_by_inplace, or
  // whatever a backward function throws.
  static void backward(const variable_list& roots, const variable_list& grads = {},
                       bool retain_graph = false, const variable_list& inputs = {});

  // torch.autograd.grad: returns d(roots)/d(inputs) without touching .grad. With allow_unused, an
  // input the roots do not depend on gets an undefined tensor; otherwise that is an error.
  static variable_list grad(const variable_list& roots, const variable_list& inputs,
                            const variable_list& grads = {}, bool retain_graph = false,
                            bool allow_unused = false);

  // Building blocks for the distributed engine -------------------------------------------------

  // Validates roots and gradients as torch does and returns the root edges with their gradients
  // (implicit ones for scalar roots). Throws autograd_error with PyTorch's messages.
  static std::pair<std::vector<Edge>, variable_list> validate_roots(const variable_list& roots,
                                                                    const variable_list& grads);

  // A node that starts a pass: it has the roots as next edges and returns their gradients.
  static std::shared_ptr<Node> make_graph_root(std::vector<Edge> edges, variable_list grads);

  // Counts dependencies of every node reachable from `roots` into task.dependencies.
  static void compute_dependencies(GraphTask& task, const std::vector<Node*>& roots);

  // Marks the nodes that lead to `outputs` as needed and registers captures (invariant 2 of
  // graph_task.h). `accumulate`: leaves among outputs run their AccumulateGrad (backward with
  // inputs=...) rather than being captured (grad()).
  static void init_exec_info(GraphTask& task, Node* graph_root, const std::vector<Edge>& outputs,
                             bool accumulate);

  // Runs one ready node: hooks, captures, apply (or the leaf capture), then hands its outputs to
  // the next nodes, queueing those that become ready.
  static void evaluate(GraphTask& task, NodeTask node_task);

  // Evaluates ready nodes until none is left.
  static void run(GraphTask& task);
};

}  // namespace dagsim::autograd
