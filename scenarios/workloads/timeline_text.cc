#include "scenarios/workloads/timeline_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

namespace dagsim::scenarios {
namespace {

// A partition's groups: when every blocked pair is blocked both ways, the nodes fall into groups
// that can reach each other (the components of "not blocked"); a group of one node that no pair
// names is left out (it was never part of the partition). Empty when the partition is one-way.
std::vector<std::vector<WorkerId>> groups_of(const std::vector<std::pair<WorkerId, WorkerId>>& blocked) {
  const std::set<std::pair<WorkerId, WorkerId>> pairs(blocked.begin(), blocked.end());
  std::set<WorkerId> nodes;
  for (const auto& [a, b] : pairs) {
    if (pairs.count({b, a}) == 0) return {};
    nodes.insert(a);
    nodes.insert(b);
  }
  std::vector<std::vector<WorkerId>> groups;
  std::set<WorkerId> placed;
  for (WorkerId start : nodes) {
    if (placed.count(start)) continue;
    std::vector<WorkerId> group;
    std::vector<WorkerId> frontier = {start};
    placed.insert(start);
    while (!frontier.empty()) {
      const WorkerId n = frontier.back();
      frontier.pop_back();
      group.push_back(n);
      for (WorkerId m : nodes) {
        if (placed.count(m) || pairs.count({n, m})) continue;
        placed.insert(m);
        frontier.push_back(m);
      }
    }
    std::sort(group.begin(), group.end());
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

std::string describe_fault(const runtime::FaultEvent& fault, const ClusterSpec& cluster) {
  using Kind = runtime::FaultEvent::Kind;
  const std::string kind(runtime::fault_event_kind_name(fault.kind));
  switch (fault.kind) {
    case Kind::partition: {
      const std::vector<std::vector<WorkerId>> groups = groups_of(fault.blocked);
      std::string text = kind;
      if (!groups.empty()) {
        for (size_t g = 0; g < groups.size(); ++g) {
          text += g == 0 ? " {" : " | {";
          for (size_t i = 0; i < groups[g].size(); ++i) text += (i == 0 ? "" : ", ") + cluster.node_name(groups[g][i]);
          text += "}";
        }
        return text;
      }
      for (size_t i = 0; i < fault.blocked.size(); ++i) {
        text += (i == 0 ? " " : ", ") + cluster.node_name(fault.blocked[i].first) + " -> " +
                cluster.node_name(fault.blocked[i].second);
      }
      return text + " (one way)";
    }
    case Kind::heal:
      return fault.partition == 0 ? kind + " (every partition)" : kind + " (partition " + std::to_string(fault.partition) + ")";
    case Kind::connection_failed:
      return "connection " + cluster.node_name(fault.node) + " - " + cluster.node_name(fault.peer) + " failed";
    default:
      return kind + " " + cluster.node_name(fault.node);
  }
}

std::string loss_line(const std::vector<std::optional<double>>& losses, const std::vector<double>& local) {
  std::optional<size_t> first, last;
  double worst = 0;
  for (size_t i = 0; i < losses.size() && i < local.size(); ++i) {
    if (!losses[i]) continue;
    if (!first) first = i;
    last = i;
    worst = std::max(worst, std::abs(*losses[i] - local[i]));
  }
  if (!first) return "no step's loss was recorded";
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.6g", v);
    return std::string(text);
  };
  return "loss " + number(*losses[*first]) + " at step " + std::to_string(*first + 1) + ", " + number(*losses[*last]) +
         " at step " + std::to_string(*last + 1) + "; local training " + number(local[*first]) + " and " +
         number(local[*last]) + "; largest difference " + number(worst);
}

}  // namespace dagsim::scenarios
