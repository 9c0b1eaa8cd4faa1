// The run page of `dagsim report` (html_report.h): the verdict, the timeline (html_timeline.h),
// the loss beside local training's and their difference, the rounds, the checks and the story.
#include "scenarios/cli/html_report.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "scenarios/cli/html_parts.h"
#include "scenarios/cli/html_timeline.h"
#include "scenarios/cli/report.h"

namespace dagsim::cli {
namespace {

using html::esc;
using html::number;

using Series = std::vector<std::optional<double>>;

Series series_of(const nlohmann::json& values) {
  Series out;
  for (const nlohmann::json& v : values) out.push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
  return out;
}

// One chart of per-step series on a shared scale: axes, the extremes, the first and last step,
// and a polyline per series (a point per step that has a finite value).
struct Chart {
  std::string id, label;
  double left = 60, width = 700, top = 10, height = 220;
  double lo = 0, hi = 1;
  size_t steps = 2;
  bool scale = true;  // label the extremes (a chart of zeros has no scale to label)

  std::string point(size_t i, double v) const {
    return number(left + width * static_cast<double>(i) / static_cast<double>(steps - 1), "%.2f") + "," +
           number(top + height * (1 - (v - lo) / (hi - lo)), "%.2f");
  }
  std::string polyline(const Series& series, const char* cls) const {
    std::string points;
    for (size_t i = 0; i < series.size(); ++i) {
      if (series[i] && std::isfinite(*series[i])) points += (points.empty() ? "" : " ") + point(i, *series[i]);
    }
    return "<polyline class=\"" + std::string(cls) + "\" points=\"" + points + "\"/>\n";
  }
  std::string open(const std::string& title) const {
    std::string svg = "<svg id=\"" + id + "\" width=\"" + number(left + width + 20, "%.0f") + "\" height=\"" +
                      number(top + height + 44, "%.0f") + "\" role=\"img\" aria-label=\"" + esc(label) + "\">\n";
    svg += "<text class=\"title\" x=\"" + number(left, "%.0f") + "\" y=\"12\">" + esc(title) + "</text>\n";
    svg += "<line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" + number(left, "%.0f") + "\" y1=\"" + number(top, "%.0f") +
           "\" y2=\"" + number(top + height, "%.0f") + "\"/><line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" +
           number(left + width, "%.0f") + "\" y1=\"" + number(top + height, "%.0f") + "\" y2=\"" + number(top + height, "%.0f") + "\"/>\n";
    if (scale) {
      svg += "<text x=\"4\" y=\"" + number(top + 10, "%.0f") + "\">" + number(hi, "%.4g") + "</text><text x=\"4\" y=\"" +
             number(top + height, "%.0f") + "\">" + number(lo, "%.4g") + "</text>\n";
    }
    svg += "<text x=\"" + number(left, "%.0f") + "\" y=\"" + number(top + height + 18, "%.0f") + "\">step 1</text><text x=\"" +
           number(left + width - 60, "%.0f") + "\" y=\"" + number(top + height + 18, "%.0f") + "\">step " + std::to_string(steps) +
           "</text>\n";
    return svg;
  }
};

// The loss per step, dagsim's beside local training's, and beside them the difference of the two
// per step: where the curves agree (they should) the one hides the other, so the difference is
// what shows that they do.
std::string loss_charts(const nlohmann::json& losses, const nlohmann::json& local) {
  const Series mine = series_of(losses), theirs = series_of(local);
  double lo = INFINITY, hi = -INFINITY;
  for (const Series* series : {&mine, &theirs}) {
    for (const auto& v : *series) {
      if (v && std::isfinite(*v)) {
        lo = std::min(lo, *v);
        hi = std::max(hi, *v);
      }
    }
  }
  if (!std::isfinite(lo)) return "<p>No loss was recorded.</p>\n";
  const size_t steps = std::max<size_t>({mine.size(), theirs.size(), 2});
  Chart loss{"loss-chart", "loss per step", 60, 640, 22, 220, std::min(lo, 0.0), hi > lo ? hi : lo + 1e-12, steps};
  if (loss.hi <= loss.lo) loss.hi = loss.lo + 1e-12;
  std::string svg = loss.open("loss per step");
  // Local training on top, dashed: where the two agree both stay visible.
  svg += loss.polyline(mine, "loss-dagsim") + loss.polyline(theirs, "loss-local");
  svg += "<text x=\"" + number(loss.left + 10, "%.0f") + "\" y=\"" + number(loss.top + loss.height + 36, "%.0f") +
         "\"><tspan style=\"fill:#3b78b0\">&#8212; dagsim</tspan>   <tspan style=\"fill:#e08a1e\">- - local training</tspan></text>\n";
  svg += "</svg>\n";

  // dagsim's minus local training's, step by step, on a scale symmetric about zero.
  Series difference;
  double largest = 0;
  size_t compared = 0;
  for (size_t i = 0; i < std::min(mine.size(), theirs.size()); ++i) {
    if (mine[i] && theirs[i] && std::isfinite(*mine[i]) && std::isfinite(*theirs[i])) {
      difference.push_back(*mine[i] - *theirs[i]);
      largest = std::max(largest, std::fabs(*difference.back()));
      ++compared;
    } else {
      difference.push_back(std::nullopt);
    }
  }
  const double bound = largest > 0 ? largest : 1.0;
  Chart diff{"loss-difference-chart", "dagsim's loss minus local training's, per step", 60, 320, 22, 220, -bound, bound, steps};
  diff.scale = largest > 0;
  std::string d = diff.open("dagsim minus local training");
  const double zero_y = diff.top + diff.height / 2;
  d += "<text x=\"4\" y=\"" + number(zero_y + 4, "%.0f") + "\">0</text>\n";
  d += "<line class=\"zero\" x1=\"" + number(diff.left, "%.0f") + "\" x2=\"" + number(diff.left + diff.width, "%.0f") + "\" y1=\"" +
       number(zero_y, "%.1f") + "\" y2=\"" + number(zero_y, "%.1f") + "\"/>\n";
  d += diff.polyline(difference, "loss-difference");
  const std::string verdict = compared == 0 ? "no step to compare"
                              : largest == 0 ? "0 at every one of " + std::to_string(compared) + " steps"
                                             : "largest |difference| " + number(largest, "%.3g") + " over " + std::to_string(compared) + " steps";
  d += "<text id=\"loss-difference-verdict\" x=\"" + number(diff.left + 10, "%.0f") + "\" y=\"" +
       number(diff.top + diff.height + 36, "%.0f") + "\">" + esc(verdict) + "</text>\n</svg>\n";
  return "<div class=\"charts\">\n" + svg + d + "</div>\n";
}

std::string rounds_table(const nlohmann::json& rounds) {
  std::string html = "<table id=\"rounds\"><tr><th>round</th><th>completed</th><th>members (rank)</th><th>left</th></tr>\n";
  for (const nlohmann::json& r : rounds) {
    std::string members, left;
    for (const nlohmann::json& m : r.value("members", nlohmann::json::array())) {
      members += (members.empty() ? "" : ", ") + esc(m.value("node", std::string("?"))) + " (" + std::to_string(m.value("rank", 0)) + ")";
    }
    for (const nlohmann::json& gone : r.value("removed", nlohmann::json::array())) {
      // "worker3 (killed, 2.020 s)": who, why and when, as each workload records it.
      std::string when;
      if (gone.contains("at_ms") && gone["at_ms"].is_number()) when = ", " + number(gone["at_ms"].get<double>() / 1e3) + " s";
      left += (left.empty() ? "" : ", ") + esc(gone.value("node", std::string("?"))) + " (" + esc(gone.value("why", std::string("?"))) +
              when + ")";
    }
    html += "<tr><td>" + std::to_string(r.value("round", 0)) + (r.value("store_life", 0) > 0 ? " (store life " + std::to_string(r.value("store_life", 0) + 1) + ")" : "") +
            "</td><td>" + number(r.value("completed_ms", 0.0) / 1e3) + " s</td><td>" + members + "</td><td class=\"left\">" + left + "</td></tr>\n";
  }
  return html + "</table>\n";
}

}  // namespace

std::string run_report_html(const scenarios::Scenario& scenario, const std::string& file, const scenarios::RunResult& result) {
  const nlohmann::json& w = result.workload;
  std::string body = "<h1>" + esc(result.scenario) + ", seed " + std::to_string(result.seed) + "</h1>\n";
  body += "<p id=\"verdict\" class=\"" + std::string(result.passed ? "pass" : "fail") + "\">" +
          (result.passed ? "PASSED" : "FAILED") + "</p>\n";
  if (result.transport == "job") {
    // A real job: the seed fixes its fault schedule, never what its processes do.
    const nlohmann::json job = w.value("job", nlohmann::json::object());
    body += "<p id=\"job-note\" class=\"note\"><b>Note:</b> " + esc(job.value("note", std::string())) + ".</p>\n";
    body += "<p>" + esc(file) + ": a " + esc(job.value("launcher", std::string("?"))) + " job, rendezvous backend " +
            esc(job.value("rdzv_backend", std::string("?"))) + ", in <code>" + esc(job.value("dir", std::string())) + "</code>: " +
            esc(result.outcome) + " at " + number(result.virtual_time_ms / 1e3) + " s wall time. Rerun (the same fault schedule): <code>" +
            esc(replay_command(file, result.seed)) + "</code></p>\n";
  } else {
  body += "<p>" + esc(file) + ", transport " + esc(result.transport) + ": " + esc(result.outcome) + " at " +
          number(result.virtual_time_ms / 1e3) + " s " + (result.transport == "sim" ? "virtual" : "scenario time") + "; " +
          std::to_string(result.messages) + " messages, " + std::to_string(result.messages_dropped) + " dropped, " +
          std::to_string(result.connection_failures) + " connection failures. Replay: <code>" +
          esc(replay_command(file, result.seed, result.transport == "sim" ? "" : " --transport " + result.transport)) + "</code></p>\n";
  }
  body += "<h2>Timeline</h2>\n" + timeline_svg(scenario, result);
  if (w.contains("losses") && w["losses"].is_array() && !w["losses"].empty()) {
    body += "<h2>Loss</h2>\n" + loss_charts(w["losses"], w.value("local_losses", nlohmann::json::array()));
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
  return html::page("dagsim: " + result.scenario + " seed " + std::to_string(result.seed), body);
}

}  // namespace dagsim::cli
