// Spawner: starts fibers that belong to one node (the third part of the Env seam).
//
// A spawned fiber gets the node's FiberContext (its Clock, its lifetime), so the node's death
// cancels its waits. The entry point catches everything: node_killed ends the fiber quietly, any
// other exception is reported to the node (an exception never escapes a fiber, where Boost would
// call std::terminate).
#pragma once

#include <functional>
#include <string>

namespace dagsim::runtime {

class Spawner {
 public:
  virtual ~Spawner() = default;
  // Starts `fn` on a new fiber of this node. It runs when the scheduler next picks it, never
  // inline. Throws node_killed when the node is dead.
  virtual void spawn(std::string name, std::function<void()> fn) = 0;
};

}  // namespace dagsim::runtime
