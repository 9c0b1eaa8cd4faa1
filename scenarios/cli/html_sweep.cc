// The sweep page of `dagsim report SUMMARY.json` (html_report.h): first what the sweep found
// (sweep_digest.h: the pass rate, the failures grouped by check and message, the slowest seeds, a
// histogram of run times), then every seed with its verdict, why it failed and its replay line.
#include <algorithm>
#include <string>

#include "scenarios/cli/html_parts.h"
#include "scenarios/cli/html_report.h"
#include "scenarios/cli/sweep_digest.h"

namespace dagsim::cli {
namespace {

using html::esc;
using html::number;

std::string seed_list(const std::vector<uint64_t>& seeds, size_t shown = 12) {
  std::string out;
  for (size_t i = 0; i < seeds.size() && i < shown; ++i) out += (out.empty() ? "" : ", ") + std::to_string(seeds[i]);
  if (seeds.size() > shown) out += ", ... (" + std::to_string(seeds.size() - shown) + " more)";
  return out;
}

// Seeds per run-time bin, passed below failed, one bar per bin.
std::string histogram_svg(const SweepDigest& d) {
  const double left = 40, width = 520, top = 22, height = 140;
  uint64_t most = 1;
  for (const SweepTimeBin& b : d.histogram) most = std::max(most, b.passed + b.failed);
  std::string svg = "<svg id=\"runtime-histogram\" width=\"" + number(left + width + 20, "%.0f") + "\" height=\"" +
                    number(top + height + 58, "%.0f") + "\" role=\"img\" aria-label=\"seeds by run time\">\n";
  svg += "<text class=\"title\" x=\"" + number(left, "%.0f") + "\" y=\"12\">seeds by run time (wall seconds)</text>\n";
  svg += "<line class=\"axis\" x1=\"" + number(left, "%.0f") + "\" x2=\"" + number(left + width, "%.0f") + "\" y1=\"" +
         number(top + height, "%.0f") + "\" y2=\"" + number(top + height, "%.0f") + "\"/>\n";
  svg += "<text x=\"4\" y=\"" + number(top + 10, "%.0f") + "\">" + std::to_string(most) + "</text><text x=\"4\" y=\"" +
         number(top + height, "%.0f") + "\">0</text>\n";
  const double slot = d.histogram.empty() ? width : width / static_cast<double>(d.histogram.size());
  for (size_t i = 0; i < d.histogram.size(); ++i) {
    const SweepTimeBin& b = d.histogram[i];
    const double x = left + slot * static_cast<double>(i) + 1;
    const double pass_h = height * static_cast<double>(b.passed) / static_cast<double>(most);
    const double fail_h = height * static_cast<double>(b.failed) / static_cast<double>(most);
    const std::string range = number(b.from, "%.3g") + " s to " + number(b.to, "%.3g") + " s";
    svg += "<g class=\"bin\" data-passed=\"" + std::to_string(b.passed) + "\" data-failed=\"" + std::to_string(b.failed) + "\">";
    svg += "<rect class=\"bar-pass\" x=\"" + number(x, "%.1f") + "\" y=\"" + number(top + height - pass_h, "%.1f") + "\" width=\"" +
           number(slot - 2, "%.1f") + "\" height=\"" + number(pass_h, "%.1f") + "\"><title>" + std::to_string(b.passed) +
           " passed, " + range + "</title></rect>";
    svg += "<rect class=\"bar-fail\" x=\"" + number(x, "%.1f") + "\" y=\"" + number(top + height - pass_h - fail_h, "%.1f") +
           "\" width=\"" + number(slot - 2, "%.1f") + "\" height=\"" + number(fail_h, "%.1f") + "\"><title>" +
           std::to_string(b.failed) + " failed, " + range + "</title></rect></g>\n";
  }
  if (!d.histogram.empty()) {
    svg += "<text x=\"" + number(left, "%.0f") + "\" y=\"" + number(top + height + 16, "%.0f") + "\">" +
           number(d.histogram.front().from, "%.3g") + " s</text><text text-anchor=\"end\" x=\"" + number(left + width, "%.0f") +
           "\" y=\"" + number(top + height + 16, "%.0f") + "\">" + number(d.histogram.back().to, "%.3g") + " s</text>\n";
  }
  const auto [legend, legend_height] =
      html::legend_svg("runtime-legend", {{"bar-pass", "passed"}, {"bar-fail", "failed"}}, left, top + height + 26, width);
  (void)legend_height;
  return svg + legend + "</svg>\n";
}

std::string summary_section(const SweepSummary& summary, const SweepDigest& d) {
  std::string html = "<section id=\"sweep-summary\">\n<h2>Summary</h2>\n<div class=\"summary-figures\">";
  html += "<div id=\"pass-rate\"><b class=\"" + std::string(d.passed == d.judged ? "pass" : "fail") + "\">" +
          number(100.0 * d.pass_rate, "%.0f") + "%</b>pass rate (" + std::to_string(d.passed) + " of " + std::to_string(d.judged) +
          ")</div>";
  html += "<div><b>" + std::to_string(d.judged - d.passed) + "</b>seeds failed</div>";
  html += "<div><b>" + std::to_string(d.failures.size()) + "</b>distinct failures</div>";
  html += "<div><b>" + number(d.median_seconds, "%.2f") + " s</b>median run time</div>";
  if (!d.slowest.empty()) html += "<div><b>" + number(d.slowest.front().seconds, "%.2f") + " s</b>slowest run</div>";
  html += "</div>\n";
  if (summary.results.size() > d.judged) {
    html += "<p>" + std::to_string(summary.results.size() - d.judged) + " seeds were interrupted and have no verdict.</p>\n";
  }

  html += "<h3>Failures by check and message</h3>\n";
  if (d.failures.empty()) {
    html += "<p id=\"failure-groups\" class=\"pass\">No seed failed.</p>\n";
  } else {
    html += "<table id=\"failure-groups\"><tr><th>check</th><th>seeds</th><th>message (numbers as #)</th><th>which</th></tr>\n";
    for (const SweepFailureGroup& g : d.failures) {
      html += "<tr class=\"failure-group\"><td>" + esc(g.check) + "</td><td>" + std::to_string(g.seeds.size()) +
              "</td><td class=\"mono\" title=\"" + esc("seed " + std::to_string(g.seeds.front()) + ": " + g.example) + "\">" +
              esc(g.pattern) + "</td><td>" + seed_list(g.seeds) + "</td></tr>\n";
    }
    html += "</table>\n";
  }

  html += "<div class=\"charts\"><div><h3>Slowest seeds</h3>\n<table id=\"slowest\"><tr><th>seed</th><th>seconds</th><th>verdict</th>"
          "<th>replay</th></tr>\n";
  for (const SweepSeed& s : d.slowest) {
    html += "<tr class=\"slow " + std::string(s.verdict == "PASSED" ? "pass" : "fail") + "\"><td>" + std::to_string(s.seed) + "</td><td>" +
            number(s.seconds, "%.2f") + "</td><td>" + esc(s.verdict) + "</td><td><code>" + esc(s.replay) + "</code></td></tr>\n";
  }
  html += "</table></div>\n<div><h3>Run times</h3>\n" + histogram_svg(d) + "</div></div>\n</section>\n";
  return html;
}

// Which code probes the seeds hit, by how many seeds, and which none did (`check --probes`).
std::string probes_section(const SweepSummary& summary) {
  std::string html = "<section id=\"probes\">\n<h2>Probes</h2>\n<p>" + std::to_string(summary.probes.size()) + " of " +
                     std::to_string(summary.probes.size() + summary.probes_never_hit.size()) + " probes hit.</p>\n";
  html += "<table id=\"probe-table\"><tr><th>probe</th><th>seeds</th><th>hits</th></tr>\n";
  for (const SweepProbe& p : summary.probes) {
    html += "<tr class=\"probe hit\"><td class=\"mono\">" + esc(p.name) + "</td><td>" + std::to_string(p.seeds) + "</td><td>" +
            std::to_string(p.hits) + "</td></tr>\n";
  }
  for (const std::string& name : summary.probes_never_hit) {
    html += "<tr class=\"probe never fail\"><td class=\"mono\">" + esc(name) + "</td><td>0</td><td>0</td></tr>\n";
  }
  return html + "</table>\n</section>\n";
}

}  // namespace

std::string sweep_report_html(const SweepSummary& summary) {
  const std::string& file = summary.file;
  const uint64_t runs = summary.runs, passed = summary.passed;
  const SweepDigest digest = digest_sweep(summary);
  std::string body = "<h1>" + esc(file) + ": seeds " + esc(summary.seeds) + "</h1>\n";
  body += "<p id=\"verdict\" class=\"" + std::string(passed == runs ? "pass" : "fail") + "\">" + std::to_string(passed) + " of " +
          std::to_string(runs) + " seeds passed</p>\n";
  if (!summary.note.empty()) body += "<p id=\"sweep-note\" class=\"note\"><b>Note:</b> " + esc(summary.note) + "</p>\n";
  body += summary_section(summary, digest);
  if (summary.has_probes) body += probes_section(summary);
  body += "<h2>Every seed</h2>\n<table id=\"seeds\"><tr><th>seed</th><th>verdict</th><th>seconds</th><th>why</th><th>replay</th></tr>\n";
  for (const SweepSeed& s : summary.results) {
    body += "<tr class=\"seed " + std::string(s.verdict == "PASSED" ? "pass" : "fail") + "\"><td>" + std::to_string(s.seed) +
            "</td><td>" + esc(s.verdict) + "</td><td>" + number(s.seconds, "%.2f") + "</td><td class=\"mono\">" +
            esc(s.summary) + "</td><td><code>" + esc(s.replay) + "</code></td></tr>\n";
  }
  body += "</table>\n";
  return html::page("dagsim check: " + file, body);
}

}  // namespace dagsim::cli
