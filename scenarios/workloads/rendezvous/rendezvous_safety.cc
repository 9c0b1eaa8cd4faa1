// The checker's safety half, S1-S10 (rendezvous_invariants.h).
#include <map>
#include <set>
#include <sstream>

#include "scenarios/workloads/rendezvous/rendezvous_invariants.h"

namespace dagsim::scenarios {

namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;

std::string name(const NodeDesc& node) { return rendezvous::to_string(node); }

std::set<NodeDesc> members(const RendezvousState& s) {
  std::set<NodeDesc> out(s.wait_list.begin(), s.wait_list.end());
  out.insert(s.redundancy_list.begin(), s.redundancy_list.end());
  for (const auto& [node, rank] : s.participants) out.insert(node);
  return out;
}

class Safety {
 public:
  Safety(const RendezvousSpec& spec, const RendezvousHistory& history, bool store_ever_died)
      : spec_(spec), history_(history), store_ever_died_(store_ever_died) {}

  std::vector<Violation> run() {
    for (const StoreLife& life : history_.store) commits(life);
    returns();
    if (!store_ever_died_) writes_are_commits();
    return std::move(out_);
  }

 private:
  void add(std::string invariant, const StoreLife& life, uint64_t round, std::vector<std::string> nodes, std::string text) {
    out_.push_back({std::move(invariant), "store life " + std::to_string(life.incarnation) + ", round " + std::to_string(round),
                    std::move(nodes), std::move(text)});
  }

  // Every commit against the one before it in the same store life.
  void commits(const StoreLife& life) {
    const Commit* prev = nullptr;
    uint64_t prev_version = 0;
    for (const Commit& c : life.commits) {
      written_on_token(life, c, prev_version);
      prev_version = c.version;
      if (!c.state) {
        prev = nullptr;  // deleted: the next state starts a new history
        continue;
      }
      state_alone(life, c);
      if (prev != nullptr) transition(life, *prev->state, c);
      prev = &c;
    }
  }

  // S1: the commit's writer wrote on the previous commit's version.
  void written_on_token(const StoreLife& life, const Commit& c, uint64_t token) {
    const auto [agent, write] = history_.writer_of(c);
    const uint64_t round = c.state ? c.state->round : 0;
    if (write != nullptr) {
      if (write->base != token) {
        add("S1", life, round, {name(agent->desc)},
            "version " + std::to_string(c.version) + " was written on token " + std::to_string(write->base) +
                " while the key was at " + std::to_string(token) + " (a stale token wrote)");
      }
      return;
    }
    // No recorded writer: acceptable only if some write on that token never heard back.
    for (const AgentLife& a : history_.agents) {
      for (const CasWrite& w : a.writes) {
        if (!w.written.has_value() && w.base == token && w.t <= c.t) return;
      }
    }
    add("S1", life, round, {}, "version " + std::to_string(c.version) + " was committed on token " + std::to_string(token) +
                                   " but no node wrote it on that token");
  }

  void state_alone(const StoreLife& life, const Commit& c) {
    const RendezvousState& s = *c.state;
    if (std::optional<std::string> v = rendezvous::structural_violation(s)) {
      add("S5", life, s.round, {}, "version " + std::to_string(c.version) + ": " + *v);
    }
    const size_t n = s.participants.size();
    if (n > spec_.settings.max_nodes || (!s.complete && n >= spec_.settings.max_nodes)) {
      add("S3", life, s.round, {}, "version " + std::to_string(c.version) + " holds " + std::to_string(n) + " participants, " +
                                      (s.complete ? "complete" : "incomplete") + ", max_nodes " +
                                      std::to_string(spec_.settings.max_nodes));
    }
    if (!s.complete && s.deadline.has_value() != (n >= spec_.settings.min_nodes)) {
      add("S4", life, s.round, {}, "version " + std::to_string(c.version) + ": an incomplete round of " + std::to_string(n) +
                                      (s.deadline ? " has" : " has no") + " last-call deadline (min_nodes " +
                                      std::to_string(spec_.settings.min_nodes) + ")");
    }
    if (s.rerendezvous_requested && !spec_.settings.rerendezvous_on_expiry) {
      add("L6", life, s.round, {}, "version " + std::to_string(c.version) +
                                      " requests a re-rendezvous although rerendezvous_on_expiry is off (PyTorch's behaviour)");
    }
  }

