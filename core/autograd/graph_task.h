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
//  4. Nothing about a pass depends on where its nodes sit in memory: what is keyed by a node's
//     address (NodeMap, NodeSet) answers lookups only and cannot be iterated, so the allocator's
//     order has no way into the order of evaluation, of accumulation or of hooks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/autograd/node.h"
#include "core/base/assert.h"

namespace dagsim::autograd {

// A map keyed by a node's address, for lookups only (invariant 4). Deliberately without begin()
// and end(): code that needs the nodes in some order must keep them in a vector or sort them by
// sequence_nr, never walk a hash of pointers.
template <typename V>
class NodeMap {
  using Map = std::unordered_map<const Node*, V>;

 public:
  // One entry found (or none): its value, and what erase() takes, so a lookup followed by an erase
  // hashes once. It cannot step to other entries.
  class Entry {
   public:
    explicit operator bool() const { return found_; }
    V& operator*() const {
      DAGSIM_ASSERT(found_);
      return it_->second;
    }
    V* operator->() const { return &**this; }

   private:
    friend class NodeMap;
    Entry(typename Map::iterator it, bool found) : it_(it), found_(found) {}
    typename Map::iterator it_;
    bool found_;
  };

  Entry find(const Node* node) {
    auto it = map_.find(node);
    return Entry(it, it != map_.end());
  }
  // The value of `node`, or nullptr.
  const V* find(const Node* node) const {
    auto it = map_.find(node);
    return it == map_.end() ? nullptr : &it->second;
  }
  // The value of `node`, value-initialised on first use.
  V& operator[](const Node* node) { return map_[node]; }
  // REQUIRES: `node` has no value yet.
  V& emplace(const Node* node, V value) {
    auto [it, inserted] = map_.emplace(node, std::move(value));
    DAGSIM_ASSERT_MSG(inserted, "NodeMap::emplace over an existing entry");
    return it->second;
  }
  // REQUIRES: `entry` was found in this map and not erased since.
  void erase(Entry entry) {
    DAGSIM_ASSERT_MSG(entry.found_, "NodeMap::erase of a missing entry");
    map_.erase(entry.it_);
  }
  bool empty() const { return map_.empty(); }
  size_t size() const { return map_.size(); }

 private:
  Map map_;
};

// A set of nodes by address, for membership only (invariant 4).
class NodeSet {
 public:
  // True when `node` was not in the set yet.
  bool insert(const Node* node) { return set_.insert(node).second; }
  bool contains(const Node* node) const { return set_.contains(node); }
  size_t size() const { return set_.size(); }

 private:
  std::unordered_set<const Node*> set_;
};

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
  NodeMap<int> dependencies;
  NodeMap<InputBuffer> not_ready;
  NodeMap<ExecInfo> exec_info;
  variable_list captured;
  LeafCapture leaf_capture;

 private:
  std::vector<ReadyEntry> ready_;  // a heap ordered by sequence_nr
};

}  // namespace dagsim::autograd
