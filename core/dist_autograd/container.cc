#include "core/dist_autograd/container.h"

#include "core/base/error.h"
#include "core/base/fiber_local.h"

#include <algorithm>

namespace dagsim::dist_autograd {

namespace {
FiberLocal<std::optional<ContextId>>& current() {
  static FiberLocal<std::optional<ContextId>> slot;
  return slot;
}
FiberLocal<std::string>& current_label() {
  static FiberLocal<std::string> slot;
  return slot;
}
}  // namespace

CallLabelScope::CallLabelScope(std::string label) : previous_(current_label().get()) {
  current_label().get() = std::move(label);
}
CallLabelScope::~CallLabelScope() { current_label().get() = std::move(previous_); }
const std::string& CallLabelScope::current() { return current_label().get(); }

DistAutogradContainer::DistAutogradContainer(WorkerId worker, uint32_t incarnation)
    : ids_(worker, static_cast<uint16_t>(incarnation)), message_ids_(worker, static_cast<uint16_t>(incarnation)) {
  DAGSIM_ASSERT_MSG(incarnation <= UINT16_MAX, "ids carry 16 bits of a node's incarnation");
}

DistAutogradContext& DistAutogradContainer::new_context() {
  // PyTorch's newContext: contexts do not nest on one thread (here, one fiber).
  if (const std::optional<ContextId> current = current_context_id()) {
    throw errors::invalid_argument("Already have an autograd context id for this thread (context " +
                                   std::to_string(*current) + " is current on this fiber).");
  }
  const auto id = static_cast<ContextId>(ids_.next());
  auto [it, inserted] = contexts_.emplace(id, std::make_shared<DistAutogradContext>(id));
  DAGSIM_ASSERT(inserted);
  // Paired with DistAutograd::serve_call: only this node makes contexts with its own worker id.
  DAGSIM_ASSERT_EQ(worker_of(static_cast<uint64_t>(id)), ids_.worker());
  return *it->second;
}

DistAutogradContext& DistAutogradContainer::get_or_create_context(ContextId id) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) it = contexts_.emplace(id, std::make_shared<DistAutogradContext>(id)).first;
  DAGSIM_ASSERT(it->second != nullptr && it->second->context_id() == id);
  return *it->second;
}

DistAutogradContext& DistAutogradContainer::retrieve_context(ContextId id) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) {
    throw errors::invalid_argument("Could not find autograd context with id: " + std::to_string(id));
  }
  DAGSIM_ASSERT(it->second != nullptr && it->second->context_id() == id);
  return *it->second;
}

std::shared_ptr<DistAutogradContext> DistAutogradContainer::share_context(ContextId id) {
  retrieve_context(id);  // throws with PyTorch's text when unknown
  std::shared_ptr<DistAutogradContext> shared = contexts_.at(id);
  DAGSIM_ASSERT(shared.use_count() >= 2);  // ours and the container's: a release cannot free it under us
  return shared;
}

std::vector<ContextId> DistAutogradContainer::contexts_created_by(WorkerId worker) const {
  std::vector<ContextId> out;
  for (const auto& [id, context] : contexts_) {
    if (worker_of(static_cast<uint64_t>(id)) == worker) out.push_back(id);
  }
  DAGSIM_ASSERT(std::is_sorted(out.begin(), out.end()));  // the promised id order
  return out;
}

std::set<WorkerId> DistAutogradContainer::release_context(ContextId id) {
  std::optional<std::set<WorkerId>> workers = release_context_if_present(id);
  if (!workers) throw errors::invalid_argument("Could not find autograd context with id: " + std::to_string(id));
  DAGSIM_ASSERT(!has_context(id));
  return *workers;
}

std::optional<std::set<WorkerId>> DistAutogradContainer::release_context_if_present(ContextId id) {
  auto it = contexts_.find(id);
  if (it == contexts_.end()) return std::nullopt;
  std::set<WorkerId> workers = it->second->known_worker_ids();
  contexts_.erase(it);
  if (current_context_id() == id) set_current_context_id(std::nullopt);
  // Negative space: gone from the map and from the releasing fiber's current context.
  DAGSIM_ASSERT(contexts_.count(id) == 0 && current_context_id() != id);
  return workers;
}

std::vector<ContextId> DistAutogradContainer::context_ids() const {
  std::vector<ContextId> ids;
  for (const auto& [id, context] : contexts_) ids.push_back(id);
  DAGSIM_ASSERT_EQ(ids.size(), contexts_.size());
  return ids;
}

std::optional<ContextId> DistAutogradContainer::current_context_id() { return current().get(); }
void DistAutogradContainer::set_current_context_id(std::optional<ContextId> id) {
  current().get() = id;
  DAGSIM_ASSERT(current().get() == id);  // fiber-local: read back on the same fiber
}

DistAutogradContext& DistAutogradContainer::current_context() {
  const std::optional<ContextId> id = current_context_id();
  if (!id) {
    throw errors::invalid_argument(
        "Current thread doesn't have a valid autograd context. Please wrap your code using: `with "
        "torch.distributed.autograd.context() as context_id` to generate a valid context");
  }
  DistAutogradContext& context = retrieve_context(*id);
  DAGSIM_ASSERT(context.context_id() == *id);
  return context;
}

ContextScope::ContextScope(std::optional<ContextId> id) : previous_(DistAutogradContainer::current_context_id()) {
  DistAutogradContainer::set_current_context_id(id);
  DAGSIM_ASSERT(DistAutogradContainer::current_context_id() == id);
}

ContextScope::~ContextScope() {
  DistAutogradContainer::set_current_context_id(previous_);
  DAGSIM_ASSERT(DistAutogradContainer::current_context_id() == previous_);
}

}  // namespace dagsim::dist_autograd
