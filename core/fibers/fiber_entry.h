// run_fiber_body: the entry point every runtime's Spawner wraps around a node fiber's function.
//
// It installs the fiber's context, runs the function, and catches everything: node_killed or
// `cancelled` (the node died or the fiber's scope was cancelled: it unwound as intended) ends
// quietly, any other exception becomes a failure text for the runtime to report against the node. An exception never escapes a fiber, where
// Boost would call std::terminate and take the whole simulated world with it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/runtime/fiber_context.h"

namespace dagsim::fibers {

// Returns the failure's text, or nullopt when `fn` returned or its node was killed. `fn` is
// destroyed before the context is uninstalled, so captures that block or log in their
// destructors still find their node.
std::optional<std::string> run_fiber_body(runtime::FiberContext& context, std::function<void()>& fn);

}  // namespace dagsim::fibers
