// `dagsim report PATH [-o OUT.html]`: PATH is a run's records directory (`dagsim run --records`,
// a TCP run's records included) or the JSON summary of a sweep (`dagsim check --json`); either
// becomes one self-contained HTML page (html_report.h). Exit 0 when the page was written, 2 when
// PATH cannot be read or OUT cannot be written, naming which.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/base/printable.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/html_report.h"

namespace dagsim::cli {

int report_command(const ReportArgs& args) {
  std::string html;
  std::error_code ec;
  if (std::filesystem::is_directory(args.path, ec)) {
    scenarios::ReportOptions report;
    report.spans = true;
    const std::optional<JudgedRun> run = judge_records_dir(args.path, report, "dagsim report");
    if (!run) return kBadInput;
    html = run_report_html(run->scenario, run->file, run->result);
  } else {
    std::ifstream in(args.path, std::ios::binary);
    if (!in) {
      std::cerr << "dagsim report: " << printable(args.path, kPathMax)
                << ": cannot read it (expected a records directory or a `dagsim check --json` summary)\n";
      return kBadInput;
    }
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json summary;
    try {
      summary = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
      std::cerr << "dagsim report: " << printable(args.path, kPathMax) << ": not JSON: " << e.what() << "\n";
      return kBadInput;
    }
    if (!summary.is_object() || !summary.contains("results") || !summary["results"].is_array()) {
      std::cerr << "dagsim report: " << printable(args.path, kPathMax)
                << ": not a `dagsim check --json` summary (no \"results\" list)\n";
      return kBadInput;
    }
    html = sweep_report_html(summary);
  }
  std::ofstream out(args.out, std::ios::binary | std::ios::trunc);
  out << html;
  out.close();
  if (!out) {
    std::cerr << "dagsim report: -o " << printable(args.out, kPathMax) << ": cannot write it\n";
    return kBadInput;
  }
  std::cout << args.out << "\n";
  return kPassed;
}

}  // namespace dagsim::cli