  void transition(const StoreLife& life, const RendezvousState& p, const Commit& c) {
    const RendezvousState& s = *c.state;
    const std::string at = "version " + std::to_string(c.version) + ": ";
    // S6: one step at a time, and only out of a complete round.
    if (s.round < p.round || s.round > p.round + 1 || (s.round == p.round + 1 && !p.complete)) {
      add("S6", life, s.round, {}, at + "round " + std::to_string(p.round) + (p.complete ? " (complete)" : " (incomplete)") +
                                      " became round " + std::to_string(s.round));
    }
    const bool completes = s.complete && (!p.complete || s.round != p.round);
    if (completes) {
      const size_t n = s.participants.size();
      if (n < spec_.settings.min_nodes || n > spec_.settings.max_nodes) {
        add("S3", life, s.round, {}, at + "completed with " + std::to_string(n) + " participants outside [" +
                                        std::to_string(spec_.settings.min_nodes) + ", " + std::to_string(spec_.settings.max_nodes) + "]");
      }
      uint32_t expected = 0;
      for (const auto& [node, rank] : s.participants) {
        if (rank != expected) {
          add("S2", life, s.round, {name(node)}, at + "completion gave " + name(node) + " rank " + std::to_string(rank) +
                                                    ", its place in node order is " + std::to_string(expected));
        }
        ++expected;
      }
      if (s.world_size != n) {
        add("S2", life, s.round, {}, at + "completed with " + std::to_string(n) + " participants and world size " +
                                        std::to_string(s.world_size));
      }
    } else if (s.complete && p.complete && s.round == p.round) {
      if (s.world_size != p.world_size) {
        add("S2", life, s.round, {}, at + "the world size changed from " + std::to_string(p.world_size) + " to " +
                                        std::to_string(s.world_size) + " within the round");
      }
      for (const auto& [node, rank] : s.participants) {
        const auto before = p.participants.find(node);
        if (before == p.participants.end()) {
          add("S7", life, s.round, {name(node)}, at + name(node) + " joined a complete round");
        } else if (before->second != rank) {
          add("S2", life, s.round, {name(node)}, at + name(node) + "'s rank changed from " + std::to_string(before->second) +
                                                    " to " + std::to_string(rank) + " within the round");
        }
      }
    }
    if (p.closed) {
      if (!s.closed) add("S7", life, s.round, {}, at + "closed was cleared");
      std::vector<std::string> added;
      for (const auto& [node, rank] : s.participants) {
        if (!p.participants.contains(node)) added.push_back(name(node));
      }
      for (const NodeDesc& node : s.wait_list) {
        if (!p.wait_list.contains(node)) added.push_back(name(node));
      }
      for (const NodeDesc& node : s.redundancy_list) {
        if (!p.redundancy_list.contains(node)) added.push_back(name(node));
      }
      if (!added.empty()) add("S7", life, s.round, added, at + "nodes were added after the rendezvous closed");
      if (completes) add("S7", life, s.round, {}, at + "a round completed after the rendezvous closed");
    }
    removals(life, p, c);
  }

  // S10: a node removed by another node had expired by the writer's clock; one the writer kept had
  // not expired by its last read.
  void removals(const StoreLife& life, const RendezvousState& p, const Commit& c) {
    const auto [agent, write] = history_.writer_of(c);
    if (write == nullptr) return;
    const RendezvousState& s = *c.state;
    const std::set<NodeDesc> after = members(s);
    const Duration expiry = spec_.settings.expiry();
    for (const NodeDesc& node : members(p)) {
      if (node == agent->desc) continue;
      const TimePoint hb = p.last_heartbeats.at(node);
      if (!after.contains(node)) {
        if (!(hb < write->wall - expiry)) {
          add("S10", life, s.round, {name(node)}, "version " + std::to_string(c.version) + ": " + name(agent->desc) + " removed " +
                                                     name(node) + " whose heartbeat was " + rendezvous::describe(write->wall - hb) +
                                                     " old by its clock, not past the expiry " + rendezvous::describe(expiry));
        }
      } else if (s.last_heartbeats.at(node) == hb && hb < write->read_wall - expiry) {
        add("S10", life, s.round, {name(node)}, "version " + std::to_string(c.version) + ": " + name(agent->desc) + " kept " +
                                                   name(node) + " whose heartbeat was " + rendezvous::describe(write->read_wall - hb) +
                                                   " old at its last read, past the expiry " + rendezvous::describe(expiry));
      }
    }
  }

  // The store life a value read at `t` came from: the last one whose first commit is at or before t.
  const StoreLife* life_at(TimePoint t) const {
    const StoreLife* found = nullptr;
    for (const StoreLife& life : history_.store) {
      if (!life.commits.empty() && life.commits.front().t <= t) found = &life;
    }
    return found;
  }

