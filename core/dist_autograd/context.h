// DistAutogradContext: one distributed backward's state on one node (PyTorch's
// DistAutogradContext): the send and recv functions recorded by RPCs in this context, keyed by
// their autograd message id; the workers this node exchanged autograd messages with (whom a
// release must reach); and the gradients accumulated for this node's leaves, which live here and
// never in the tensors' own .grad.
//
// Gradients are kept in the order their leaves first received one, so get_gradients() (and
// anything printed from it) never depends on pointer values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/autograd/node.h"
#include "core/base/ids.h"

namespace dagsim::dist_autograd {

using ContextId = int64_t;
using MessageId = int64_t;

class DistAutogradContext {
 public:
  explicit DistAutogradContext(ContextId id) : id_(id) {}
  DistAutogradContext(const DistAutogradContext&) = delete;
  DistAutogradContext& operator=(const DistAutogradContext&) = delete;

  ContextId context_id() const { return id_; }

  void add_send_function(MessageId id, std::shared_ptr<autograd::Node> send);
  void add_recv_function(MessageId id, std::shared_ptr<autograd::Node> recv);
  // Throws invalid_argument "Could not find send function for autograd message id: X".
  std::shared_ptr<autograd::Node> retrieve_send_function(MessageId id) const;
  const std::map<MessageId, std::shared_ptr<autograd::Node>>& send_functions() const { return sends_; }
  const std::map<MessageId, std::shared_ptr<autograd::Node>>& recv_functions() const { return recvs_; }

  // What made a send function, for error messages (a program statement's output name).
  void set_send_label(MessageId id, std::string label) {
    DAGSIM_ASSERT_MSG(!label.empty(), "an empty label names nothing");
    labels_[id] = std::move(label);
  }
  // "label (autograd message id N)", or "autograd message id N" without a label.
  std::string describe_send(MessageId id) const;

  // Gradient messages of this context (backward requests and their replies) this node sent and
  // received: termination detection's counts (termination.h).
  void note_gradient_message_sent() {
    ++gradient_messages_sent_;
    DAGSIM_ASSERT(gradient_messages_sent_ != 0);  // a wrapped count would fake a balance
  }
  void note_gradient_message_received() {
    ++gradient_messages_received_;
    DAGSIM_ASSERT(gradient_messages_received_ != 0);
  }
  uint64_t gradient_messages_sent() const { return gradient_messages_sent_; }
  uint64_t gradient_messages_received() const { return gradient_messages_received_; }
  // Passes of this context that ran to the end on this node.
  void note_pass_completed() { ++passes_completed_; }
  uint64_t passes_completed() const { return passes_completed_; }

  // SMART mode: marks send function `id` as needed by the pass whose discovery is `token` (a newer
  // token forgets older marks); true when it was not marked yet.
  bool mark_needed(uint64_t token, MessageId id) {
    DAGSIM_ASSERT(token != 0);
    if (token != smart_token_) {
      smart_token_ = token;
      needed_.clear();
    }
    return needed_.insert(id).second;
  }
  bool is_needed(uint64_t token, MessageId id) const { return token == smart_token_ && needed_.count(id) == 1; }

  void add_known_worker_id(WorkerId worker) { known_workers_.insert(worker); }
  const std::set<WorkerId>& known_worker_ids() const { return known_workers_; }

  // Adds `grad` to `variable`'s gradient in this context. The first one is stolen when nothing
  // else holds it (PyTorch's test_no_grad_copy), else stored as a copy, so later accumulation never
  // writes into a tensor someone else sees.
  void accumulate_grad(const Tensor& variable, Tensor grad);
  // The (leaf, gradient) pairs, in the order the leaves first got a gradient: a copy of the list,
  // the gradients themselves (PyTorch's get_gradients copies the dict, not the tensors).
  std::vector<std::pair<Tensor, Tensor>> gradients() const;
  // This context's gradient for `variable`; undefined if it has none.
  Tensor gradient_of(const Tensor& variable) const;

 private:
  ContextId id_;
  std::map<MessageId, std::shared_ptr<autograd::Node>> sends_;
  std::map<MessageId, std::shared_ptr<autograd::Node>> recvs_;
  std::set<WorkerId> known_workers_;
  std::map<MessageId, std::string> labels_;
  uint64_t gradient_messages_sent_ = 0;
  uint64_t gradient_messages_received_ = 0;
  uint64_t passes_completed_ = 0;
  uint64_t smart_token_ = 0;
  std::set<MessageId> needed_;  // SMART mode: the send functions pass smart_token_ runs
  std::vector<std::pair<Tensor, Tensor>> grads_;                // insertion order
  std::unordered_map<const void*, size_t> grad_index_;          // leaf identity -> index; lookup only
};

}  // namespace dagsim::dist_autograd
