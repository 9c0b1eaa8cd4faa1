// The checker's liveness half, L1-L6, and check_invariants (rendezvous_invariants.h).
#include <algorithm>
#include <map>
#include <set>

#include "core/rendezvous/rendezvous_state_holder.h"
#include "scenarios/workloads/rendezvous/rendezvous_invariants.h"

namespace dagsim::scenarios {

namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;
using FaultKind = runtime::FaultEvent::Kind;

std::string name(const NodeDesc& node) { return rendezvous::to_string(node); }

bool holds(const RendezvousState& s, const NodeDesc& node) {
  return s.participants.contains(node) || s.wait_list.contains(node) || s.redundancy_list.contains(node);
}

std::string ms(TimePoint t) { return std::to_string(t.ns() / 1'000'000) + " ms"; }

class Liveness {
 public:
  Liveness(const RendezvousSpec& spec, const CheckerBounds& bounds, const RendezvousHistory& history, const RunFacts& facts)
      : spec_(spec), b_(bounds), history_(history), facts_(facts), outages_(outages(facts.faults)) {}

  std::vector<Violation> run() {
    calls_end();
    for (const StoreLife& life : history_.store) {
      rounds_complete(life);
      close_fails_joiners(life);
      waiting_restarts(life);
    }
    dead_nodes_leave();
    return std::move(out_);
  }

 private:
  void add(std::string invariant, const StoreLife* life, uint64_t round, std::vector<std::string> nodes, std::string text) {
    out_.push_back({std::move(invariant),
                    life ? "store life " + std::to_string(life->incarnation) + ", round " + std::to_string(round) : "",
                    std::move(nodes), std::move(text)});
  }

  // A partition from its start to its heal, a pause to its resume (open-ended if the run ended
  // first): a fault that began before a window and still holds in it disturbs the window too.
  struct Outage {
    TimePoint from, to;
    std::optional<uint32_t> node;  // a pause's node; nullopt for a partition
  };
  static std::vector<Outage> outages(const std::vector<runtime::FaultEvent>& faults) {
    std::vector<Outage> out;
    std::map<uint64_t, size_t> open_partitions;  // id -> index in out
    std::map<uint32_t, size_t> open_pauses;
    constexpr TimePoint kNever{Duration::max()};
    for (const runtime::FaultEvent& f : faults) {
      if (f.kind == FaultKind::partition) {
        open_partitions[f.partition] = out.size();
        out.push_back({f.time, kNever, std::nullopt});
      } else if (f.kind == FaultKind::heal) {
        for (auto it = open_partitions.begin(); it != open_partitions.end();) {
          if (f.partition != 0 && it->first != f.partition) {
            ++it;
            continue;
          }
          out[it->second].to = f.time;
          it = open_partitions.erase(it);
        }
      } else if (f.kind == FaultKind::pause) {
        open_pauses[f.node] = out.size();
        out.push_back({f.time, kNever, f.node});
      } else if ((f.kind == FaultKind::resume || f.kind == FaultKind::kill || f.kind == FaultKind::crash) &&
                 open_pauses.contains(f.node)) {
        out[open_pauses[f.node]].to = f.time;
        open_pauses.erase(f.node);
      }
    }
    return out;
  }

  // No fault in [a - slack, b] and no outage overlapping it, other than those of `except` (a node
  // whose own death is judged).
  bool quiet(TimePoint a, TimePoint b, std::optional<uint32_t> except = std::nullopt) const {
    for (const runtime::FaultEvent& f : facts_.faults) {
      if (f.kind == FaultKind::start && f.time == TimePoint{}) continue;
      if (except && f.node == *except && f.kind != FaultKind::partition && f.kind != FaultKind::heal &&
          f.kind != FaultKind::connection_failed) {
        continue;
      }
      if (f.time >= a - b_.slack && f.time <= b) return false;
    }
    for (const Outage& o : outages_) {
      if (except && o.node == except) continue;
      if (o.from <= b && o.to >= a - b_.slack) return false;
    }
    return true;
  }

