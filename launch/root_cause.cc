// The root-cause report (root_cause.h).
#include "launch/root_cause.h"

#include <string.h>
#include <time.h>

#include <algorithm>
#include <sstream>

#include "core/base/assert.h"
#include "core/base/printable.h"

namespace dagsim::launch {

namespace {

// PyTorch's datetime.fromtimestamp(t).isoformat(sep="_"): local time.
std::string iso_local(int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm parts{};
  ::localtime_r(&t, &parts);
  char text[32];
  return std::string(text, std::strftime(text, sizeof text, "%Y-%m-%d_%H:%M:%S", &parts));
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Each line of `text` escaped on its own, so a traceback keeps its lines; at most kTracebackLines,
// the last ones.
std::vector<std::string> escaped_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<std::string> out;
  if (lines.size() > kTracebackLines) {
    out.push_back("(" + std::to_string(lines.size() - kTracebackLines) + " earlier lines not shown)");
    lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(kTracebackLines));
  }
  for (const std::string& line : lines) out.push_back(printable(line, 1024));
  return out;
}

// PyTorch's _format_failure: the message is the traceback when there is one, else the error's
// message, else what a signal or a missing file says.
std::vector<std::string> traceback_of(const net::WorkerFailureRecord& f) {
  if (!f.error.problem.empty()) {
    std::vector<std::string> lines = {"(the error file is not torchelastic's: " + printable(f.error.problem, 400) + "; it holds:)"};
    for (std::string& line : escaped_lines(f.error.text)) lines.push_back(std::move(line));
    return lines;
  }
  if (!f.error.traceback.empty()) return escaped_lines(f.error.traceback);
  if (!f.error.message.empty()) return escaped_lines(f.error.message);
  if (f.signal != 0) {
    return {"Signal " + std::to_string(f.signal) + " (" + signal_name(f.signal) + ") received by PID " + std::to_string(f.pid)};
  }
  return {"To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"};
}

std::string format_failure(size_t index, const std::string& host, const net::WorkerFailureRecord& f) {
  std::string out = "[" + std::to_string(index) + "]:\n";
  out += "  time      : " + iso_local(f.timestamp()) + "\n";
  out += "  host      : " + printable(host, 256) + "\n";
  out += "  rank      : " + std::to_string(f.global_rank) + " (local_rank: " + std::to_string(f.local_rank) + ")\n";
  const std::string code = f.signal != 0 ? std::to_string(-f.signal) + " (" + signal_name(f.signal) + ")" : std::to_string(f.exit_code);
  out += "  exitcode  : " + code + " (pid: " + std::to_string(f.pid) + ")\n";
  out += "  error_file: " + (f.error_file.empty() ? std::string("<N/A>") : printable(f.error_file, kPathMax)) + "\n";
  const std::vector<std::string> lines = traceback_of(f);
  for (size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? "  traceback : " : "  ") + lines[i] + "\n";
  return out;
}

size_t widest(const std::string& text) {
  size_t width = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) width = std::max(width, line.size());
  return width;
}

}  // namespace

std::string format_root_cause(const std::string& name, const std::string& host, const std::vector<net::WorkerFailureRecord>& failures) {
  DAGSIM_ASSERT(!failures.empty());
  // The first observed failure: the smallest timestamp, the first seen among equals.
  size_t root = 0;
  for (size_t i = 1; i < failures.size(); ++i) {
    if (failures[i].timestamp() < failures[root].timestamp()) root = i;
  }
  const std::string title = printable(name, 256) + " FAILED";
  std::string root_text;
  std::string others;
  size_t width = title.size();
  for (size_t i = 0; i < failures.size(); ++i) {
    const std::string text = format_failure(i, host, failures[i]);
    width = std::max(width, widest(text));
    (i == root ? root_text : others) += text;
  }
  width = std::min<size_t>(width, 60);  // PyTorch's upper bound
  const std::string border(width, '=');
  const std::string section(width, '-');
  return border + "\n" + title + "\n" + section + "\nFailures:\n" + (others.empty() ? "  <NO_OTHER_FAILURES>\n" : others) + section +
         "\nRoot Cause (first observed failure):\n" + root_text + border + "\n";
}

}  // namespace dagsim::launch