  // S8, S2 (unique ranks), S9, S7 (no call started after close succeeds).
  void returns() {
    std::map<std::tuple<uint32_t, uint64_t, uint64_t>, NodeDesc> ranks;  // (life, round, rank) -> node
    for (const AgentLife& a : history_.agents) {
      for (const AgentEvent& e : a.events) {
        if (!e.succeeded() || (e.op != "next_rendezvous" && e.op != "num_nodes_waiting")) continue;
        const StoreLife* life = life_at(*e.end);
        const Commit* c = life ? life->find(e.version) : nullptr;
        if (c == nullptr || c->t > *e.end) {
          if (!store_ever_died_) {
            out_.push_back({"S8", "", {name(a.desc)}, e.op + " returned version " + std::to_string(e.version) +
                                                           " which the store never committed before it returned"});
          }
          continue;
        }
        const RendezvousState& s = *c->state;
        if (e.op == "num_nodes_waiting") {
          // The call's sync sanitized the state it read before counting (at or before `wall`),
          // and may not have written that yet: either count is the state's.
          const uint64_t read = rendezvous::num_nodes_waiting(s);
          const uint64_t sanitized =
              e.wall ? rendezvous::num_nodes_waiting(rendezvous::sanitize(s, spec_.settings, *e.wall)) : read;
          if (e.waiting != read && e.waiting != sanitized) {
            add("S9", *life, s.round, {name(a.desc)}, "num_nodes_waiting returned " + std::to_string(e.waiting) + " from version " +
                                                         std::to_string(e.version) + ", which has " +
                                                         std::to_string(rendezvous::num_nodes_waiting(s)));
          }
          continue;
        }
        const auto me = s.participants.find(a.desc);
        if (!s.complete || me == s.participants.end() || me->second != e.rank || s.world_size != e.world ||
            s.round != e.round) {
          add("S8", *life, e.round, {name(a.desc)}, "next_rendezvous returned rank " + std::to_string(e.rank) + " of " +
                                                       std::to_string(e.world) + " in round " + std::to_string(e.round) +
                                                       " from version " + std::to_string(e.version) + ": " + rendezvous::to_string(s));
          continue;
        }
        const auto [it, fresh] = ranks.emplace(std::make_tuple(life->incarnation, e.round, e.rank), a.desc);
        if (!fresh && it->second != a.desc) {
          add("S2", *life, e.round, {name(it->second), name(a.desc)}, "both returned rank " + std::to_string(e.rank));
        }
        // S7: a call that began after the close cannot succeed.
        for (const Commit& closed : life->commits) {
          if (closed.state && closed.state->closed && closed.t < e.start) {
            add("S7", *life, e.round, {name(a.desc)}, "next_rendezvous started after the close (version " +
                                                         std::to_string(closed.version) + ") and succeeded");
            break;
          }
        }
      }
    }
  }

  // S1, the other way: every write a node saw succeed is a commit of the store, on its token.
  void writes_are_commits() {
    for (const AgentLife& a : history_.agents) {
      for (const CasWrite& w : a.writes) {
        if (w.written != true) continue;
        bool found = false;
        for (const StoreLife& life : history_.store) {
          uint64_t prev = 0;
          for (const Commit& c : life.commits) {
            if (c.version == *w.version && prev == w.base && w.t <= c.t && c.t <= *w.t_end) found = true;
            prev = c.version;
          }
        }
        if (!found) {
          out_.push_back({"S1", "", {name(a.desc)}, "a write on token " + std::to_string(w.base) + " was told it committed version " +
                                                       std::to_string(*w.version) + ", which the store never committed on that token"});
        }
      }
    }
  }

  const RendezvousSpec& spec_;
  const RendezvousHistory& history_;
  const bool store_ever_died_;
  std::vector<Violation> out_;
};

}  // namespace

std::string to_string(const Violation& v) {
  std::ostringstream out;
  out << v.invariant;
  if (!v.where.empty() || !v.nodes.empty()) {
    out << " (" << v.where;
    for (size_t i = 0; i < v.nodes.size(); ++i) out << (i == 0 && v.where.empty() ? "" : i == 0 ? "; " : ", ") << v.nodes[i];
    out << ")";
  }
  out << ": " << v.text;
  return out.str();
}

std::vector<Violation> check_safety(const RendezvousSpec& spec, const RendezvousHistory& history, bool store_ever_died) {
  return Safety(spec, history, store_ever_died).run();
}

}  // namespace dagsim::scenarios