  // When the agent stopped taking part: its death, or the end of its shutdown, leave or failure.
  static TimePoint stopped(const AgentLife& a) {
    TimePoint t = a.died.value_or(TimePoint::max());
    for (const AgentEvent& e : a.events) {
      if (e.end && (e.op == "leave" || e.op == "shutdown" || !e.error.empty())) t = std::min(t, *e.end);
    }
    return t;
  }
  bool active_through(const NodeDesc& node, TimePoint t) const {
    const AgentLife* a = history_.agent(node);
    return a != nullptr && stopped(*a) > t;
  }
  // The window a liveness bound needs: inside the run and before the agents' scheduled end.
  bool judgeable(TimePoint bound) const { return bound <= facts_.end && bound < TimePoint{spec_.duration}; }
  Duration race(size_t nodes) const { return static_cast<int64_t>(nodes) * b_.round_trip * 2; }

  // L3: every call returns; joins time out within their bounds.
  void calls_end() {
    if (facts_.outcome != "finished") {
      add("L3", nullptr, 0, {}, "the run did not finish (" + facts_.outcome + "): " + facts_.stuck_report.substr(0, 400));
    }
    const Duration join = spec_.settings.timeout.join;
    for (const AgentLife& a : history_.agents) {
      for (const AgentEvent& e : a.events) {
        if (!e.end) {
          if (!a.died && facts_.outcome == "finished") add("L3", nullptr, 0, {name(a.desc)}, e.op + " never returned");
          continue;
        }
        if (e.op != "next_rendezvous") continue;
        const Duration took = *e.end - e.start;
        if (e.error == "rendezvous_timeout" && took < join - join * b_.drift - std::chrono::milliseconds(1)) {
          add("L3", nullptr, 0, {name(a.desc)}, "timed out after " + rendezvous::describe(took) + ", before its join timeout " +
                                                   rendezvous::describe(join));
        }
        bool spare = false;
        for (const StoreLife& life : history_.store) {
          for (const Commit& c : life.commits) {
            if (c.state && c.t >= e.start && c.t <= *e.end && c.state->redundancy_list.contains(a.desc)) spare = true;
          }
        }
        const Duration limit = b_.slow(join) + b_.slow(rendezvous::kRollbackPeriod) + b_.slack;
        if (!spare && took > limit && quiet(e.start, *e.end)) {
          add("L3", nullptr, 0, {name(a.desc)}, "next_rendezvous took " + rendezvous::describe(took) + ", past its join timeout " +
                                                   rendezvous::describe(join) + " and the rollback period");
        }
        if (e.error == "rendezvous_timeout") spare_timed_out(a, e);
      }
    }
  }

  // L3's last clause: a spare that stayed on the redundancy list of a full round from its first
  // appearance there to the end of its call cannot have timed out. (One that left the list, by its
  // own step or because its heartbeat expired, has had its deadline apply again.)
  // Judged only when nothing disturbed the last expiry before the timeout: the spare's own sync
  // sanitizes what it read, and participants cut off from the store (or paused) expire in its
  // view, leaving a round that is no longer full without any commit saying so.
  void spare_timed_out(const AgentLife& a, const AgentEvent& e) {
    if (!quiet(*e.end - b_.slow(b_.expiry) - b_.slack, *e.end)) return;
    for (const StoreLife& life : history_.store) {
      bool listed = false, stayed = true;
      uint64_t round = 0;
      for (const Commit& c : life.commits) {
        if (c.t < e.start || c.t > *e.end || !c.state) continue;
        const bool spare = c.state->redundancy_list.contains(a.desc) && c.state->complete &&
                           c.state->participants.size() == spec_.settings.max_nodes;
        if (spare) round = c.state->round;
        if (listed && !spare) stayed = false;
        listed = listed || spare;
      }
      // A store that died took the list with it.
      if (listed && stayed && store_alive(e.start, *e.end)) add("L3", &life, round, {name(a.desc)}, "a redundant node timed out while the round was full");
    }
  }

