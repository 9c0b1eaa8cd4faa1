#include "scenarios/run/fault_schedule.h"
#include "scenarios/workloads/registry.h"

#include <sstream>

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/prng.h"
#include "scenarios/run/swarm.h"

namespace dagsim::scenarios {

using runtime::TimePoint;

std::string fault_kind_name(FaultSpec::Kind kind) {
  switch (kind) {
    case FaultSpec::Kind::kill: return "kill";
    case FaultSpec::Kind::crash: return "crash";
    case FaultSpec::Kind::restart: return "restart";
    case FaultSpec::Kind::pause: return "pause";
    case FaultSpec::Kind::resume: return "resume";
    case FaultSpec::Kind::partition: return "partition";
    case FaultSpec::Kind::heal: return "heal";
  }
  DAGSIM_UNREACHABLE();
}

namespace {

constexpr uint64_t kFaultStream = 0xfa017;
// Each arrival scans the nodes' fault intervals; past this many a scenario is asking for a
// fault storm the run could not meaningfully judge anyway. The loader already refused any rate
// that expects half this many (RandomFaultSpec::kMaxExpected), so a valid scenario never gets here.
constexpr size_t kMaxRandomFaults = RandomFaultSpec::kMaxArrivals;

// Random faults of one kind: Poisson arrivals at `per_min` over [start, end).
void draw_kind(const Scenario& scenario, const RandomFaultSpec& spec, Prng& random, FaultSpec::Kind kind, double per_min,
               Duration lasts, TimePoint start, TimePoint end,
               std::vector<std::vector<std::pair<TimePoint, TimePoint>>>& busy, std::vector<FaultSpec>& out) {
  if (per_min <= 0) return;
  const double mean_gap_ns = 60e9 / per_min;
  TimePoint t = start;
  size_t arrivals = 0;
  for (;;) {
    // Clamped before the cast, so a vanishing rate saturates instead of overflowing.
    t = t + Duration{static_cast<int64_t>(std::min(random.exponential(mean_gap_ns), 1e18)) + 1};
    if (t >= end) return;
    if (++arrivals > kMaxRandomFaults) {
      throw errors::invalid_scenario(scenario.file + ": random_faults: more than " + std::to_string(kMaxRandomFaults) +
                                     " " + fault_kind_name(kind) + " faults over the run; lower the rate");
    }
    const TimePoint until = t + lasts;
    // Eligible: not excluded, not faulted at any time in [t, until], and under max_concurrent.
    std::vector<uint32_t> eligible;
    uint32_t concurrent = 0;
    for (uint32_t node = 0; node < scenario.cluster.nodes; ++node) {
      bool overlapping = false;
      for (const auto& [b, e] : busy[node]) overlapping |= b <= until && e >= t;
      if (overlapping) ++concurrent;
      const bool excluded = std::find(spec.exclude.begin(), spec.exclude.end(), node) != spec.exclude.end();
      if (!overlapping && !excluded) eligible.push_back(node);
    }
    if (eligible.empty() || concurrent >= spec.max_concurrent) continue;
    const uint32_t node = eligible[random.uniform_u64(eligible.size())];
    busy[node].emplace_back(t, until);
    FaultSpec fault;
    fault.kind = kind;
    fault.at = t.since_epoch;
    fault.node = node;
    fault.until = until.since_epoch;
    if (kind == FaultSpec::Kind::partition) {
      // Cut the node off from every other node, both ways.
      fault.groups = {{node}, {}};
      for (uint32_t other = 0; other < scenario.cluster.nodes; ++other) {
        if (other != node) fault.groups[1].push_back(other);
      }
    }
    out.push_back(std::move(fault));
  }
}

std::vector<std::pair<WorkerId, WorkerId>> blocked_pairs(const FaultSpec& fault) {
  std::vector<std::pair<WorkerId, WorkerId>> blocked;
  if (!fault.groups.empty()) {
    for (size_t g = 0; g < fault.groups.size(); ++g) {
      for (size_t h = 0; h < fault.groups.size(); ++h) {
        if (g == h) continue;
        for (uint32_t a : fault.groups[g]) {
          for (uint32_t b : fault.groups[h]) blocked.emplace_back(a, b);
        }
      }
    }
  } else {
    for (uint32_t a : fault.from) {
      for (uint32_t b : fault.to) blocked.emplace_back(a, b);
    }
  }
  return blocked;
}

}  // namespace

std::vector<FaultSpec> fault_timeline(const Scenario& scenario, uint64_t seed, TimePoint end) {
  std::vector<FaultSpec> faults = scenario.faults;
  RandomFaultSpec spec = scenario.random_faults;
  if (spec.any()) {
    Prng random = Prng(seed).fork(kFaultStream);
    const TimePoint start{spec.start};
    const TimePoint stop = spec.end ? TimePoint{*spec.end} : end;
    if (spec.swarm) {
      // This seed's mix (swarm.h), its rates kept under the loader's bound on expected faults.
      const double window_ms = stop > start ? static_cast<double>((stop - start).count()) / 1e6 : 0;
      const double max_per_min = window_ms > 0 ? RandomFaultSpec::kMaxExpected * 60'000 / window_ms : 0;
      spec = apply_swarm(spec, draw_swarm(scenario, seed), max_per_min);
    }
    // Scheduled faults occupy their nodes too, so a random fault never lands on (or a random
    // restart never undoes) a scheduled one.
    std::vector<std::vector<std::pair<TimePoint, TimePoint>>> busy(scenario.cluster.nodes);
    for (const FaultSpec& f : scenario.faults) {
      // A fault that strikes on a workload event may strike at any time: its nodes are busy throughout.
      const TimePoint from = f.when ? TimePoint{} : TimePoint{f.at};
      const TimePoint to = f.until && !f.when ? TimePoint{*f.until} : std::max(stop, TimePoint{scenario.max_virtual_time});
      if (f.kind == FaultSpec::Kind::partition) {
        for (const auto& group : f.groups) {
          for (uint32_t n : group) busy[n].emplace_back(from, to);
        }
        for (uint32_t n : f.from) busy[n].emplace_back(from, to);
        for (uint32_t n : f.to) busy[n].emplace_back(from, to);
      } else if (f.kind != FaultSpec::Kind::heal) {
        busy[f.node].emplace_back(from, to);
      }
    }
    draw_kind(scenario, spec, random, FaultSpec::Kind::kill, spec.kill_per_min, spec.restart_after, start, stop, busy, faults);
    draw_kind(scenario, spec, random, FaultSpec::Kind::crash, spec.crash_per_min, spec.restart_after, start, stop, busy, faults);
    draw_kind(scenario, spec, random, FaultSpec::Kind::pause, spec.pause_per_min, spec.resume_after, start, stop, busy, faults);
    draw_kind(scenario, spec, random, FaultSpec::Kind::partition, spec.partition_per_min, spec.heal_after, start, stop, busy, faults);
  }
  std::stable_sort(faults.begin(), faults.end(), [](const FaultSpec& a, const FaultSpec& b) { return a.at < b.at; });
  return faults;
}

FaultActions fault_actions(runtime::Cluster& world, const FaultSpec& fault) {
  FaultActions a;
  a.what = "fault " + fault_kind_name(fault.kind);
  const WorkerId node = fault.node;
  switch (fault.kind) {
    case FaultSpec::Kind::kill:
    case FaultSpec::Kind::crash: {
      const bool kill = fault.kind == FaultSpec::Kind::kill;
      a.strike = [&world, node, kill] { kill ? world.kill(node) : world.crash(node); };
      a.end_what = "fault restart";
      a.end = [&world, node] { world.restart(node); };
      break;
    }
    case FaultSpec::Kind::restart:
      a.strike = [&world, node] { world.restart(node); };
      break;
    case FaultSpec::Kind::pause:
      a.strike = [&world, node] { world.pause(node); };
      a.end_what = "fault resume";
      a.end = [&world, node] { world.resume(node); };
      break;
    case FaultSpec::Kind::resume:
      a.strike = [&world, node] { world.resume(node); };
      break;
    case FaultSpec::Kind::partition: {
      // The heal needs the id the partition gets when it happens.
      auto id = std::make_shared<uint64_t>(0);
      a.strike = [&world, id, blocked = blocked_pairs(fault)] { *id = world.partition(blocked); };
      a.end_what = "fault heal";
      a.end = [&world, id] { world.heal(*id); };
      break;
    }
    case FaultSpec::Kind::heal:
      a.strike = [&world] { world.heal_all(); };
      break;
  }
  return a;
}

void install_faults(runtime::Cluster& world, const std::vector<FaultSpec>& faults) {
  for (const FaultSpec& fault : faults) {
    if (fault.when) continue;  // FaultTriggers strikes it when its event comes
    FaultActions a = fault_actions(world, fault);
    world.at(TimePoint{fault.at}, std::move(a.what), std::move(a.strike));
    if (fault.until && a.end) world.at(TimePoint{*fault.until}, std::move(a.end_what), std::move(a.end));
  }
}

nlohmann::json faults_to_json(const Scenario& scenario, const std::vector<FaultSpec>& faults) {
  nlohmann::json out = nlohmann::json::array();
  auto names = [&](const std::vector<uint32_t>& nodes) {
    nlohmann::json list = nlohmann::json::array();
    for (uint32_t n : nodes) list.push_back(scenario.cluster.node_name(n));
    return list;
  };
  for (const FaultSpec& f : faults) {
    nlohmann::json j = {{"kind", fault_kind_name(f.kind)}};
    if (f.when) {
      // When it strikes is known after the run (FaultTriggers::mark adds at_ms then).
      nlohmann::json when = {{"event", std::string(workload_event_name(f.when->event))}, {"at_least", f.when->at_least}};
      if (f.when->node) when["node"] = scenario.cluster.node_name(*f.when->node);
      if (f.when->after > Duration{0}) when["after_ms"] = static_cast<double>(f.when->after.count()) / 1e6;
      j["when"] = std::move(when);
      if (f.until_after) j["until_after_ms"] = static_cast<double>(f.until_after->count()) / 1e6;
    } else {
      j["at_ms"] = static_cast<double>(f.at.count()) / 1e6;
    }
    if (f.kind == FaultSpec::Kind::partition) {
      if (!f.groups.empty()) {
        nlohmann::json groups = nlohmann::json::array();
        for (const auto& g : f.groups) groups.push_back(names(g));
        j["groups"] = groups;
      } else {
        j["from"] = names(f.from);
        j["to"] = names(f.to);
      }
    } else if (f.kind != FaultSpec::Kind::heal) {
      j["node"] = scenario.cluster.node_name(f.node);
    }
    if (f.until) j["until_ms"] = static_cast<double>(f.until->count()) / 1e6;
    if (f.line > 0) j["line"] = f.line;
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

std::string ms_text(double ms) {
  std::ostringstream out;
  out << ms << " ms";
  return out.str();
}

// "worker2 is a member of round 1 or later", from faults_to_json's "when".
std::string trigger_text(const nlohmann::json& when) {
  const std::string event = when.value("event", std::string());
  const std::string node = when.value("node", std::string());
  const uint64_t n = when.value("at_least", uint64_t{0});
  std::string text;
  if (event == "member") {
    text = node + " is a member of a formed round" + (n > 0 ? " (round " + std::to_string(n) + " or later)" : "");
  } else if (event == "step_committed") {
    text = "step " + std::to_string(n) + " is committed";
  } else if (event == "backward") {
    text = "backward pass " + std::to_string(n) + " is in flight on " + node;
  } else if (event == "store_round") {
    text = "the store holds round " + std::to_string(n) + " or later";
  } else {
    text = event;
  }
  if (when.contains("after_ms")) text += ", then " + ms_text(when.value("after_ms", 0.0));
  return text;
}

// "the partition at 12000 ms (line 40)", "the kill of worker2 when step 100 is committed (line 9)"
std::string fault_label(const nlohmann::json& f) {
  std::string label = "the " + f.value("kind", std::string("fault"));
  if (f.contains("node")) label += " of " + f.value("node", std::string());
  label += f.contains("when") ? " when " + trigger_text(f["when"]) : " at " + ms_text(f.value("at_ms", 0.0));
  if (f.contains("line")) label += " (line " + std::to_string(f.value("line", 0)) + ")";
  return label;
}

}  // namespace

std::vector<std::string> faults_that_cannot_fire(const Scenario& scenario) {
  const WorkloadType& type = workload_type(scenario);
  Duration end = scenario.max_virtual_time;
  std::string why = "max_virtual_time_ms";
  if (type.fixed_end != nullptr && type.fixed_end(scenario) < end) {
    end = type.fixed_end(scenario);
    why = "the " + std::string(type.name) + " workload's end";
  }
  std::vector<std::string> out;
  for (const FaultSpec& f : scenario.faults) {
    if (f.when) continue;  // when its event comes is up to the run; the report says whether it did
    const bool never = f.at >= end;
    const bool until_never = !never && f.until && *f.until >= end;
    if (!never && !until_never) continue;
    const double at_ms = static_cast<double>((never ? f.at : *f.until).count()) / 1e6;
    out.push_back(scenario.file + ":" + std::to_string(f.line) + ": the " + fault_kind_name(f.kind) +
                  (never ? "" : (f.kind == FaultSpec::Kind::partition ? "'s heal" : f.kind == FaultSpec::Kind::pause ? "'s resume" : "'s restart")) +
                  " at " + ms_text(at_ms) + " can never happen: the run ends by " +
                  ms_text(static_cast<double>(end.count()) / 1e6) + " (" + why + ")");
  }
  return out;
}

std::vector<std::string> mark_fired_faults(nlohmann::json& faults, runtime::TimePoint end) {
  std::vector<std::string> out;
  if (!faults.is_array()) return out;
  const double end_ms = static_cast<double>(end.ns()) / 1e6;
  for (nlohmann::json& f : faults) {
    const bool fired = f.contains("at_ms") && f.value("at_ms", 0.0) <= end_ms;
    f["fired"] = fired;
    if (!fired) {
      out.push_back(fault_label(f) + " never fired: " +
                    (f.contains("at_ms") ? std::string("the run ended at ") : "its event never came before the run ended at ") +
                    ms_text(end_ms));
      continue;
    }
    if (!f.contains("until_ms")) continue;
    const bool until_fired = f.value("until_ms", 0.0) <= end_ms;
    f["until_fired"] = until_fired;
    if (!until_fired) {
      out.push_back(fault_label(f) + ": its end at " + ms_text(f.value("until_ms", 0.0)) +
                    " never came: the run ended at " + ms_text(end_ms));
    }
  }
  return out;
}

}  // namespace dagsim::scenarios
