// DistAutogradContainer: a node's distributed-autograd contexts (PyTorch's
// DistAutogradContainer, one per node rather than per process) and the id generators.
//
// Context ids and autograd message ids are globally unique: worker_id << 48 | counter, with the
// node's incarnation in the counter's high bits, so a restarted node never reuses an id. The
// current context is per fiber, as PyTorch's is per thread (an RPC handler runs with its
// caller's context; a continuation restores it).
#pragma once

#include <map>
#include <memory>
#include <optional>

#include "core/dist_autograd/context.h"

namespace dagsim::dist_autograd {

class DistAutogradContainer {
 public:
  DistAutogradContainer(WorkerId worker, uint32_t incarnation);
  DistAutogradContainer(const DistAutogradContainer&) = delete;
  DistAutogradContainer& operator=(const DistAutogradContainer&) = delete;

  WorkerId worker_id() const { return ids_.worker(); }

  // A new context with a fresh id (the caller usually makes it current).
  DistAutogradContext& new_context();
  // The context, created if this node has not seen it (a receiver of a forward message).
  DistAutogradContext& get_or_create_context(ContextId id);
  // Throws invalid_argument "Could not find autograd context with id: X".
  DistAutogradContext& retrieve_context(ContextId id);
  // The same, shared (for a pass that must outlive a release).
  std::shared_ptr<DistAutogradContext> share_context(ContextId id);
  bool has_context(ContextId id) const { return contexts_.count(id) != 0; }
  // Erases the context; throws invalid_argument for an unknown id. Returns the workers a release
  // must notify (the context's known workers).
  std::set<WorkerId> release_context(ContextId id);
  // The same, but a no-op (nullopt) when the context is already gone (a cleanup message that
  // arrives twice, or after a local release).
  std::optional<std::set<WorkerId>> release_context_if_present(ContextId id);

  MessageId new_autograd_message_id() {
    const auto id = static_cast<MessageId>(message_ids_.next());
    DAGSIM_ASSERT(worker_of(static_cast<uint64_t>(id)) == worker_id());  // globally unique: ours
    return id;
  }
  size_t num_contexts() const { return contexts_.size(); }
  std::vector<ContextId> context_ids() const;
  // Contexts whose id was made by `worker` (their originator), in id order.
  std::vector<ContextId> contexts_created_by(WorkerId worker) const;

  // The running fiber's current context id (nullopt: none), as PyTorch's thread-local one.
  static std::optional<ContextId> current_context_id();
  static void set_current_context_id(std::optional<ContextId> id);
  // Throws invalid_argument with PyTorch's text when the fiber has no current context.
  DistAutogradContext& current_context();

 private:
  IdGenerator ids_;
  IdGenerator message_ids_;
  // Shared: a backward pass keeps its context alive if the context is released meanwhile.
  std::map<ContextId, std::shared_ptr<DistAutogradContext>> contexts_;
};

// Makes `id` the fiber's current context for a scope and restores the previous one after (an
// RPC handler running in its caller's context, a continuation resuming one).
// Names the RPCs the running fiber makes for a scope (a program statement's output), so a
// backward that fails can say which call's result never received gradients.
class CallLabelScope {
 public:
  explicit CallLabelScope(std::string label);
  ~CallLabelScope();
  CallLabelScope(const CallLabelScope&) = delete;
  CallLabelScope& operator=(const CallLabelScope&) = delete;
  static const std::string& current();

 private:
  std::string previous_;
};

class ContextScope {
 public:
  explicit ContextScope(std::optional<ContextId> id);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  std::optional<ContextId> previous_;
};

}  // namespace dagsim::dist_autograd