  // L1: a round holding min participants completes within last_call (with max, at once). A round
  // that completes late is late however many it holds: one that filled to max after its last
  // call should have completed with fewer at the last call's end (so a full round is judged too).
  void rounds_complete(const StoreLife& life) {
    std::optional<TimePoint> reach;
    std::optional<uint64_t> round;
    bool completed = false;
    const auto unfinished = [&](TimePoint until) {
      if (completed || !reach) return;
      const TimePoint bound = *reach + b_.slow(spec_.settings.timeout.last_call) + b_.slack;
      if (until > bound && judgeable(bound) && quiet(*reach, bound) && !closed_by(life, bound)) {
        add("L1", &life, *round, {}, "min_nodes were in from " + ms(*reach) + " but the round had not completed by " + ms(bound));
      }
    };
    for (const Commit& c : life.commits) {
      if (!c.state) continue;
      const RendezvousState& s = *c.state;
      if (round != s.round) {
        unfinished(c.t);
        round = s.round;
        reach.reset();
        completed = false;
      }
      if (s.complete) {
        if (!completed && reach) {
          const TimePoint bound = *reach + b_.slow(spec_.settings.timeout.last_call) + b_.slack;
          if (c.t > bound && quiet(*reach, c.t)) {
            add("L1", &life, s.round, {}, "completed at " + ms(c.t) + ", later than last_call after min_nodes joined at " +
                                              ms(*reach));
          }
        }
        completed = true;
      } else if (s.participants.size() >= spec_.settings.min_nodes) {
        if (!reach) reach = c.t;
      } else {
        reach.reset();
      }
    }
    unfinished(facts_.end);
  }

  // L4: after the close, every joiner fails promptly with closed (or graceful exit, if redundant).
  void close_fails_joiners(const StoreLife& life) {
    const Commit* closed = nullptr;
    for (const Commit& c : life.commits) {
      if (c.state && c.state->closed) {
        closed = &c;
        break;
      }
    }
    if (closed == nullptr) return;
    for (const AgentLife& a : history_.agents) {
      if (a.died && *a.died <= closed->t) continue;
      for (const AgentEvent& e : a.events) {
        if (e.op != "next_rendezvous" || !e.end || *e.end <= closed->t) continue;
        if (e.succeeded() && e.start < closed->t) continue;  // it read a complete round before the close
        const TimePoint from = std::max(closed->t, e.start);
        // Its exit op writes first (leaving its old round), racing every node the state lists.
        const RendezvousState& s = *closed->state;
        const TimePoint bound = from + b_.slack + race(s.participants.size() + s.wait_list.size() + s.redundancy_list.size());
        // A store that died took the close with it (its next life starts empty, and open).
        if (!quiet(from, bound) || !store_alive(closed->t, bound)) continue;
        if (e.error != "rendezvous_closed" && e.error != "rendezvous_graceful_exit") {
          add("L4", &life, closed->state->round, {name(a.desc)},
              "next_rendezvous after the close ended " + (e.error.empty() ? std::string("in success") : "with " + e.error));
        } else if (*e.end > bound) {
          add("L4", &life, closed->state->round, {name(a.desc)},
              "learned of the close at " + ms(*e.end) + ", later than " + ms(bound));
        }
      }
    }
  }

  // A round has advanced past `round` by `bound` in `life`.
  static bool advanced(const StoreLife& life, uint64_t round, TimePoint bound) {
    for (const Commit& c : life.commits) {
      if (c.t > bound) break;
      if (c.state && c.state->round > round) return true;
    }
    return false;
  }
  // No kill or crash of the store's node in [from, to]: a life's last commit outlives its store.
  bool store_alive(TimePoint from, TimePoint to) const {
    for (const runtime::FaultEvent& f : facts_.faults) {
      if (f.node == spec_.store_node && (f.kind == FaultKind::kill || f.kind == FaultKind::crash) && f.time >= from &&
          f.time <= to) {
        return false;
      }
    }
    return true;
  }
  // A closed rendezvous never advances again (S8), so nothing waiting on the next round is owed it.
  static bool closed_by(const StoreLife& life, TimePoint bound) {
    for (const Commit& c : life.commits) {
      if (c.t > bound) break;
      if (c.state && c.state->closed) return true;
    }
    return false;
  }
  bool all_active(const RendezvousState& s, TimePoint t) const {
    for (const auto& [node, rank] : s.participants) {
      if (!active_through(node, t)) return false;
    }
    return true;
  }

