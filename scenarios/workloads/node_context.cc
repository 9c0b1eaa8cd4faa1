// NodeContext (node_context.h): the one context class of both runtimes.
#include "scenarios/workloads/node_context.h"

namespace dagsim::scenarios {

NodeContext::NodeContext(NodeRuntime& runtime, runtime::Env& env, nlohmann::json& record)
    : runtime_(runtime), env_(env), record_(record) {}

void NodeContext::spawn_foreground(std::string name, std::function<void()> fn) {
  runtime_.spawn_foreground(env_.self, std::move(name), std::move(fn));
}

void NodeContext::report(WorkloadEvent event, uint64_t value) { runtime_.report(env_.self, event, value); }

OutsideWorld& NodeContext::outside_world() {
  OutsideWorld* world = runtime_.outside_world();
  if (world == nullptr) throw errors::invalid_argument(kNoOutsideWorld);
  return *world;
}

void NodeContext::run_at_end() {
  // Taken out first: a hook that registers another must not invalidate the loop.
  const std::vector<std::function<void()>> hooks = std::move(at_end_);
  at_end_.clear();
  for (const auto& fn : hooks) fn();
}

}  // namespace dagsim::scenarios
