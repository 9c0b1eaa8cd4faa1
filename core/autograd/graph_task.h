// GraphTask: the state of one backward pass (PyTorch's GraphTask), kept apart from the Engine so
// the distributed engine can build one, feed it work from the network while it runs, and read
// what it captured.
//
// Invariants:
//  1. dependencies[n] counts the edges into n from nodes that have not run yet in this pass; n is
//     ready exactly when it reaches 0, and its InputBuffer then moves from not_ready to ready.
//  2. With exec_info empty every reachable node runs; otherwise only nodes marked needed run
//     (those on a path to a requested input), and captures read gradients at their inputs.
//  3. The ready queue pops the node with the highest sequence_nr first, so later ops' backward
//     runs first, as in PyTorch's CPU ready queue; the order is a function of the graph alone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/autograd/node.h"

namespace dagsim::autograd {

// Gradients collected for one node's inputs, summed when several edges deliver to one input.
class InputBuffer {
 public:
  explicit InputBuffer(size_t size) : buffer_(size) {}
  // Adds `grad` into slot `pos` (out of place: earlier grads may be held elsewhere).
  void add(size_t pos, Tensor grad);
  variable_list release() { return std::move(buffer_); }
  size_t size() const { return buffer_.size(); }

 private:
  variable_list buffer_;
};

struct NodeTask {
  std::shared_ptr<Node> node;
  InputBuffer inputs;
};

// Called instead of AccumulateGrad when set: the distributed engine accumulates leaf gradients
// into the autograd context, never into .grad.
using LeafCapture = std::function<void(const Tensor& leaf, Tensor grad)>;

class GraphTask {
 public:
  explicit GraphTask(bool keep_graph) : keep_graph(keep_graph) {}

  struct Capture {
    uint32_t input_nr;
    size_t output_index;  // into captured
  };
  struct ExecInfo {
    bool needed = false;
    std::vector<Capture> captures;
  };

  // Queues a node whose inputs are complete.
  void push_ready(NodeTask task);
  bool has_ready() const { return !ready_.empty(); }
  NodeTask pop_ready();

  // True when `node` should run in this pass (invariant 2).
  bool should_execute(Node* node) const;

  struct ReadyEntry {
    uint64_t sequence_nr;
    NodeTask task;
  };

  const bool keep_graph;
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, InputBuffer> not_ready;
  std::unordered_map<Node*, ExecInfo> exec_info;
  variable_list captured;
  LeafCapture leaf_capture;

 private:
  std::vector<ReadyEntry> ready_;  // a heap ordered by sequence_nr
};

}  // namespace dagsim::autograd
