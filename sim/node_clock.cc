#include "sim/node_clock.h"

#include <string>

#include "core/base/assert.h"

namespace dagsim::sim {

namespace {
constexpr int64_t kMillion = 1'000'000;
}  // namespace

NodeClock::NodeClock(fibers::VirtualClock& world, Trace& trace, uint32_t node, Duration skew, int64_t drift_ppm)
    : world_(world), trace_(trace), node_(node), skew_(skew), drift_ppm_(drift_ppm) {
  DAGSIM_ASSERT(skew >= Duration{0});
  DAGSIM_ASSERT(drift_ppm > -kMillion && drift_ppm < kMillion);
}

TimePoint NodeClock::to_local(TimePoint world) const {
  if (world == TimePoint::max()) return world;
  const __int128 w = world.ns();
  // Without drift (the common case) the 128-bit division, a libgcc call per timer, is skipped:
  // it would add 0.
  const __int128 local = w + skew_.count() + (drift_ppm_ == 0 ? 0 : (w * drift_ppm_) / kMillion);
  if (local >= static_cast<__int128>(TimePoint::max().ns())) return TimePoint::max();
  return TimePoint{Duration{static_cast<int64_t>(local)}};
}

TimePoint NodeClock::to_world(TimePoint local) const {
  // Far-future deadlines (beyond ~126 years) are as good as never: no overflow near the top.
  if (local.ns() >= (int64_t{1} << 62)) return TimePoint::max();
  const __int128 shifted = static_cast<__int128>(local.ns()) - skew_.count();
  if (shifted <= 0) return TimePoint{};
  // Invert local = w (1 + ppm / 1e6), then step to the first w whose reading reaches `local`
  // (integer division may land one short or one past).
  int64_t w = drift_ppm_ == 0 ? static_cast<int64_t>(shifted)
                              : static_cast<int64_t>((shifted * kMillion) / (kMillion + drift_ppm_));
  while (w > 0 && to_local(TimePoint{Duration{w - 1}}) >= local) --w;
  while (to_local(TimePoint{Duration{w}}) < local) ++w;
  return TimePoint{Duration{w}};
}

TimerId NodeClock::call_at(TimePoint deadline, std::function<void()> fire) {
  return world_.call_at(to_world(deadline), [this, deadline, fire = std::move(fire)]() mutable {
    if (paused_) {
      deferred_.emplace_back(world_.firing_id(), std::move(fire));
      return;
    }
    trace_.record_lazy(world_.now(), node_, TraceKind::timer, static_cast<uint64_t>(deadline.ns()), 0, 0,
                       [deadline] { return "deadline " + std::to_string(deadline.ns()) + " ns (local)"; });
    fire();
  });
}

void NodeClock::cancel(TimerId id) {
  world_.cancel(id);
  for (auto it = deferred_.begin(); it != deferred_.end(); ++it) {
    if (it->first == id) {
      deferred_.erase(it);
      return;
    }
  }
}

void NodeClock::resume() {
  paused_ = false;
  // A fired timer may cancel another deferred one (it only wakes waiters, which run later, but
  // be safe): take them one at a time from the front.
  while (!deferred_.empty()) {
    auto fire = std::move(deferred_.front().second);
    deferred_.erase(deferred_.begin());
    trace_.record(world_.now(), node_, TraceKind::timer, "deferred");
    fire();
  }
}

}  // namespace dagsim::sim
