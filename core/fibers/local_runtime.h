// LocalRuntime: the plain in-process runtime. Every node's fibers run on the calling OS thread
// under the DeterministicScheduler, with a virtual clock that jumps to the next timer when every
// fiber is blocked, and a zero-latency loopback transport. Each node's fibers are a NodeFibers,
// the plumbing SimWorld shares. Unit tests of core code use it; the simulator (sim/) adds
// latency, faults and tracing on the same principles.
//
// Promises: the same inputs give the same interleaving and the same virtual times; run() always
// returns (every fiber finished, the time limit passed, or a deadlock with a report naming each
// blocked fiber and what it waits on); destruction kills every node and joins every fiber.
// At most one LocalRuntime runs per thread at a time.
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fibers/scheduler.h"
#include "core/fibers/virtual_clock.h"
#include "core/runtime/env.h"
#include "core/runtime/future.h"

namespace dagsim::fibers {

using runtime::Bytes;
using runtime::Env;
using runtime::Promise;
using runtime::TimePoint;

struct LocalRuntimeOptions {
  uint64_t seed = 1;
  // Seeded random picks among ready fibers instead of FIFO.
  bool random_schedule = false;
  // Fiber stacks: protected (a guard page turns an overflow into a crash, not corruption).
  size_t stack_bytes = 256 * 1024;
};

struct FiberFailure {
  std::string node;
  std::string fiber;
  std::string what;
};

class LocalRuntime {
 public:
  enum class Outcome { finished, time_limit, deadlock };

  explicit LocalRuntime(LocalRuntimeOptions options = {});
  ~LocalRuntime();
  LocalRuntime(const LocalRuntime&) = delete;
  LocalRuntime& operator=(const LocalRuntime&) = delete;

  // Adds a node (ids are dense, from 0) and returns its Env.
  Env& add_node(std::string name);
  Env& env(WorkerId node);
  // Gives `node` GPUs (core/tensor/device.h): the fibers it starts from now on see them. `devices`
  // must outlive the runtime.
  void set_devices(WorkerId node, const DeviceSet* devices);
  size_t num_nodes() const { return nodes_.size(); }

  // Process death: the node's fibers unwind with node_killed at their blocking point, its
  // spawner refuses new fibers, and nodes that send to it are told peer_failed.
  void kill(WorkerId node);
  bool is_alive(WorkerId node) const;

  // Runs until every fiber has finished, virtual time would pass `until`, or a deadlock.
  Outcome run(TimePoint until = TimePoint::max());

  TimePoint now() const { return clock_.now(); }
  size_t live_fibers() const { return live_fibers_; }
  // Exceptions other than node_killed that ended a fiber, in the order they happened.
  const std::vector<FiberFailure>& failures() const { return failures_; }
  // One line per live fiber: its node, its name and what it waits on.
  std::string stuck_report() const;

  // Runs `fn` on a fiber of `node` until the whole runtime is idle and returns its result,
  // rethrowing its exception. Fails the calling test with the stuck report on deadlock.
  template <typename F>
  auto run_on(WorkerId node, F&& fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    auto promise = std::make_shared<Promise<R>>();
    runtime::Future<R> result = promise->get_future();
    env(node).spawner.spawn("run_on", [promise, fn = std::forward<F>(fn)]() mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          fn();
          promise->set_value();
        } else {
          promise->set_value(fn());
        }
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
    run();
    if (!result.is_ready()) {
      throw errors::internal_error("run_on: the fiber never finished; blocked fibers:\n" + stuck_report());
    }
    if constexpr (std::is_void_v<R>) {
      result.get();
    } else {
      return result.get();
    }
  }

 private:
  class Node;
  class NodeSpawner;
  class LoopbackTransport;

  void deliver(WorkerId source, WorkerId target, Bytes payload, uint64_t padding);
  // Asserts that every live fiber is blocked in a runtime primitive (none in a Boost timed wait).
  void check_quiescent() const;

  LocalRuntimeOptions options_;
  DeterministicScheduler& scheduler_;
  VirtualClock clock_;
  std::vector<std::unique_ptr<Node>> nodes_;
  size_t live_fibers_ = 0;
  std::vector<FiberFailure> failures_;
};

}  // namespace dagsim::fibers
