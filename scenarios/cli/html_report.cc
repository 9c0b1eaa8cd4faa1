#include "scenarios/cli/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "scenarios/cli/junit.h"
#include "scenarios/cli/report.h"

namespace dagsim::cli {
namespace {

std::string esc(std::string_view text) { return xml_escape(text); }

std::string number(double v, const char* format = "%.3f") {
  char text[48];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2330; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; }
.pass { color: #17803d; } .fail { color: #b3261e; }
#verdict { font-weight: 600; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #e3e6ec; padding: 4px 8px;
  text-align: left; vertical-align: top; } th { background: #f4f6f9; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12px; }
td code { white-space: nowrap; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2330; }
.round { fill: #9cc3e6; stroke: #3b78b0; stroke-width: 0.5; } .round.odd { fill: #b9e0b0; stroke: #4b8a3c; }
.restart { fill: #f2b8b5; } .backward { fill: #6c5ba8; opacity: 0.55; } .call { fill: #d9c27a; }
.fault { stroke: #b3261e; stroke-width: 1.5; } .fault-label { fill: #b3261e; }
.node-row { fill: #f7f8fa; } .axis { stroke: #8a93a6; stroke-width: 1; }
.loss-dagsim { fill: none; stroke: #3b78b0; stroke-width: 2; }
.loss-local { fill: none; stroke: #e08a1e; stroke-width: 1.5; stroke-dasharray: 5 3; }
ol.story li { font-family: ui-monospace, monospace; font-size: 12px; }
)";

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) + "</title><style>" + kStyle +
         "</style></head><body>\n" + body + "</body></html>\n";
}

// The nodes over time: one row per node, the workload's spans on it, the faults as marks.
std::string timeline_svg(const scenarios::Scenario& scenario, const scenarios::RunResult& result) {
  const uint32_t nodes = scenario.cluster.nodes;
  const double end_ms = std::max(result.virtual_time_ms, 1.0);
  const double left = 90, width = 1060, row = 22, top = 24;
  const double height = top + row * nodes + 30;
  auto x = [&](double ms) { return left + width * std::clamp(ms / end_ms, 0.0, 1.0); };
  std::string svg = "<svg id=\"timeline-chart\" width=\"" + number(left + width + 20, "%.0f") + "\" height=\"" +
                    number(height, "%.0f") + "\" role=\"img\" aria-label=\"nodes over time\">\n";
  for (uint32_t n = 0; n < nodes; ++n) {
    const double y = top + row * n;
    svg += "<rect class=\"node-row\" data-node=\"" + esc(scenario.cluster.node_name(n)) + "\" x=\"" + number(left, "%.0f") +
           "\" y=\"" + number(y + 2, "%.1f") + "\" width=\"" + number(width, "%.0f") + "\" height=\"" + number(row - 4, "%.0f") +
           "\"/><text x=\"4\" y=\"" + number(y + row * 0.65, "%.1f") + "\">" + esc(scenario.cluster.node_name(n)) + "</text>\n";
  }
  for (const scenarios::WorkloadSpan& s : result.spans) {
    if (s.node >= nodes || s.category == "step") continue;  // steps are too many to draw; the loss chart has them
    std::string cls = s.category == "round" ? "round" : s.category == "restart" ? "restart"
                      : s.category == "backward"                                ? "backward"
                                                                                : "call";
    if (cls == "round") {
      // Alternate colours by round number, so consecutive rounds read apart.
      const size_t space = s.name.find(' ');
      const int round = space == std::string::npos ? 0 : std::atoi(s.name.c_str() + space + 1);
      if (round % 2 == 1) cls += " odd";
    }
    const double y = top + row * s.node + (cls == "backward" ? 12 : 4);
    const double h = cls == "backward" ? 6 : row - 8;
    const double x0 = x(static_cast<double>(s.begin_ns) / 1e6), x1 = x(static_cast<double>(s.end_ns) / 1e6);
    svg += "<rect class=\"" + cls + "\" x=\"" + number(x0, "%.2f") + "\" y=\"" + number(y, "%.1f") + "\" width=\"" +
           number(std::max(x1 - x0, 0.6), "%.2f") + "\" height=\"" + number(h, "%.0f") + "\"><title>" + esc(s.name) + ": " +
           esc(s.detail) + " (" + number(static_cast<double>(s.begin_ns) / 1e9) + " s to " +
           number(static_cast<double>(s.end_ns) / 1e9) + " s)</title></rect>\n";
  }
  for (const nlohmann::json& f : result.faults) {
    if (!f.value("fired", false) || !f.contains("at_ms")) continue;
    const double fx = x(f["at_ms"].get<double>());
    const std::string what = f.value("kind", std::string("fault")) + (f.contains("node") && f["node"].is_string() ? " " + f["node"].get<std::string>() : "");
    svg += "<line class=\"fault\" x1=\"" + number(fx, "%.2f") + "\" x2=\"" + number(fx, "%.2f") + "\" y1=\"" + number(top - 6, "%.0f") +
           "\" y2=\"" + number(top + row * nodes, "%.0f") + "\"><title>" + esc(what) + " at " +
           number(f["at_ms"].get<double>() / 1e3) + " s</title></line><text class=\"fault-label\" x=\"" + number(fx + 3, "%.1f") +
           "\" y=\"" + number(top - 8, "%.0f") + "\">" + esc(what) + "</text>\n";
  }
  const double axis_y = top + row * nodes + 6;
  svg += "<line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" + number(left + width, "%.0f") + "\" y1=\"" +
         number(axis_y, "%.0f") + "\" y2=\"" + number(axis_y, "%.0f") + "\"/>\n";
  for (int tick = 0; tick <= 10; ++tick) {
    const double ms = end_ms * tick / 10;
    svg += "<text x=\"" + number(x(ms) - (tick == 10 ? 36 : 8), "%.1f") + "\" y=\"" + number(axis_y + 16, "%.0f") + "\">" +
           number(ms / 1e3, "%.1f") + " s</text>\n";
  }
  return svg + "</svg>\n";
}

// The loss per step, dagsim's beside local training's.
std::string loss_svg(const nlohmann::json& losses, const nlohmann::json& local) {
  std::vector<std::optional<double>> mine, theirs;
  for (const nlohmann::json& v : losses) mine.push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
  for (const nlohmann::json& v : local) theirs.push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* series : {&mine, &theirs}) {
    for (const auto& v : *series) {
      if (v && std::isfinite(*v)) {
        lo = std::min(lo, *v);
        hi = std::max(hi, *v);
      }
    }
  }
  if (!std::isfinite(lo)) return "<p>No loss was recorded.</p>\n";
  if (hi <= lo) hi = lo + 1e-12;
  const double left = 60, width = 1060, top = 10, height = 220;
  const size_t steps = std::max<size_t>({mine.size(), theirs.size(), 2});
  auto point = [&](size_t i, double v) {
    return number(left + width * static_cast<double>(i) / static_cast<double>(steps - 1), "%.2f") + "," +
           number(top + height * (1 - (v - lo) / (hi - lo)), "%.2f");
  };
  auto polyline = [&](const std::vector<std::optional<double>>& series, const char* cls) {
    std::string points;
    for (size_t i = 0; i < series.size(); ++i) {
      if (series[i] && std::isfinite(*series[i])) points += (points.empty() ? "" : " ") + point(i, *series[i]);
    }
    return "<polyline class=\"" + std::string(cls) + "\" points=\"" + points + "\"/>\n";
  };
  std::string svg = "<svg id=\"loss-chart\" width=\"" + number(left + width + 20, "%.0f") + "\" height=\"" +
                    number(top + height + 40, "%.0f") + "\" role=\"img\" aria-label=\"loss per step\">\n";
  svg += "<line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" + number(left, "%.0f") + "\" y1=\"" + number(top, "%.0f") +
         "\" y2=\"" + number(top + height, "%.0f") + "\"/><line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" +
         number(left + width, "%.0f") + "\" y1=\"" + number(top + height, "%.0f") + "\" y2=\"" + number(top + height, "%.0f") + "\"/>\n";
  svg += "<text x=\"4\" y=\"" + number(top + 10, "%.0f") + "\">" + number(hi, "%.4g") + "</text><text x=\"4\" y=\"" +
         number(top + height, "%.0f") + "\">" + number(lo, "%.4g") + "</text>\n";
  svg += "<text x=\"" + number(left, "%.0f") + "\" y=\"" + number(top + height + 18, "%.0f") + "\">step 1</text><text x=\"" +
         number(left + width - 60, "%.0f") + "\" y=\"" + number(top + height + 18, "%.0f") + "\">step " + std::to_string(steps) + "</text>\n";
  // Local training on top, dashed: where the two agree (they should) both stay visible.
  svg += polyline(mine, "loss-dagsim") + polyline(theirs, "loss-local");
  svg += "<text x=\"" + number(left + 10, "%.0f") + "\" y=\"" + number(top + height + 34, "%.0f") +
         "\"><tspan style=\"fill:#3b78b0\">&#8212; dagsim</tspan>   <tspan style=\"fill:#e08a1e\">- - local training</tspan></text>\n";
  return svg + "</svg>\n";
}

std::string rounds_table(const nlohmann::json& rounds) {
  std::string html = "<table id=\"rounds\"><tr><th>round</th><th>completed</th><th>members (rank)</th><th>left</th></tr>\n";
  for (const nlohmann::json& r : rounds) {
    std::string members, left;
    for (const nlohmann::json& m : r.value("members", nlohmann::json::array())) {
      members += (members.empty() ? "" : ", ") + esc(m.value("node", std::string("?"))) + " (" + std::to_string(m.value("rank", 0)) + ")";
    }
    for (const nlohmann::json& gone : r.value("removed", nlohmann::json::array())) {
      left += (left.empty() ? "" : ", ") + esc(gone.value("node", std::string("?"))) + " (" + esc(gone.value("why", std::string("?"))) + ")";
    }
    html += "<tr><td>" + std::to_string(r.value("round", 0)) + (r.value("store_life", 0) > 0 ? " (store life " + std::to_string(r.value("store_life", 0) + 1) + ")" : "") +
            "</td><td>" + number(r.value("completed_ms", 0.0) / 1e3) + " s</td><td>" + members + "</td><td>" + left + "</td></tr>\n";
  }
  return html + "</table>\n";
}

}  // namespace

std::string run_report_html(const scenarios::Scenario& scenario, const std::string& file, const scenarios::RunResult& result) {
  const nlohmann::json& w = result.workload;
  std::string body = "<h1>" + esc(result.scenario) + ", seed " + std::to_string(result.seed) + "</h1>\n";
  body += "<p id=\"verdict\" class=\"" + std::string(result.passed ? "pass" : "fail") + "\">" +
          (result.passed ? "PASSED" : "FAILED") + "</p>\n";
  body += "<p>" + esc(file) + ", transport " + esc(result.transport) + ": " + esc(result.outcome) + " at " +
          number(result.virtual_time_ms / 1e3) + " s " + (result.transport == "sim" ? "virtual" : "scenario time") + "; " +
          std::to_string(result.messages) + " messages, " + std::to_string(result.messages_dropped) + " dropped, " +
          std::to_string(result.connection_failures) + " connection failures. Replay: <code>" +
          esc(replay_command(file, result.seed, result.transport == "sim" ? "" : " --transport " + result.transport)) + "</code></p>\n";
  body += "<h2>Timeline</h2>\n" + timeline_svg(scenario, result);
  if (w.contains("losses") && w["losses"].is_array() && !w["losses"].empty()) {
    body += "<h2>Loss</h2>\n" + loss_svg(w["losses"], w.value("local_losses", nlohmann::json::array()));
  }
  if (w.contains("rendezvous") && w["rendezvous"].is_array() && !w["rendezvous"].empty()) {
    body += "<h2>Rounds</h2>\n" + rounds_table(w["rendezvous"]);
  }
  body += "<h2>Checks</h2>\n<table id=\"checks\"><tr><th>check</th><th>verdict</th><th>detail</th></tr>\n";
  for (const scenarios::CheckResult& c : result.checks) {
    body += "<tr class=\"check " + std::string(c.passed ? "pass" : "fail") + "\"><td>" + esc(c.name) + "</td><td>" +
            (c.passed ? "PASS" : "FAIL") + "</td><td class=\"mono\">" + esc(c.detail) + "</td></tr>\n";
  }
  body += "</table>\n";
  if (w.contains("timeline") && w["timeline"].is_array()) {
    body += "<h2>What happened</h2>\n<ol class=\"story\">\n";
    for (const nlohmann::json& line : w["timeline"]) {
      if (line.is_string()) body += "<li>" + esc(line.get<std::string>()) + "</li>\n";
    }
    body += "</ol>\n";
  }
  return page("dagsim: " + result.scenario + " seed " + std::to_string(result.seed), body);
}

std::string sweep_report_html(const SweepSummary& summary) {
  const std::string& file = summary.file;
  const uint64_t runs = summary.runs, passed = summary.passed;
  std::string body = "<h1>" + esc(file) + ": seeds " + esc(summary.seeds) + "</h1>\n";
  body += "<p id=\"verdict\" class=\"" + std::string(passed == runs ? "pass" : "fail") + "\">" + std::to_string(passed) + " of " +
          std::to_string(runs) + " seeds passed</p>\n";
  body += "<table id=\"seeds\"><tr><th>seed</th><th>verdict</th><th>seconds</th><th>why</th><th>replay</th></tr>\n";
  for (const SweepSeed& s : summary.results) {
    body += "<tr class=\"seed " + std::string(s.verdict == "PASSED" ? "pass" : "fail") + "\"><td>" + std::to_string(s.seed) +
            "</td><td>" + esc(s.verdict) + "</td><td>" + number(s.seconds, "%.2f") + "</td><td class=\"mono\">" +
            esc(s.summary) + "</td><td><code>" + esc(s.replay) + "</code></td></tr>\n";
  }
  body += "</table>\n";
  return page("dagsim check: " + file, body);
}

}  // namespace dagsim::cli
