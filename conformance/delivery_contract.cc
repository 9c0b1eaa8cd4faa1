#include "conformance/delivery_contract.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "core/base/assert.h"

namespace dagsim::conformance {
namespace {

using runtime::Duration;
using runtime::TimePoint;
using sim::TraceEvent;
using sim::TraceKind;

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// A failure that one end must still be told of.
struct Owed {
  TimePoint at;        // when it happened
  TimePoint deadline;  // N3, tightened by N4
};

class Checker {
 public:
  Checker(const std::vector<std::string>& names, NoticeBounds bounds) : names_(names), bounds_(bounds) {
    for (size_t i = 0; i < names.size(); ++i) index_[names[i]] = static_cast<uint32_t>(i);
    running_.assign(names.size(), false);
  }

  void step(const TraceEvent& e) {
    now_ = e.time;
    check_deadlines();
    switch (e.kind) {
      case TraceKind::fault: on_fault(e); break;
      case TraceKind::connection: on_connection(e); break;
      case TraceKind::drop: on_drop(e); break;
      default: break;
    }
  }

  std::vector<std::string> finish() {
    check_deadlines();
    return std::move(violations_);
  }

 private:
  using Pair = std::pair<uint32_t, uint32_t>;  // (the end to tell, its peer)

  void violation(const std::string& what) {
    std::ostringstream out;
    out << "at " << now_.ns() / 1000 << " us: " << what;
    violations_.push_back(out.str());
  }

  std::string pair_name(const Pair& p) const { return names_[p.first] + " about " + names_[p.second]; }

  void on_fault(const TraceEvent& e) {
    const std::string_view d = e.detail;
    if (e.node == sim::kWorldTrack) {
      if (starts_with(d, "partition #")) add_partition(d);
      if (starts_with(d, "heal #")) on_heal(std::stoull(std::string(d.substr(6))));
      if (d == "heal all") on_heal(0);
      return;
    }
    DAGSIM_ASSERT(e.node < running_.size());
    if (starts_with(d, "start ") || starts_with(d, "restart ")) {
      running_[e.node] = true;
    } else if (starts_with(d, "kill ") || starts_with(d, "crash ")) {
      running_[e.node] = false;
      for (auto& [pair, owed] : owed_) {
        if (pair.first == e.node) owed.clear();  // the incarnation that was owed them is gone
      }
    }
  }

  void on_connection(const TraceEvent& e) {
    if (starts_with(e.detail, "failed with ")) {
      // A failure of the connection between e.node and e.peer: each running end must be told.
      for (const Pair& p : {Pair{e.node, e.peer}, Pair{e.peer, e.node}}) {
        if (running_[p.first]) owe(p);
      }
      return;
    }
    const Pair p{e.node, e.peer};
    std::deque<Owed>& owed = owed_[p];
    if (owed.empty()) {
      violation("N2: " + pair_name(p) + " was told of a failure it was not owed: " + e.detail);
      return;
    }
    owed.pop_front();  // told in order, so the oldest
  }

  void on_drop(const TraceEvent& e) {
    if (e.detail.find("connection refused") != std::string::npos && e.detail.find("the sender") == std::string::npos) {
      owe(Pair{e.node, e.peer});  // a refused attempt is a failure its sender hears of
      return;
    }
    if (e.detail.find("has not learned it yet") == std::string::npos) return;
    const Pair p{e.node, e.peer};
    if (owed_[p].empty()) {
      violation("N1: a message from " + names_[e.node] + " to " + names_[e.peer] + " (id " + std::to_string(e.flow) +
                ") was dropped as not learned, but its sender had been told of every failure");
    }
  }

  void owe(const Pair& p) { owed_[p].push_back(Owed{now_, now_ + bounds_.connection_timeout + bounds_.max_latency}); }

  void add_partition(std::string_view d) {
    // "partition #K: a->b c->d"
    const size_t colon = d.find(':');
    const uint64_t id = std::stoull(std::string(d.substr(11, colon - 11)));
    std::set<Pair>& blocked = partitions_[id];
    std::istringstream in{std::string(d.substr(colon + 1))};
    std::string link;
    while (in >> link) {
      const size_t arrow = link.find("->");
      DAGSIM_ASSERT(arrow != std::string::npos);
      blocked.insert({index_.at(link.substr(0, arrow)), index_.at(link.substr(arrow + 2))});
    }
  }

  bool blocked(uint32_t from, uint32_t to) const {
    return std::any_of(partitions_.begin(), partitions_.end(),
                       [&](const auto& entry) { return entry.second.count({from, to}) != 0; });
  }

  void on_heal(uint64_t id) {
    if (id == 0) {
      partitions_.clear();
    } else {
      partitions_.erase(id);
    }
    for (auto& [p, owed] : owed_) {
      if (blocked(p.first, p.second) || blocked(p.second, p.first)) continue;
      for (Owed& o : owed) o.deadline = std::min(o.deadline, now_ + bounds_.max_latency);
    }
  }

  void check_deadlines() {
    for (auto& [p, owed] : owed_) {
      if (!owed.empty() && running_[p.first] && now_ > owed.front().deadline) {
        violation("N3/N4: " + pair_name(p) + ": a failure at " + std::to_string(owed.front().at.ns() / 1000) +
                  " us was still untold at its deadline, " + std::to_string(owed.front().deadline.ns() / 1000) + " us");
        owed.pop_front();  // reported once
      }
    }
  }

  const std::vector<std::string>& names_;
  NoticeBounds bounds_;
  std::map<std::string, uint32_t> index_;
  std::vector<bool> running_;
  std::map<Pair, std::deque<Owed>> owed_;
  std::map<uint64_t, std::set<Pair>> partitions_;
  TimePoint now_;
  std::vector<std::string> violations_;
};

}  // namespace

std::vector<std::string> delivery_contract_violations(const sim::Trace& trace, const std::vector<std::string>& node_names,
                                                      NoticeBounds bounds) {
  DAGSIM_ASSERT_MSG(trace.keeps_events(), "the delivery contract is checked on a trace that keeps its events");
  Checker checker(node_names, bounds);
  for (const TraceEvent& e : trace.events()) checker.step(e);
  return checker.finish();
}

}  // namespace dagsim::conformance