  // L5 (nodes waiting) and L6 (a participant expired, re-rendezvous on): the survivors re-form.
  void waiting_restarts(const StoreLife& life) {
    const Commit* prev = nullptr;
    for (const Commit& c : life.commits) {
      if (!c.state) {
        prev = nullptr;
        continue;
      }
      const RendezvousState& s = *c.state;
      const bool same_round = prev != nullptr && prev->state->round == s.round;
      const TimePoint bound = c.t + b_.slow(spec_.monitor_interval) + b_.slack + race(s.participants.size() + s.wait_list.size());
      const bool judge = judgeable(bound) && quiet(c.t, bound) && all_active(s, bound) && !closed_by(life, bound);
      if (s.complete && !s.wait_list.empty() && !(same_round && prev->state->complete && !prev->state->wait_list.empty())) {
        // Dead waiters wait for nothing: they leave the list at their expiry, and the agents then
        // see no node waiting (restarting for them until then is PyTorch's behaviour, not owed).
        bool live_waiter = false;
        for (const NodeDesc& w : s.wait_list) live_waiter = live_waiter || active_through(w, bound);
        if (judge && live_waiter && !advanced(life, s.round, bound)) {
          std::vector<std::string> waiting;
          for (const NodeDesc& w : s.wait_list) waiting.push_back(name(w));
          add("L5", &life, s.round, waiting, "nodes waited from " + ms(c.t) + " but the round had not advanced by " + ms(bound));
        }
        if (judge && s.participants.size() + s.wait_list.size() <= spec_.settings.max_nodes) next_round_includes(life, s);
      }
      if (same_round && prev->state->complete && s.complete) expired_participants(life, *prev->state, c, bound, judge);
      prev = &c;
    }
  }

  // The waiters of round r that still waited when r + 1 began are in r + 1 when it completes,
  // unless others filled it, or it completed before a waiter could see it open: a polling waiter
  // (or one whose cached state was fresh) learns of the new round only within the slack, and
  // last_call may be shorter than that.
  void next_round_includes(const StoreLife& life, const RendezvousState& s) {
    const Commit* last_of_round = nullptr;
    const Commit* opened = nullptr;
    for (const Commit& c : life.commits) {
      if (!c.state) continue;
      if (c.state->round == s.round) last_of_round = &c;
      if (c.state->round == s.round + 1 && opened == nullptr) opened = &c;
      if (c.state->round != s.round + 1 || !c.state->complete) continue;
      if (last_of_round == nullptr || opened == nullptr) return;
      if (c.state->participants.size() >= spec_.settings.max_nodes) return;
      if (c.t - opened->t < b_.slack || !quiet(opened->t, c.t)) return;
      for (const NodeDesc& w : s.wait_list) {
        if (!last_of_round->state->wait_list.contains(w)) continue;
        if (!c.state->participants.contains(w) && active_through(w, c.t)) {
          add("L5", &life, s.round + 1, {name(w)},
              "waited in round " + std::to_string(s.round) + " but is not in the next one, open from " + ms(opened->t) +
                  " to " + ms(c.t));
        }
      }
      return;
    }
  }

  void expired_participants(const StoreLife& life, const RendezvousState& p, const Commit& c, TimePoint bound, bool judge) {
    const auto [writer, write] = history_.writer_of(c);
    if (writer == nullptr || c.state->participants.empty()) return;
    std::vector<std::string> expired;
    for (const auto& [node, rank] : p.participants) {
      if (node != writer->desc && !c.state->participants.contains(node)) expired.push_back(name(node));
    }
    if (expired.empty() || !spec_.settings.rerendezvous_on_expiry) return;
    if (!c.state->rerendezvous_requested) {
      add("L6", &life, c.state->round, expired, "expired from a complete round with survivors, and no re-rendezvous was requested");
    } else if (judge && !advanced(life, c.state->round, bound)) {
      add("L6", &life, c.state->round, expired, "expired at " + ms(c.t) + " but the survivors had not re-formed by " + ms(bound));
    }
  }

