// `dagsim report PATH [-o OUT.html]`: PATH is a run's records directory (`dagsim run --records`,
// a TCP run's records included) or the JSON summary of a sweep (`dagsim check --json`); either
// becomes one self-contained HTML page (html_report.h). Exit 0 when the page was written, 2 when
// PATH cannot be read or OUT cannot be written, naming which.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/html_report.h"
#include "scenarios/cli/sweep_summary.h"

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
    // Read as any file argument is (a FIFO or device refused at once, a size bound), every field
    // the page uses type-checked: a bad file is exit 2 naming it, and the field.
    try {
      html = sweep_report_html(read_sweep_summary(args.path));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      const bool missing = e.detail().find(": cannot open") != std::string::npos;
      std::cerr << "dagsim report: " << e.detail()
                << (missing ? " (expected a records directory or a `dagsim check --json` summary)" : "") << "\n";
      return kBadInput;
    }
  }
  std::ofstream out(args.out, std::ios::binary | std::ios::trunc);
  out << html;
  out.close();
  if (!out) {
    std::cerr << "dagsim report: -o " << printable(args.out, kPathMax) << ": cannot write it\n";
    return kBadInput;
  }
  std::cout << printable(args.out, kPathMax) << "\n";  // the page written (a flag chose it: escaped)
  return kPassed;
}

}  // namespace dagsim::cli
