// ProcessNode: one node incarnation living in this process, the TCP runtime's counterpart of a
// simulator node: its fibers (NodeFibers), its Spawner, its Random and its Env, over the process's
// Clock and Transport. `dagsim node` runs one; benchmarks and tests run one per process too.
//
// wait_on_main: how the process's main context (not a node fiber) waits for a condition while the
// node's fibers and the I/O loop run: it polls `done` every `poll` with a clock timer and an
// untimed Boost.Fiber wait, so no Boost timed wait ever reads the clock.
//
// Threading: everything on the one thread that runs the process's IoScheduler.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/base/prng.h"
#include "core/fibers/node_fibers.h"
#include "core/runtime/env.h"

namespace dagsim::net {

class ProcessNode final : public runtime::Spawner {
 public:
  // `random`'s stream is forked from `seed` by the node's id and incarnation.
  ProcessNode(std::string name, WorkerId id, uint32_t incarnation, uint64_t seed, runtime::Clock& clock,
              runtime::Transport& transport, runtime::Log& log, fibers::NodeFibers::OnFailure on_failure);

  runtime::Env& env() { return env_; }
  fibers::NodeFibers& fibers() { return fibers_; }
  size_t live() const { return live_; }

  void spawn_in(std::shared_ptr<runtime::ScopeState> scope, std::string name, std::function<void()> fn) override;
  const std::shared_ptr<runtime::ScopeState>& lifetime() const override { return fibers_.lifetime(); }

  // Kills the node (every wait unwinds with node_killed) and waits until its fibers are gone;
  // false if some fiber did not unwind within `limit` (a bug in that fiber: describe() names it).
  bool kill_and_join(runtime::Duration limit);

 private:
  std::string name_;
  runtime::Random random_;
  runtime::Env env_;
  size_t live_ = 0;
  fibers::NodeFibers fibers_;
};

// Waits on the main context until `done()` holds or `deadline` passes (false then).
bool wait_on_main(runtime::Clock& clock, const std::function<bool()>& done, runtime::TimePoint deadline,
                  runtime::Duration poll = std::chrono::milliseconds(1));

}  // namespace dagsim::net
