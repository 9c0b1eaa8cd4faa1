// The heartbeat workload's checks (docs/scenarios.md, "Checks"). Each is a judgement over data
// after the run: the monitor's declarations (with true world time) against the faults the world
// recorded. Bounds are in world time and allow for clock drift: a node's `interval` and the
// monitor's timeout are measured on clocks that run up to clock_drift_max_ppm fast or slow.
#include <algorithm>
#include <map>
#include <sstream>

#include "scenarios/heartbeat_workload.h"

namespace dagsim::scenarios {

namespace {

using runtime::TimePoint;
using sim::FaultEvent;

struct Interval {
  TimePoint begin;
  TimePoint end;
  std::string cause;
  bool partition = false;
  bool connection = false;
};

double ms(TimePoint t) { return static_cast<double>(t.ns()) / 1e6; }
double ms(Duration d) { return static_cast<double>(d.count()) / 1e6; }

Duration scale(Duration d, double factor) { return Duration{static_cast<int64_t>(static_cast<double>(d.count()) * factor) + 1000}; }

// The world-time figures every check derives from the scenario.
struct Bounds {
  Duration timeout_min;   // the monitor's timeout on the fastest clock
  Duration timeout_max;   // ... on the slowest
  Duration interval_max;  // a sender's interval on the slowest clock
  Duration latency_max;   // one-way latency plus serialisation of one heartbeat
  Duration gap_max;       // the longest gap between undisturbed heartbeats' arrivals
  Duration detect;        // a fault is declared at most this long after it began
  Duration lookback;      // a declaration needs a disruption this recently to be justified
  Duration revive;        // a node whose outage ended is declared alive again within this
  Duration notice;        // a failed connection silences its sender at most this long
  bool slack_holds;       // gap_max < timeout_min: undisturbed nodes are never declared dead
};

Bounds bounds_of(const Scenario& scenario) {
  const HeartbeatSpec& hb = *scenario.heartbeat;
  const double drift = static_cast<double>(scenario.cluster.clock_drift_max_ppm) / 1e6;
  Bounds b;
  b.timeout_min = scale(hb.timeout(), 1.0 / (1.0 + drift)) - Duration{2000};
  b.timeout_max = scale(hb.timeout(), 1.0 / (1.0 - drift));
  b.interval_max = scale(hb.interval, 1.0 / (1.0 - drift));
  Duration serialise{0};
  if (scenario.network.bandwidth_bytes_per_s > 0) {
    serialise = Duration{static_cast<int64_t>(hb.message_bytes * 1e9 / scenario.network.bandwidth_bytes_per_s) + 1};
  }
  for (const sim::LinkModel& link : scenario.network.links) {
    if (link.bandwidth_bytes_per_s && *link.bandwidth_bytes_per_s > 0) {
      serialise = std::max(serialise, Duration{static_cast<int64_t>(hb.message_bytes * 1e9 / *link.bandwidth_bytes_per_s) + 1});
    }
  }
  b.latency_max = scenario.network.max_latency() + serialise;
  b.gap_max = b.interval_max + b.latency_max;
  b.detect = b.latency_max + b.timeout_max;
  b.lookback = b.timeout_max + b.gap_max;
  // After an outage ends the next heartbeat leaves within an interval and may wait for one
  // failure notice (a latency) ahead of it on a new connection.
  b.revive = b.interval_max + 2 * b.latency_max;
  // Until the sender learns its connection failed, its heartbeats are lost: about a latency, or
  // the connection timeout when a partition keeps the reset from reaching it.
  b.notice = scenario.network.connection_timeout + b.gap_max;
  b.slack_holds = b.gap_max < b.timeout_min;
  return b;
}

// When the path from `node` to the monitor was disrupted, from the world's fault history: the
// node down or paused, a partition blocking node -> monitor, a failed connection between them
// (whose heartbeats are lost until the sender learns of it). `monitor_side` gives the monitor's
// own outages instead, which disrupt every node's path.
std::vector<Interval> disruptions(const sim::SimWorld& world, uint32_t node, uint32_t monitor, Duration notice,
                                  TimePoint end) {
  std::vector<Interval> out;
  std::optional<TimePoint> down_since, paused_since;
  std::map<uint64_t, TimePoint> partitions;  // id -> begin, for partitions blocking node -> monitor
  auto close_partition = [&](uint64_t id, TimePoint t) {
    auto it = partitions.find(id);
    if (it == partitions.end()) return;
    out.push_back({it->second, t, "partition #" + std::to_string(id), true, false});
    partitions.erase(it);
  };
  for (const FaultEvent& e : world.fault_history()) {
    switch (e.kind) {
      case FaultEvent::Kind::kill:
      case FaultEvent::Kind::crash:
        if (e.node == node && !down_since) down_since = e.time;
        if (e.node == node && paused_since) {  // a dead process is no longer paused
          out.push_back({*paused_since, e.time, "paused", false, false});
          paused_since.reset();
        }
        break;
      case FaultEvent::Kind::start:
      case FaultEvent::Kind::restart:
        if (e.node == node && down_since) {
          out.push_back({*down_since, e.time, "down", false, false});
          down_since.reset();
        }
        if (e.node == node && e.kind == FaultEvent::Kind::restart) {
          // A restart of a live node is a kill and a start in one instant.
          out.push_back({e.time, e.time, "restart", false, false});
        }
        break;
      case FaultEvent::Kind::pause:
        if (e.node == node && !paused_since) paused_since = e.time;
        break;
      case FaultEvent::Kind::resume:
        if (e.node == node && paused_since) {
          out.push_back({*paused_since, e.time, "paused", false, false});
          paused_since.reset();
        }
        break;
      case FaultEvent::Kind::partition:
        for (const auto& [from, to] : e.blocked) {
          if (from == node && to == monitor) partitions.emplace(e.partition, e.time);
        }
        break;
      case FaultEvent::Kind::heal:
        if (e.partition == 0) {
          while (!partitions.empty()) close_partition(partitions.begin()->first, e.time);
        } else {
          close_partition(e.partition, e.time);
        }
        break;
      case FaultEvent::Kind::connection_failed:
        if ((e.node == node && e.peer == monitor) || (e.node == monitor && e.peer == node)) {
          out.push_back({e.time, e.time + notice, "connection failure", false, true});
        }
        break;
    }
  }
  if (down_since) out.push_back({*down_since, end, "down", false, false});
  if (paused_since) out.push_back({*paused_since, end, "paused", false, false});
  for (const auto& [id, begin] : partitions) out.push_back({begin, end, "partition #" + std::to_string(id), true, false});
  std::sort(out.begin(), out.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  return out;
}

bool overlaps(const std::vector<Interval>& intervals, TimePoint begin, TimePoint end, const Interval* except = nullptr) {
  for (const Interval& i : intervals) {
    if (&i == except) continue;
    if (i.begin <= end && i.end >= begin) return true;
  }
  return false;
}

// Which incarnation of the monitor was running at `t` (each start or restart begins one).
uint32_t monitor_incarnation_at(const sim::SimWorld& world, uint32_t monitor, TimePoint t) {
  uint32_t started = 0;
  for (const FaultEvent& e : world.fault_history()) {
    if (e.time > t) break;
    if (e.node == monitor && (e.kind == FaultEvent::Kind::start || e.kind == FaultEvent::Kind::restart)) ++started;
  }
  return started == 0 ? 0 : started - 1;
}

// Whether `node` stood declared dead at `t` by the monitor incarnation running then (a restarted
// monitor starts from scratch: its predecessor's verdicts do not count).
bool declared_dead_at(const std::vector<Declaration>& declarations, uint32_t node, TimePoint t, uint32_t incarnation) {
  bool dead = false;
  for (const Declaration& d : declarations) {
    if (d.time > t) break;
    if (d.node == node && d.monitor_incarnation == incarnation) dead = d.dead;
  }
  return dead;
}

bool declared_alive_within(const std::vector<Declaration>& declarations, uint32_t node, TimePoint from, TimePoint to) {
  return std::any_of(declarations.begin(), declarations.end(), [&](const Declaration& d) {
    return d.node == node && !d.dead && d.time >= from && d.time <= to;
  });
}

}  // namespace

CheckResult HeartbeatWorkload::check(const CheckSpec& spec, const sim::SimWorld& world) const {
  const Bounds b = bounds_of(scenario_);
  const TimePoint end = world.now();
  const uint32_t monitor = spec_.monitor;
  const std::vector<Interval> monitor_out = disruptions(world, monitor, monitor, b.notice, end);
  // Each node's outages, once: the checks below consult them per outage and per declaration.
  std::vector<std::vector<Interval>> outages(scenario_.cluster.nodes);
  for (uint32_t node = 0; node < scenario_.cluster.nodes; ++node) {
    if (node != monitor) outages[node] = disruptions(world, node, monitor, b.notice, end);
  }
  std::ostringstream problems;
  int violations = 0;
  auto violation = [&](const std::string& text) {
    if (++violations <= 5) problems << (violations > 1 ? "; " : "") << text;
  };
  CheckResult result{spec.kind, true, ""};

  if (spec.kind == "declared_dead" || spec.kind == "never_declared_dead") {
    const bool want = spec.kind == "declared_dead";
    for (uint32_t node : spec.nodes) {
      const bool any = std::any_of(declarations_.begin(), declarations_.end(),
                                   [&](const Declaration& d) { return d.node == node && d.dead; });
      if (any != want) {
        violation(scenario_.cluster.node_name(node) + (want ? " was never declared dead" : " was declared dead"));
      }
    }
  } else if (spec.kind == "detects_failures") {
    int judged = 0, revivals = 0;
    for (uint32_t node = 0; node < scenario_.cluster.nodes; ++node) {
      if (node == monitor) continue;
      const std::vector<Interval>& node_out = outages[node];
      for (const Interval& i : node_out) {
        if (i.connection) continue;
        // Heartbeats a live (paused) node sent into a partition, or that were in flight when one
        // began, are released when it heals: the last may arrive then, not within a latency of
        // the outage's start.
        TimePoint last_sent = i.begin;
        for (const Interval& p : node_out) {
          if (p.partition && p.begin <= i.begin + b.latency_max && p.end > i.begin && p.end < i.end) {
            last_sent = std::max(last_sent, p.end);
          }
        }
        const TimePoint due = last_sent + b.detect;
        if (i.end <= due || due > end) continue;  // too short to be detected, or the run ended first
        if (overlaps(monitor_out, i.begin - b.lookback, due)) continue;  // the monitor was out itself
        ++judged;
        const uint32_t incarnation = monitor_incarnation_at(world, monitor, due);
        if (!declared_dead_at(declarations_, node, due, incarnation)) {
          std::ostringstream text;
          text << scenario_.cluster.node_name(node) << " " << i.cause << " from " << ms(i.begin) << " ms was not declared dead by "
               << ms(due) << " ms";
          violation(text.str());
          continue;
        }
        // Recovery: once the outage ends, the node's heartbeats get through again and it must be
        // declared alive, unless something else cuts it off meanwhile. (A connection reset at the
        // very instant it ends, as a restart causes, only delays the first heartbeat.)
        const TimePoint back = i.end;
        const TimePoint revive_by = back + b.revive;
        if (revive_by > end || overlaps(monitor_out, i.begin - b.lookback, revive_by)) continue;
        bool other = false;
        for (const Interval& o : node_out) {
          if (&o == &i || (o.connection && o.begin == back)) continue;
          other |= o.begin <= revive_by && o.end > back;
        }
        if (other) continue;
        ++revivals;
        if (!declared_alive_within(declarations_, node, back, revive_by)) {
          std::ostringstream text;
          text << scenario_.cluster.node_name(node) << " was back at " << ms(back) << " ms but not declared alive by "
               << ms(revive_by) << " ms";
          violation(text.str());
        }
      }
    }
    result.detail = std::to_string(judged) + " outage(s) longer than the bound of " + std::to_string(ms(b.detect)) +
                    " ms, each declared in time; " + std::to_string(revivals) + " recovery(ies) declared alive in time";
  } else if (spec.kind == "no_false_suspicion" || spec.kind == "partition_detected_after_start") {
    if (!b.slack_holds) {
      std::ostringstream text;
      text << "not applicable: heartbeats may arrive " << ms(b.gap_max) << " ms apart (interval + latency max), "
           << "not less than the timeout of " << ms(b.timeout_min) << " ms";
      return {spec.kind, true, text.str()};
    }
    const Duration min_detect = b.timeout_min - b.gap_max;
    int judged = 0;
    for (const Declaration& d : declarations_) {
      if (!d.dead) continue;
      const std::vector<Interval>& node_out = outages[d.node];
      const std::string name = scenario_.cluster.node_name(d.node);
      if (spec.kind == "no_false_suspicion") {
        ++judged;
        // A cause must have begun early enough: heartbeats that stop at `a` still leave an arrival
        // after a - gap, so the monitor cannot time out before a - gap + its shortest timeout.
        if (!overlaps(node_out, d.time - b.lookback, d.time - min_detect) &&
            !overlaps(monitor_out, d.time - b.lookback, d.time)) {
          violation(name + " declared dead at " + std::to_string(ms(d.time)) +
                    " ms without an outage that could explain it (up and reachable, or cut off too recently)");
        }
        continue;
      }
      // partition_detected_after_start: a declaration during a partition comes no sooner than
      // the partition allows, unless something else had already cut the node off.
      for (const Interval& i : node_out) {
        if (!i.partition || d.time < i.begin || d.time > i.end) continue;
        ++judged;
        const bool other_cause = overlaps(node_out, d.time - b.lookback, i.begin, &i) ||
                                 overlaps(monitor_out, d.time - b.lookback, d.time);
        if (d.time < i.begin + min_detect && !other_cause) {
          violation(name + " declared dead at " + std::to_string(ms(d.time)) + " ms, only " +
                    std::to_string(ms(d.time - i.begin)) + " ms into its " + i.cause);
        }
      }
    }
    result.detail = std::to_string(judged) + " declaration(s) judged";
  } else {
    return {spec.kind, false, "unknown check kind for the heartbeat workload"};
  }
  if (violations > 0) {
    result.passed = false;
    result.detail = std::to_string(violations) + " violation(s): " + problems.str();
  } else if (result.detail.empty()) {
    result.detail = "holds";
  }
  return result;
}

}  // namespace dagsim::scenarios
