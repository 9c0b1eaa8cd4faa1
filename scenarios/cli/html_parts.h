// html_parts: the small pieces every `dagsim report` page is written with (html_report.h): text
// escaped for HTML, numbers printed in a fixed format, the page's one stylesheet, the page around
// a body, and a legend of coloured swatches.
//
// Promises: esc() escapes everything a run or a summary chose (junit.h's xml_escape), so no text
// from a file can become markup; number() is locale-free printf, so the same values give the same
// bytes; the stylesheet names every class the pages draw with, so a test that finds an element by
// its class finds what the reader sees.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "scenarios/cli/junit.h"

namespace dagsim::cli::html {

inline std::string esc(std::string_view text) { return xml_escape(text); }

inline std::string number(double v, const char* format = "%.3f") {
  char text[48];
  std::snprintf(text, sizeof(text), format, v);
  return text;
}

inline constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2330; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; } h3 { font-size: 14px; margin: 16px 0 6px; }
.pass { color: #17803d; } .fail { color: #b3261e; }
#verdict { font-weight: 600; }
table { border-collapse: collapse; width: 100%; } td, th { border-bottom: 1px solid #e3e6ec; padding: 4px 8px;
  text-align: left; vertical-align: top; } th { background: #f4f6f9; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12px; }
td code { white-space: nowrap; }
svg text { font: 11px system-ui, sans-serif; fill: #1d2330; }
svg text.title { font-weight: 600; }
.round { fill: #9cc3e6; stroke: #3b78b0; stroke-width: 0.5; } .round.odd { fill: #b9e0b0; stroke: #4b8a3c; }
.agent { fill: #e4e8f0; stroke: #8a93a6; stroke-width: 0.5; } .worker { fill: #3b78b0; opacity: 0.8; }
.struck { fill: #b3261e; fill-opacity: 0.18; stroke: #b3261e; stroke-width: 0.8; } .note { background: #fff6d6; padding: 6px 10px; }
.restart { fill: #f2b8b5; } .backward { fill: #6c5ba8; opacity: 0.55; } .call { fill: #d9c27a; }
.fault { stroke: #b3261e; stroke-width: 1.5; } .fault-label { fill: #b3261e; }
.partition { fill: #8e6bbf; fill-opacity: 0.14; stroke: #8e6bbf; stroke-width: 1; stroke-dasharray: 4 2; }
.partition-label { fill: #5d3f8a; }
.partition-group { fill: #8e6bbf; } .partition-group.g1 { fill: #d08c3a; } .partition-group.g2 { fill: #3a9b8f; }
.partition-group.g3 { fill: #b34a78; }
.cut { fill: url(#cut-hatch); stroke: #8a93a6; stroke-width: 0.5; }
.node-row { fill: #f7f8fa; } .axis { stroke: #8a93a6; stroke-width: 1; } .grid { stroke: #e3e6ec; stroke-width: 1; }
.loss-dagsim { fill: none; stroke: #3b78b0; stroke-width: 2.5; }
.loss-local { fill: none; stroke: #e08a1e; stroke-width: 1.5; stroke-dasharray: 5 3; }
.loss-difference { fill: none; stroke: #6c5ba8; stroke-width: 1.5; } .zero { stroke: #17803d; stroke-width: 1; }
.bar-pass { fill: #7fc495; } .bar-fail { fill: #e48c86; }
.charts { display: flex; gap: 16px; flex-wrap: wrap; align-items: flex-start; }
.summary-figures { display: flex; gap: 32px; margin: 8px 0 16px; } .summary-figures div { font-size: 13px; }
.summary-figures b { display: block; font-size: 22px; }
ol.story li { font-family: ui-monospace, monospace; font-size: 12px; }
)";

inline std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) + "</title><style>" + kStyle +
         "</style></head><body>\n" + body + "</body></html>\n";
}

// One legend entry: the class its swatch is drawn with (a rect, or a line for "fault"), and what
// it means.
struct LegendItem {
  std::string cls;
  std::string meaning;
};

// A legend as an SVG group at (x, y), one swatch and its words after another, wrapping at `width`;
// each item a <g class="legend-item" data-kind=CLS>. Returns the markup and the height it took.
inline std::pair<std::string, double> legend_svg(const std::string& id, const std::vector<LegendItem>& items, double x, double y,
                                                 double width) {
  std::string svg = "<g id=\"" + esc(id) + "\" class=\"legend\">\n";
  double at = x, line = y;
  for (const LegendItem& item : items) {
    // About 6 px a character at 11 px: enough to keep entries apart without measuring text.
    const double item_width = 22 + 6.2 * static_cast<double>(item.meaning.size()) + 18;
    if (at > x && at + item_width > x + width) {
      at = x;
      line += 18;
    }
    svg += "<g class=\"legend-item\" data-kind=\"" + esc(item.cls) + "\">";
    if (item.cls == "fault") {
      svg += "<line class=\"fault swatch\" x1=\"" + number(at + 8, "%.1f") + "\" x2=\"" + number(at + 8, "%.1f") + "\" y1=\"" +
             number(line - 1, "%.1f") + "\" y2=\"" + number(line + 11, "%.1f") + "\"/>";
    } else {
      svg += "<rect class=\"" + esc(item.cls) + " swatch\" x=\"" + number(at, "%.1f") + "\" y=\"" + number(line, "%.1f") +
             "\" width=\"16\" height=\"10\"/>";
    }
    svg += "<text x=\"" + number(at + 22, "%.1f") + "\" y=\"" + number(line + 9, "%.1f") + "\">" + esc(item.meaning) + "</text></g>\n";
    at += item_width;
  }
  return {svg + "</g>\n", line - y + 18};
}

}  // namespace dagsim::cli::html
