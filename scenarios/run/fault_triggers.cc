// FaultTriggers (fault_triggers.h).
#include "scenarios/run/fault_triggers.h"

#include "core/base/assert.h"
#include "scenarios/run/fault_schedule.h"

namespace dagsim::scenarios {

using runtime::TimePoint;

FaultTriggers::FaultTriggers(const std::vector<FaultSpec>& faults) {
  for (size_t i = 0; i < faults.size(); ++i) {
    if (faults[i].when) waiting_.push_back({i, faults[i], false, std::nullopt});
  }
}

bool FaultTriggers::wants(WorkloadEvent event) const {
  for (const Waiting& w : waiting_) {
    if (!w.armed && w.fault.when->event == event) return true;
  }
  return false;
}

std::vector<FaultTriggers::Strike> FaultTriggers::observe(runtime::Cluster& cluster, WorkerId node, WorkloadEvent event,
                                                          uint64_t value) {
  std::vector<Strike> due;
  for (Waiting& w : waiting_) {
    const FaultTrigger& t = *w.fault.when;
    if (w.armed || t.event != event || (t.node && *t.node != node) || value < t.at_least) continue;
    w.armed = true;
    FaultActions a = fault_actions(cluster, w.fault);
    const std::optional<runtime::Duration> lasts = w.fault.until_after;
    // The Waiting entries never move once built (waiting_ is not resized after construction).
    Waiting* entry = &w;
    std::function<void()> strike = [&cluster, entry, lasts, strike = std::move(a.strike), end_what = a.end_what, end = a.end] {
      entry->struck = cluster.now();
      strike();
      if (lasts && end) cluster.at(cluster.now() + *lasts, end_what, end);
    };
    if (t.after == runtime::Duration{0}) {
      due.push_back({std::move(a.what), std::move(strike)});
    } else {
      cluster.at(cluster.now() + t.after, std::move(a.what), std::move(strike));
    }
  }
  return due;
}

void FaultTriggers::mark(nlohmann::json& faults) const {
  DAGSIM_ASSERT(faults.is_array());
  for (const Waiting& w : waiting_) {
    DAGSIM_ASSERT(w.index < faults.size());
    nlohmann::json& f = faults[w.index];
    if (!w.struck) continue;
    f["at_ms"] = static_cast<double>(w.struck->ns()) / 1e6;
    // The end it was due at, whether or not the run lasted until then (mark_fired_faults says).
    if (w.fault.until_after) f["until_ms"] = static_cast<double>((*w.struck + *w.fault.until_after).ns()) / 1e6;
  }
}

}  // namespace dagsim::scenarios