  // L2: a dead node leaves every list within expiry + one keep-alive interval, while live nodes sync.
  void dead_nodes_leave() {
    for (const AgentLife& a : history_.agents) {
      if (!a.died) continue;
      const TimePoint td = *a.died;
      const TimePoint bound = td + b_.slow(b_.expiry) + b_.slow(spec_.settings.keep_alive_interval) + b_.slack;
      if (!judgeable(bound) || !quiet(td, bound, a.node)) continue;
      for (const StoreLife& life : history_.store) {
        const Commit* then = life.at(td);
        if (then == nullptr || !then->state || !holds(*then->state, a.desc) || !store_alive(then->t, bound)) continue;
        bool witness = false;
        for (const AgentLife& other : history_.agents) {
          if (&other != &a && holds(*then->state, other.desc) && stopped(other) > bound) witness = true;
        }
        const Commit* later = life.at(bound);
        if (witness && later && later->state && holds(*later->state, a.desc)) {
          add("L2", &life, later->state->round, {name(a.desc)}, "died at " + ms(td) + " and was still listed at " + ms(bound));
        }
      }
    }
  }

  const RendezvousSpec& spec_;
  const CheckerBounds& b_;
  const RendezvousHistory& history_;
  const RunFacts& facts_;
  const std::vector<Outage> outages_;
  std::vector<Violation> out_;
};

}  // namespace

Duration CheckerBounds::slow(Duration d) const {
  return Duration{static_cast<int64_t>(static_cast<double>(d.count()) / (1.0 - drift)) + 1000};
}

CheckerBounds checker_bounds(const Scenario& scenario) {
  const RendezvousSpec& spec = scenario.workload.as<RendezvousSpec>();
  CheckerBounds b;
  b.drift = static_cast<double>(scenario.cluster.clock_drift_max_ppm) / 1e6;
  b.expiry = spec.settings.expiry();
  b.round_trip = 2 * scenario.network.max_latency() + std::chrono::microseconds(100);
  b.slack = 2 * scenario.cluster.clock_skew_max + rendezvous::kDefaultCacheDuration + spec.poll_interval + 5 * b.round_trip +
            std::chrono::milliseconds(50);
  return b;
}

std::vector<Violation> check_liveness(const RendezvousSpec& spec, const CheckerBounds& bounds, const RendezvousHistory& history,
                                      const RunFacts& facts) {
  return Liveness(spec, bounds, history, facts).run();
}

std::vector<Violation> check_invariants(const Scenario& scenario, const RunRecords& records, const RendezvousHistory& history) {
  const RendezvousSpec& spec = scenario.workload.as<RendezvousSpec>();
  bool store_died = false;
  for (const runtime::FaultEvent& f : records.fault_history) {
    if (f.node == spec.store_node && (f.kind == FaultKind::kill || f.kind == FaultKind::crash || f.kind == FaultKind::restart)) {
      store_died = true;
    }
  }
  std::vector<Violation> out = check_safety(spec, history, store_died);
  RunFacts facts{records.outcome, records.stuck_report, records.end, records.fault_history};
  // An etcd restart is the store node's pause as far as liveness goes: nothing is promised while
  // its store cannot answer. Safety keeps every rule: its data survived, so the history is exact.
  for (const StoreOutage& o : history.store_outages) {
    runtime::FaultEvent pause;
    pause.kind = FaultKind::pause;
    pause.time = o.down;
    pause.node = spec.store_node;
    runtime::FaultEvent resume = pause;
    resume.kind = FaultKind::resume;
    resume.time = o.up;
    facts.faults.push_back(pause);
    facts.faults.push_back(resume);
  }
  std::stable_sort(facts.faults.begin(), facts.faults.end(),
                   [](const runtime::FaultEvent& a, const runtime::FaultEvent& b) { return a.time < b.time; });
  std::vector<Violation> live = check_liveness(spec, checker_bounds(scenario), history, facts);
  out.insert(out.end(), std::make_move_iterator(live.begin()), std::make_move_iterator(live.end()));
  return out;
}

}  // namespace dagsim::scenarios
