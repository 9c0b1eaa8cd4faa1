// The run page's timeline (html_timeline.h).
#include "scenarios/cli/html_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <vector>

#include "scenarios/cli/html_parts.h"

namespace dagsim::cli {
namespace {

using html::esc;
using html::number;

// A partition that fired, from its start to its heal.
struct PartitionBand {
  double begin_ms = 0, end_ms = 0;
  std::vector<std::vector<std::string>> groups;  // symmetric: the groups; one-way: {from, to}
  bool one_way = false;
  std::set<std::string> cut;  // the nodes drawn as cut off
  std::string text;            // "{worker7} | {worker0, worker1}" or "{worker4} -> {worker0}"
  std::string label;           // the same with groups of more than three nodes shortened
};

std::vector<std::string> names(const nlohmann::json& list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const nlohmann::json& n : list) {
    if (n.is_string()) out.push_back(n.get<std::string>());
  }
  return out;
}

// "{worker0, worker1}"; `shortened`, a group of more than three as "{worker0, worker1, +5}".
std::string braced(const std::vector<std::string>& group, bool shortened = false) {
  std::string out;
  for (size_t i = 0; i < group.size(); ++i) {
    if (shortened && group.size() > 3 && i == 2) {
      out += ", +" + std::to_string(group.size() - 2);
      break;
    }
    out += (out.empty() ? "" : ", ") + group[i];
  }
  return "{" + out + "}";
}

std::vector<PartitionBand> partitions(const nlohmann::json& faults, double end_ms) {
  std::vector<PartitionBand> out;
  if (!faults.is_array()) return out;
  for (const nlohmann::json& f : faults) {
    if (!f.is_object() || f.value("kind", std::string()) != "partition" || !f.value("fired", false)) continue;
    if (!f.contains("at_ms") || !f["at_ms"].is_number()) continue;
    PartitionBand p;
    p.begin_ms = f["at_ms"].get<double>();
    p.end_ms = end_ms;
    if (f.contains("until_ms") && f["until_ms"].is_number() && f.value("until_fired", true)) {
      p.end_ms = std::min(end_ms, f["until_ms"].get<double>());
    }
    // A `heal` fault heals every partition standing then.
    for (const nlohmann::json& h : faults) {
      if (!h.is_object() || h.value("kind", std::string()) != "heal" || !h.value("fired", false)) continue;
      if (!h.contains("at_ms") || !h["at_ms"].is_number()) continue;
      const double at = h["at_ms"].get<double>();
      if (at > p.begin_ms && at < p.end_ms) p.end_ms = at;
    }
    // A [job]'s partition names its groups in its target: "agent0,agent1|agent2".
    nlohmann::json groups = f.value("groups", nlohmann::json());
    if (!groups.is_array() && !f.contains("from") && f.contains("target") && f["target"].is_string()) {
      groups = nlohmann::json::array({nlohmann::json::array()});
      std::string name;
      for (char c : f["target"].get<std::string>() + "|") {
        if (c == ',' || c == '|') {
          if (!name.empty()) groups.back().push_back(name);
          name.clear();
          if (c == '|') groups.push_back(nlohmann::json::array());
        } else if (c != ' ') {
          name += c;
        }
      }
      groups.erase(groups.size() - 1);
    }
    if (groups.is_array()) {
      for (const nlohmann::json& g : groups) p.groups.push_back(names(g));
      size_t largest = 0, tied = 0;
      for (const auto& g : p.groups) largest = std::max(largest, g.size());
      for (const auto& g : p.groups) tied += g.size() == largest ? 1 : 0;
      for (const auto& g : p.groups) {
        if (g.size() < largest || tied > 1) p.cut.insert(g.begin(), g.end());
      }
      for (const auto& g : p.groups) {
        p.text += (p.text.empty() ? "" : " | ") + braced(g);
        p.label += (p.label.empty() ? "" : " | ") + braced(g, true);
      }
    } else {
      p.one_way = true;
      p.groups = {names(f.value("from", nlohmann::json::array())), names(f.value("to", nlohmann::json::array()))};
      p.cut.insert(p.groups[0].begin(), p.groups[0].end());
      p.text = braced(p.groups[0]) + " -> " + braced(p.groups[1]);
      p.label = braced(p.groups[0], true) + " -> " + braced(p.groups[1], true);
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

std::string timeline_svg(const scenarios::Scenario& scenario, const scenarios::RunResult& result) {
  // A [job]'s rows are its agents, each with its incarnations, rounds, workers (a lane per local
  // rank), restarts and the faults that struck it, and a row for the store when a fault struck it.
  const bool job = scenario.workload.name() == "job";
  const bool store_row = job && std::any_of(result.spans.begin(), result.spans.end(), [&](const scenarios::WorkloadSpan& s) {
    return s.node == scenario.cluster.nodes;
  });
  const uint32_t nodes = scenario.cluster.nodes + (store_row ? 1 : 0);
  auto name_of = [&](uint32_t n) { return n < scenario.cluster.nodes ? scenario.cluster.node_name(n) : std::string("store"); };
  uint32_t lanes = 1;  // worker lanes per row: the most local ranks any agent ran
  for (const scenarios::WorkloadSpan& s : result.spans) {
    if (s.category == "worker" && s.name.find(':') != std::string::npos) {
      lanes = std::max<uint32_t>(lanes, static_cast<uint32_t>(std::atoi(s.name.c_str() + s.name.find(':') + 1)) + 1);
    }
  }
  const double end_ms = std::max(result.virtual_time_ms, 1.0);
  const double left = 90, width = 1060, row = job ? 32 : 22, top = 40;
  auto x = [&](double ms) { return left + width * std::clamp(ms / end_ms, 0.0, 1.0); };
  auto row_of = [&](const std::string& name) -> std::optional<uint32_t> {
    for (uint32_t n = 0; n < nodes; ++n) {
      if (scenario.cluster.node_name(n) == name) return n;
    }
    return std::nullopt;
  };
  const std::vector<PartitionBand> bands = partitions(result.faults, end_ms);
  std::set<std::string> drawn;  // the kinds of mark drawn, for the legend
  std::string body;

  for (uint32_t n = 0; n < nodes; ++n) {
    const double y = top + row * n;
    body += "<rect class=\"node-row\" data-node=\"" + esc(name_of(n)) + "\" x=\"" + number(left, "%.0f") +
            "\" y=\"" + number(y + 2, "%.1f") + "\" width=\"" + number(width, "%.0f") + "\" height=\"" + number(row - 4, "%.0f") +
            "\"/><text x=\"4\" y=\"" + number(y + row * 0.65, "%.1f") + "\">" + esc(name_of(n)) + "</text>\n";
  }
  for (const scenarios::WorkloadSpan& s : result.spans) {
    if (s.node >= nodes || s.category == "step") continue;  // steps are too many to draw; the loss chart has them
    std::string cls = s.category == "round" ? "round" : s.category == "restart" ? "restart"
                      : s.category == "backward"                                ? "backward"
                      : s.category == "agent"                                   ? "agent"
                      : s.category == "worker"                                  ? "worker"
                      : s.category == "fault"                                   ? "struck"
                                                                                : "call";
    if (cls == "round") {
      // Alternate colours by round number, so consecutive rounds read apart.
      const size_t space = s.name.find(' ');
      const int round = space == std::string::npos ? 0 : std::atoi(s.name.c_str() + space + 1);
      if (round % 2 == 1) cls += " odd";
    }
    drawn.insert(cls);
    const bool training = cls.starts_with("round") || cls == "backward";
    double y = top + row * s.node + (cls == "backward" ? 12 : 4);
    double h = cls == "backward" ? 6 : row - 8;
    if (job) {
      // An agent's life fills its row; rounds above, worker lanes (and restarts) below; a fault
      // over all of it.
      const double lane = std::min(6.0, 14.0 / lanes);
      const double base = top + row * s.node;
      if (cls == "agent") y = base + 2, h = row - 4;
      if (cls.starts_with("round")) y = base + 4, h = 8;
      if (cls == "restart") y = base + 15, h = 14;
      if (cls == "struck") y = base + 1, h = row - 2;
      if (cls == "worker") {
        const size_t colon = s.name.find(':');
        const uint32_t local = colon == std::string::npos ? 0 : static_cast<uint32_t>(std::atoi(s.name.c_str() + colon + 1));
        y = base + 15 + lane * local, h = std::max(lane - 1, 1.0);
      }
    }
    const std::string node = name_of(s.node);
    // The span in pieces: what falls inside a partition that cut this node off is drawn as cut off.
    std::vector<std::pair<double, double>> pieces{{static_cast<double>(s.begin_ns) / 1e6, static_cast<double>(s.end_ns) / 1e6}};
    std::string cut_marks;
    for (const PartitionBand& p : bands) {
      if (!training || !p.cut.contains(node)) continue;
      std::vector<std::pair<double, double>> kept;
      for (const auto& [b, e] : pieces) {
        if (e <= p.begin_ms || b >= p.end_ms) {
          kept.emplace_back(b, e);
          continue;
        }
        if (b < p.begin_ms) kept.emplace_back(b, p.begin_ms);
        if (e > p.end_ms) kept.emplace_back(p.end_ms, e);
        const double cb = std::max(b, p.begin_ms), ce = std::min(e, p.end_ms);
        cut_marks += "<rect class=\"cut\" data-node=\"" + esc(node) + "\" x=\"" + number(x(cb), "%.2f") + "\" y=\"" +
                     number(top + row * s.node + 4, "%.1f") + "\" width=\"" + number(std::max(x(ce) - x(cb), 0.6), "%.2f") +
                     "\" height=\"" + number(row - 8, "%.0f") + "\"><title>" + esc(node) + " cut off by the partition " +
                     esc(p.text) + " (" + number(cb / 1e3) + " s to " + number(ce / 1e3) + " s): not training with " + esc(s.name) +
                     "</title></rect>\n";
        drawn.insert("cut");
      }
      pieces = std::move(kept);
    }
    for (const auto& [b, e] : pieces) {
      const double x0 = x(b), x1 = x(e);
      body += "<rect class=\"" + cls + "\" data-node=\"" + esc(node) + "\" x=\"" + number(x0, "%.2f") + "\" y=\"" + number(y, "%.1f") + "\" width=\"" +
              number(std::max(x1 - x0, 0.6), "%.2f") + "\" height=\"" + number(h, "%.0f") + "\"><title>" + esc(s.name) + ": " +
              esc(s.detail) + " (" + number(static_cast<double>(s.begin_ns) / 1e9) + " s to " +
              number(static_cast<double>(s.end_ns) / 1e9) + " s)</title></rect>\n";
    }
    body += cut_marks;
  }
  // The partitions over the spans, lightly tinted so the rounds show through: a band across the
  // rows, each group's rows tagged at its start.
  for (size_t i = 0; i < bands.size(); ++i) {
    const PartitionBand& p = bands[i];
    const double x0 = x(p.begin_ms), x1 = x(p.end_ms);
    const std::string when = number(p.begin_ms / 1e3) + " s to " + number(p.end_ms / 1e3) + " s";
    body += "<rect class=\"partition\" data-groups=\"" + esc(p.text) + "\" x=\"" + number(x0, "%.2f") + "\" y=\"" +
            number(top, "%.0f") + "\" width=\"" + number(std::max(x1 - x0, 1.0), "%.2f") + "\" height=\"" +
            number(row * nodes, "%.0f") + "\"><title>" + (p.one_way ? "one-way partition " : "partition ") + esc(p.text) + ", " +
            when + "</title></rect>\n";
    // Labels alternate between two lines, so partitions close together stay readable; one in the
    // chart's right half ends at the band's end, so it stays on the page.
    const bool right_half = x0 > left + width / 2;
    body += "<text class=\"partition-label\"" + std::string(right_half ? " text-anchor=\"end\"" : "") + " x=\"" +
            number(right_half ? x1 : x0 + 2, "%.1f") + "\" y=\"" + number(i % 2 == 0 ? 12 : 24, "%.0f") + "\">partition " +
            esc(p.label) + "</text>\n";
    for (size_t g = 0; g < p.groups.size(); ++g) {
      for (const std::string& name : p.groups[g]) {
        const auto n = row_of(name);
        if (!n) continue;
        drawn.insert("partition-group g" + std::to_string(g % 4));
        body += "<rect class=\"partition-group g" + std::to_string(g % 4) + "\" data-node=\"" + esc(name) + "\" x=\"" + number(x0, "%.2f") + "\" y=\"" +
                number(top + row * *n + 2, "%.1f") + "\" width=\"4\" height=\"" + number(row - 4, "%.0f") + "\"><title>" +
                esc(name) + ": " + (p.one_way ? (g == 0 ? "from" : "to") : "group " + std::to_string(g + 1)) + " of the partition " +
                esc(p.text) + "</title></rect>\n";
      }
    }
    drawn.insert("partition");
  }
  // Fault labels on two lines: one within a label's width of the last on its line takes the other.
  double last_label[2] = {-1e9, -1e9};
  for (const nlohmann::json& f : result.faults) {
    if (!f.value("fired", false) || !f.contains("at_ms") || f.value("kind", std::string()) == "partition") continue;
    if (f.value("kind", std::string()) == "heal" && !bands.empty()) continue;  // the bands end there
    const double fx = x(f["at_ms"].get<double>());
    std::string what = f.value("kind", std::string("fault")) + (f.contains("node") && f["node"].is_string() ? " " + f["node"].get<std::string>() : "");
    if (!f.contains("node") && f.contains("target") && f["target"].is_string()) what += " " + f["target"].get<std::string>();
    const int label_line = std::abs(fx - last_label[0]) < 130 && std::abs(fx - last_label[1]) >= 130 ? 1 : 0;
    last_label[label_line] = fx;
    body += "<line class=\"fault\" x1=\"" + number(fx, "%.2f") + "\" x2=\"" + number(fx, "%.2f") + "\" y1=\"" + number(top - 6, "%.0f") +
            "\" y2=\"" + number(top + row * nodes, "%.0f") + "\"><title>" + esc(what) + " at " +
            number(f["at_ms"].get<double>() / 1e3) + " s</title></line><text class=\"fault-label\"" +
            // Near the right edge the label ends at its mark, so it stays on the page.
            (fx > left + width - 100 ? " text-anchor=\"end\" x=\"" + number(fx - 3, "%.1f") : " x=\"" + number(fx + 3, "%.1f")) +
            "\" y=\"" + number(label_line == 0 ? top - 8 : top - 20, "%.0f") + "\">" + esc(what) + "</text>\n";
    drawn.insert("fault");
  }
  const double axis_y = top + row * nodes + 6;
  body += "<line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" + number(left + width, "%.0f") + "\" y1=\"" +
          number(axis_y, "%.0f") + "\" y2=\"" + number(axis_y, "%.0f") + "\"/>\n";
  for (int tick = 0; tick <= 10; ++tick) {
    const double ms = end_ms * tick / 10;
    body += "<text x=\"" + number(x(ms) - (tick == 10 ? 36 : 8), "%.1f") + "\" y=\"" + number(axis_y + 16, "%.0f") + "\">" +
            number(ms / 1e3, "%.1f") + " s</text>\n";
  }
  // The legend: what each kind of mark drawn means, in the order a reader meets them.
  const std::vector<html::LegendItem> all = {
      {"agent", "an agent's life (an incarnation)"},
      {"round", "member of a round"},
      {"round odd", "the next round (colours alternate)"},
      {"restart", "restarting its worker group"},
      {"backward", "backward pass"},
      {"worker", "a worker process (a lane per local rank)"},
      {"struck", "struck by a fault, until its end"},
      {"call", "rendezvous call"},
      {"fault", "fault (kill, crash, pause, restart)"},
      {"partition", "partition, start to heal"},
      {"partition-group g0", "partition group 1 (one-way: from)"},
      {"partition-group g1", "partition group 2 (one-way: to)"},
      {"partition-group g2", "partition group 3"},
      {"partition-group g3", "partition group 4 or later"},
      {"cut", "cut off by a partition: not training"},
  };
  std::vector<html::LegendItem> items;
  for (const html::LegendItem& item : all) {
    if (drawn.contains(item.cls)) items.push_back(item);
  }
  const auto [legend, legend_height] = html::legend_svg("timeline-legend", items, left, axis_y + 28, width);
  body += legend;
  const double height = axis_y + 28 + legend_height + 6;
  // A diagonal hatch for "cut off": reads as "not this colour" beside any round's.
  const std::string defs =
      "<defs><pattern id=\"cut-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
      "<rect width=\"6\" height=\"6\" fill=\"#eceef2\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#8a93a6\" stroke-width=\"2\"/>"
      "</pattern></defs>\n";
  return "<svg id=\"timeline-chart\" width=\"" + number(left + width + 20, "%.0f") + "\" height=\"" + number(height, "%.0f") +
         "\" role=\"img\" aria-label=\"nodes over time\">\n" + defs + body + "</svg>\n";
}

}  // namespace dagsim::cli
