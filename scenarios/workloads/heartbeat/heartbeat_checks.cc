// The heartbeat workload's judge (docs/scenarios.md, "Checks"). Each check is a judgement over
// the run's records: the monitor's declarations (on the scenario's clock) against the faults the
// cluster recorded. Bounds are in world time and allow for clock drift: a node's `interval` and the
// monitor's timeout are measured on clocks that run up to clock_drift_max_ppm fast or slow.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/workloads/heartbeat/heartbeat_workload.h"
#include "scenarios/workloads/timeline_text.h"

namespace dagsim::scenarios {

namespace {

using runtime::TimePoint;
using runtime::FaultEvent;

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
// How late a TCP run's fault or heartbeat may be struck or sent by the host's scheduling, for the
// false-suspicion check (judge_declarations).
constexpr Duration kTcpSchedulingSlack = std::chrono::milliseconds(50);

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
  const HeartbeatSpec& hb = scenario.workload.as<HeartbeatSpec>();
  const double drift = static_cast<double>(scenario.cluster.clock_drift_max_ppm) / 1e6;
  Bounds b;
  b.timeout_min = scale(hb.timeout(), 1.0 / (1.0 + drift)) - Duration{2000};
  b.timeout_max = scale(hb.timeout(), 1.0 / (1.0 - drift));
  b.interval_max = scale(hb.interval, 1.0 / (1.0 - drift));
  // The simulator's own formula (capped, never overflowing): every sum below stays far from
  // int64's limit, since kMaxSerialisation and every duration a scenario can hold are < 10^18 ns.
  Duration serialise{0};
  if (scenario.network.bandwidth_bytes_per_s > 0) {
    serialise = runtime::serialisation_time(hb.frame_bytes(), scenario.network.bandwidth_bytes_per_s);
  }
  for (const runtime::LinkModel& link : scenario.network.links) {
    if (link.bandwidth_bytes_per_s && *link.bandwidth_bytes_per_s > 0) {
      serialise = std::max(serialise, runtime::serialisation_time(hb.frame_bytes(), *link.bandwidth_bytes_per_s));
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
std::vector<Interval> disruptions(const std::vector<FaultEvent>& history, uint32_t node, uint32_t monitor, Duration notice,
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
  for (const FaultEvent& e : history) {
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
uint32_t monitor_incarnation_at(const std::vector<FaultEvent>& history, uint32_t monitor, TimePoint t) {
  uint32_t started = 0;
  for (const FaultEvent& e : history) {
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

// The first instant at or after `t` when none of `intervals` is under way.
TimePoint clear_from(const std::vector<Interval>& intervals, TimePoint t) {
  for (bool moved = true; moved;) {
    moved = false;
    for (const Interval& i : intervals) {
      if (i.begin <= t && i.end > t) {
        t = i.end;
        moved = true;
      }
    }
  }
  return t;
}

bool declared_alive_within(const std::vector<Declaration>& declarations, uint32_t node, TimePoint from, TimePoint to) {
  return std::any_of(declarations.begin(), declarations.end(), [&](const Declaration& d) {
    return d.node == node && !d.dead && d.time >= from && d.time <= to;
  });
}

// Up to five violations, described; then a count.
class Violations {
 public:
  void add(const std::string& text) {
    if (++count_ <= 5) text_ << (count_ > 1 ? "; " : "") << text;
  }
  // `result` failed with the violations, if there were any; else passed with `detail` (or "holds").
  CheckResult finish(CheckResult result, std::string detail) const {
    if (count_ > 0) {
      result.passed = false;
      result.detail = counted(count_, "violation") + ": " + text_.str();
    } else {
      result.passed = true;
      result.detail = detail.empty() ? "holds" : std::move(detail);
    }
    return result;
  }

 private:
  int count_ = 0;
  std::ostringstream text_;
};

}  // namespace

// What every check derives from the scenario and the fault history, once.
struct HeartbeatJudge::Analysis {
  Bounds b;
  TimePoint end;
  std::vector<Interval> monitor_out;
  std::vector<std::vector<Interval>> outages;  // by node; the monitor's own is empty
};

HeartbeatJudge::HeartbeatJudge(const Scenario& scenario, const RunRecords& records)
    : scenario_(scenario), records_(records), spec_(scenario.workload.as<HeartbeatSpec>()) {
  DAGSIM_ASSERT(spec_.monitor < scenario.cluster.nodes);
  // Every life of the monitor, in order: incarnations run one after another, so their
  // declarations, concatenated, are in time order.
  for (const NodeRecord* r : records.records_of(spec_.monitor)) {
    const std::string what = scenario.cluster.node_name(spec_.monitor) + "." + std::to_string(r->incarnation);
    if (!r->data.contains("declarations")) continue;  // an incarnation that never ran its main
    for (const nlohmann::json& d : r->data.at("declarations")) {
      const uint32_t node = integer_from_record<uint32_t>(d.at("node"), what + ": declaration node");
      if (node >= scenario.cluster.nodes) throw errors::invalid_records(what + ": declaration of unknown node " + std::to_string(node));
      const TimePoint time{Duration{integer_from_record<int64_t>(d.at("time_ns"), what + ": declaration time_ns")}};
      // The checks do arithmetic on these times: they must lie in the run.
      if (time.ns() < 0 || time > records.end) {
        throw errors::invalid_records(what + ": a declaration at " + std::to_string(time.ns()) + " ns, outside the run");
      }
      declarations_.push_back({time, node, d.at("dead").get<bool>(), r->incarnation});
    }
    heartbeats_received_ += integer_from_record<uint64_t>(r->data.at("heartbeats_received"), what + ": heartbeats_received");
  }
  auto analysis = std::make_shared<Analysis>();
  analysis->b = bounds_of(scenario);
  analysis->end = records.end;
  const uint32_t monitor = spec_.monitor;
  analysis->monitor_out = disruptions(records.fault_history, monitor, monitor, analysis->b.notice, analysis->end);
  analysis->outages.resize(scenario.cluster.nodes);
  for (uint32_t node = 0; node < scenario.cluster.nodes; ++node) {
    if (node != monitor) {
      analysis->outages[node] = disruptions(records.fault_history, node, monitor, analysis->b.notice, analysis->end);
    }
  }
  analysis_ = std::move(analysis);
}

nlohmann::json HeartbeatJudge::results(const ReportOptions&) const {
  nlohmann::json declarations = nlohmann::json::array();
  for (const Declaration& d : declarations_) {
    declarations.push_back({{"time_ms", static_cast<double>(d.time.ns()) / 1e6},
                            {"node", scenario_.cluster.node_name(d.node)},
                            {"declared", d.dead ? "dead" : "alive"},
                            {"monitor_incarnation", d.monitor_incarnation}});
  }
  return {{"heartbeat",
           {{"monitor", scenario_.cluster.node_name(spec_.monitor)},
            {"heartbeats_received", heartbeats_received_},
            {"declarations", std::move(declarations)}}}};
}

CheckResult HeartbeatJudge::declared_dead(const CheckSpec& spec) const { return declared(spec, true); }
CheckResult HeartbeatJudge::never_declared_dead(const CheckSpec& spec) const { return declared(spec, false); }

CheckResult HeartbeatJudge::declared(const CheckSpec& spec, bool want) const {
  Violations violations;
  for (uint32_t node : spec.nodes) {
    const auto first = std::find_if(declarations_.begin(), declarations_.end(),
                                    [&](const Declaration& d) { return d.node == node && d.dead; });
    const bool any = first != declarations_.end();
    if (any == want) continue;
    const std::string name = scenario_.cluster.node_name(node);
    if (want) {
      violations.add(name + " was never declared dead");
      continue;
    }
    // When, by whom, and the fault that explains it, if one does: the last one that struck the
    // node (or a partition) before the declaration. None means a false suspicion.
    char at[32];
    std::snprintf(at, sizeof(at), "%.3f s", static_cast<double>(first->time.ns()) / 1e9);
    std::string text = name + " was declared dead by " + scenario_.cluster.node_name(spec_.monitor) + " at " + at;
    const runtime::FaultEvent* cause = nullptr;
    for (const runtime::FaultEvent& f : records_.fault_history) {
      using Kind = runtime::FaultEvent::Kind;
      if (f.time > first->time) break;
      const bool strikes_node = f.node == node && (f.kind == Kind::kill || f.kind == Kind::crash || f.kind == Kind::pause);
      if (strikes_node || f.kind == Kind::partition) cause = &f;
    }
    if (cause != nullptr) {
      char when[32];
      std::snprintf(when, sizeof(when), "%.3f s", static_cast<double>(cause->time.ns()) / 1e9);
      text += ", after the " + describe_fault(*cause, scenario_.cluster) + " at " + when;
    } else {
      text += " with no fault to explain it (its heartbeats were late)";
    }
    violations.add(text);
  }
  return violations.finish({spec.kind, true, ""}, "");
}

CheckResult HeartbeatJudge::detects_failures(const CheckSpec& spec) const {
  const Bounds& b = analysis_->b;
  const TimePoint end = analysis_->end;
  const uint32_t monitor = spec_.monitor;
  const std::vector<Interval>& monitor_out = analysis_->monitor_out;
  Violations violations;
  int judged = 0, revivals = 0;
  for (uint32_t node = 0; node < scenario_.cluster.nodes; ++node) {
    if (node == monitor) continue;
    const std::vector<Interval>& node_out = analysis_->outages[node];
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
      const uint32_t incarnation = monitor_incarnation_at(records_.fault_history, monitor, due);
      if (!declared_dead_at(declarations_, node, due, incarnation)) {
        std::ostringstream text;
        text << scenario_.cluster.node_name(node) << " " << i.cause << " from " << ms(i.begin) << " ms was not declared dead by "
             << ms(due) << " ms";
        violations.add(text.str());
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
        violations.add(text.str());
      }
    }
  }
  return violations.finish({spec.kind, true, ""},
                           counted(judged, "outage") + " longer than the bound of " + std::to_string(ms(b.detect)) +
                               " ms, each declared in time; " + std::to_string(revivals) +
                               " recovery(ies) declared alive in time");
}

CheckResult HeartbeatJudge::no_false_suspicion(const CheckSpec& spec) const { return judge_declarations(spec, true); }
CheckResult HeartbeatJudge::partition_detected_after_start(const CheckSpec& spec) const {
  return judge_declarations(spec, false);
}

CheckResult HeartbeatJudge::judge_declarations(const CheckSpec& spec, bool false_suspicion) const {
  const Bounds& b = analysis_->b;
  const std::vector<Interval>& monitor_out = analysis_->monitor_out;
  if (!b.slack_holds) {
    std::ostringstream text;
    text << "not applicable: heartbeats may arrive " << ms(b.gap_max) << " ms apart (interval + latency max), "
         << "not less than the timeout of " << ms(b.timeout_min) << " ms";
    return {spec.kind, true, text.str()};
  }
  const Duration min_detect = b.timeout_min - b.gap_max;
  // Over TCP a fault's time is when the launcher's timer struck it and a heartbeat's is when its
  // sender's process ran, both late by however long the host kept them waiting; a declaration that
  // comes that much "too early" after its cause is the host's scheduling, not the detector's
  // suspicion (a busy 2-core CI machine showed 1 to 6 ms). The simulator's times are exact.
  const Duration scheduling = records_.transport == "tcp" ? kTcpSchedulingSlack : Duration{0};
  Violations violations;
  int judged = 0;
  for (const Declaration& d : declarations_) {
    if (!d.dead) continue;
    const std::vector<Interval>& node_out = analysis_->outages[d.node];
    const std::string name = scenario_.cluster.node_name(d.node);
    if (false_suspicion) {
      ++judged;
      // A cause must have begun early enough: heartbeats that stop at `a` still leave an arrival
      // after a - gap, so the monitor cannot time out before a - gap + its shortest timeout.
      if (!overlaps(node_out, d.time - b.lookback, d.time - min_detect + scheduling) &&
          !overlaps(monitor_out, d.time - b.lookback, d.time)) {
        violations.add(name + " declared dead at " + std::to_string(ms(d.time)) +
                       " ms without an outage that could explain it (up and reachable, or cut off too recently)");
        continue;
      }
      // A suspicion that outlives its cause is false too: once the node is up and reachable
      // again, its heartbeats get through and the monitor that declared it must revive it.
      const TimePoint back = clear_from(node_out, d.time);
      const TimePoint revive_by = back + b.revive;
      if (revive_by > analysis_->end || overlaps(monitor_out, d.time - b.lookback, revive_by) ||
          monitor_incarnation_at(records_.fault_history, spec_.monitor, revive_by) != d.monitor_incarnation) {
        continue;  // the run or the monitor ended first
      }
      const bool cut_off_again = std::any_of(node_out.begin(), node_out.end(), [&](const Interval& i) {
        return i.begin > back && i.begin <= revive_by;
      });
      if (!cut_off_again && !declared_alive_within(declarations_, d.node, d.time, revive_by)) {
        violations.add(name + " declared dead at " + std::to_string(ms(d.time)) + " ms was still declared dead at " +
                       std::to_string(ms(revive_by)) + " ms, though up and reachable since " + std::to_string(ms(back)) +
                       " ms");
      }
      continue;
    }
    // partition_detected_after_start: a declaration during a partition comes no sooner than
    // the partition allows, unless something else had already cut the node off.
    for (const Interval& i : node_out) {
      if (!i.partition || d.time < i.begin || d.time > i.end) continue;
      ++judged;
      const bool other_cause =
          overlaps(node_out, d.time - b.lookback, i.begin, &i) || overlaps(monitor_out, d.time - b.lookback, d.time);
      if (d.time < i.begin + min_detect && !other_cause) {
        violations.add(name + " declared dead at " + std::to_string(ms(d.time)) + " ms, only " +
                       std::to_string(ms(d.time - i.begin)) + " ms into its " + i.cause);
      }
    }
  }
  return violations.finish({spec.kind, true, ""}, counted(judged, "declaration") + " judged");
}

}  // namespace dagsim::scenarios
