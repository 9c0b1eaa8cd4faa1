// NodeClock: one simulated node's view of virtual time, with that host's clock skew and drift.
//
// A node reads local time = world time + skew + world time × drift (ppm), as a real host's clock
// is offset from and runs slightly faster or slower than true time. Timers are armed on the
// world's VirtualClock at the first world instant whose local reading reaches the deadline, so a
// node with a fast clock fires its timeouts early in true time, as a real one would.
//
// While the node is paused its timers do not fire: they are deferred, in firing order, until
// resume (a stopped process runs no code). Each firing is traced.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "core/fibers/virtual_clock.h"
#include "sim/trace.h"

namespace dagsim::sim {

using runtime::Duration;
using runtime::TimePoint;
using runtime::TimerId;

class NodeClock final : public runtime::Clock {
 public:
  NodeClock(fibers::VirtualClock& world, Trace& trace, uint32_t node, Duration skew, int64_t drift_ppm);

  // The host's clock: world time with this node's skew and drift. A simulated host has one
  // oscillator, so its monotonic and wall readings agree; code must still take the right one
  // (clock.h, Note [two times]), as they differ on a real host.
  TimePoint now() const override { return to_local(world_.now()); }
  TimePoint wall_now() const override { return to_local(world_.now()); }
  TimerId call_at(TimePoint deadline, std::function<void()> fire) override;
  void cancel(TimerId id) override;

  TimePoint to_local(TimePoint world) const;
  // The first world instant whose local reading is at or after `local`.
  TimePoint to_world(TimePoint local) const;

  Duration skew() const { return skew_; }
  int64_t drift_ppm() const { return drift_ppm_; }

  void pause() { paused_ = true; }
  // Fires, in order, every timer that came due while paused.
  void resume();
  // Forgets deferred timers and unpauses (the process died; its waits are unwinding, and the
  // next incarnation starts with a running clock).
  void reset() {
    deferred_.clear();
    paused_ = false;
  }

 private:
  fibers::VirtualClock& world_;
  Trace& trace_;
  uint32_t node_;
  Duration skew_;
  int64_t drift_ppm_;
  bool paused_ = false;
  std::vector<std::pair<TimerId, std::function<void()>>> deferred_;
};

}  // namespace dagsim::sim
