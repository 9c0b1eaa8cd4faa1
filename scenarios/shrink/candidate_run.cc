// Candidate runs for `dagsim shrink` (candidate_run.h): classifying a run, and running one in a
// child process through net/process, as `dagsim check` runs its seeds.
#include "scenarios/shrink/candidate_run.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "net/process/process.h"

namespace dagsim::shrink {
namespace {

constexpr int kCheckFailed = 1;
constexpr int kBadInput = 2;
constexpr int kInternalError = 3;
constexpr int kResourceLimit = 4;
// A child still running this long past its own wall limit is killed (its watchdog could not act).
constexpr double kGraceS = 10;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool builtin_check(const std::string& name) { return name == "run_completed" || name == "no_fiber_failures"; }

// The first line of `text` that starts with `prefix` (after leading spaces), without its end.
std::string first_line_with(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, prefix.size(), prefix) == 0) return line.substr(start);
  }
  return "";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// A rule id: one or two capitals, then one or two digits ("L6", "E12").
bool rule_id(const std::string& word) {
  size_t caps = 0;
  while (caps < word.size() && word[caps] >= 'A' && word[caps] <= 'Z') ++caps;
  const size_t digits = word.size() - caps;
  if (caps < 1 || caps > 2 || digits < 1 || digits > 2) return false;
  return std::all_of(word.begin() + static_cast<std::ptrdiff_t>(caps), word.end(), is_digit);
}

// A hash or an address: "0x" and hex digits, or eight or more hex digits with a digit among them.
bool hex_word(const std::string& word) {
  if (word.size() > 2 && word[0] == '0' && (word[1] == 'x' || word[1] == 'X')) {
    return std::all_of(word.begin() + 2, word.end(), is_hex);
  }
  return word.size() >= 8 && std::all_of(word.begin(), word.end(), is_hex) && std::any_of(word.begin(), word.end(), is_digit);
}

// A word with its digits normalised: each run of digits (with a decimal part and an exponent) '#'.
std::string normalise_word(const std::string& word) {
  if (rule_id(word)) return word;
  if (hex_word(word)) return "#";
  std::string out;
  for (size_t i = 0; i < word.size();) {
    if (!is_digit(word[i])) {
      out += word[i++];
      continue;
    }
    while (i < word.size() && is_digit(word[i])) ++i;
    // "1e" of "1e-05": the exponent's sign and digits follow (detail_template joins them).
    if (i + 1 == word.size() && (word[i] == 'e' || word[i] == 'E')) ++i;
    // An exponent of a number ("1e-05" is split at '-' by the caller; "1e5" is whole here).
    if (i + 1 < word.size() && (word[i] == 'e' || word[i] == 'E') && is_digit(word[i + 1])) {
      ++i;
      while (i < word.size() && is_digit(word[i])) ++i;
    }
    out += '#';
  }
  return out;
}

bool duration_unit(const std::string& word) {
  return word == "ns" || word == "us" || word == "\u00b5s" || word == "ms" || word == "s" || word == "min";
}

}  // namespace

std::string detail_template(const std::string& detail) {
  // Words (letters, digits, '_') normalised; "#.#" and "#e-#" made one number; other characters kept.
  std::string out;
  for (size_t i = 0; i < detail.size();) {
    const char c = detail[i];
    if (is_word(c)) {
      size_t end = i;
      while (end < detail.size() && is_word(detail[end])) ++end;
      out += normalise_word(detail.substr(i, end - i));
      i = end;
      continue;
    }
    const bool after_number = !out.empty() && out.back() == '#';
    // "1.5", "1e-05", "-3": the '.', the exponent's sign and a minus before a number join it.
    if (after_number && c == '.' && i + 1 < detail.size() && is_digit(detail[i + 1])) {
      size_t end = i + 1;
      while (end < detail.size() && is_word(detail[end])) ++end;
      i = end;  // the decimal part (and an exponent "e" glued to it) is the same number
      if (i + 1 < detail.size() && (detail[i] == '-' || detail[i] == '+') && detail[i - 1] == 'e' && is_digit(detail[i + 1])) {
        ++i;
        while (i < detail.size() && is_word(detail[i])) ++i;
      }
      continue;
    }
    if (after_number && (c == '-' || c == '+') && i > 0 && (detail[i - 1] == 'e' || detail[i - 1] == 'E') &&
        i + 1 < detail.size() && is_digit(detail[i + 1])) {
      ++i;
      while (i < detail.size() && is_word(detail[i])) ++i;
      continue;
    }
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      if (!out.empty() && out.back() != ' ') out += ' ';
      ++i;
      continue;
    }
    if (c == '-' && i + 1 < detail.size() && is_digit(detail[i + 1]) && (out.empty() || !is_word(out.back()))) {
      ++i;  // a negative number: its sign goes with it
      continue;
    }
    out += c;
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  // Durations: "# ms", "#ms", "# s" are one form, "#t".
  std::string merged;
  for (size_t i = 0; i < out.size();) {
    if (out[i] == '#') {
      size_t j = i + 1;
      if (j < out.size() && out[j] == ' ') ++j;
      size_t end = j;
      while (end < out.size() && is_word(out[end])) ++end;
      if (end > j && duration_unit(out.substr(j, end - j))) {
        merged += "#t";
        i = end;
        continue;
      }
    }
    merged += out[i++];
  }
  return merged;
}

std::vector<std::string> detail_forms(const std::string& detail) {
  std::vector<std::string> forms;
  const std::string t = detail_template(detail);
  if (t.empty()) return forms;
  // "# violation: ", "# violations: ", "# violation(s): "
  for (const char* prefix : {"# violation: ", "# violations: ", "# violation(s): "}) {
    if (t.rfind(prefix, 0) != 0) continue;
    const std::string list = t.substr(std::string(prefix).size());
    int depth = 0;
    size_t start = 0;
    auto add = [&](size_t end) {
      std::string item = list.substr(start, end - start);
      if (!item.empty() && item != "and # more" && std::find(forms.begin(), forms.end(), item) == forms.end()) {
        forms.push_back(item);
      }
    };
    for (size_t i = 0; i < list.size(); ++i) {
      const char c = list[i];
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      if (depth == 0 && c == ';' && i + 1 < list.size() && list[i + 1] == ' ') {
        add(i);
        start = i + 2;
        ++i;
      }
    }
    add(list.size());
    return forms;
  }
  forms.push_back(t);
  return forms;
}

RunOutcome classify_run(int exit_code, const std::string& stdout_text, const std::string& stderr_text) {
  RunOutcome run;
  run.exit_code = exit_code;
  run.crash_line = first_line_with(stderr_text, "dagsim: assertion failed:");
  if (run.crash_line.empty()) run.crash_line = first_line_with(stderr_text, "dagsim: internal error");
  const nlohmann::json report = nlohmann::json::parse(stdout_text, nullptr, /*allow_exceptions=*/false);
  if (!report.is_object()) return run;
  run.report_read = true;
  if (report.contains("outcome") && report["outcome"].is_string()) run.outcome = report["outcome"].get<std::string>();
  if (report.contains("transport") && report["transport"].is_string()) run.transport = report["transport"].get<std::string>();
  if (report.contains("virtual_time_ms") && report["virtual_time_ms"].is_number()) {
    run.virtual_time_ms = report["virtual_time_ms"].get<double>();
  }
  if (report.contains("faults") && report["faults"].is_array()) run.faults = report["faults"];
  if (report.contains("swarm") && report["swarm"].is_object() && report["swarm"].contains("summary") &&
      report["swarm"]["summary"].is_string()) {
    run.swarm = report["swarm"]["summary"].get<std::string>();
  }
  if (report.contains("wall_ms") && report["wall_ms"].is_number()) run.wall_ms = report["wall_ms"].get<double>();
  if (report.contains("checks") && report["checks"].is_array()) {
    for (const nlohmann::json& check : report["checks"]) {
      if (!check.is_object() || !check.contains("name") || !check["name"].is_string()) continue;
      const bool passed = check.contains("passed") && check["passed"].is_boolean() && check["passed"].get<bool>();
      CheckReport c;
      c.name = check["name"].get<std::string>();
      c.passed = passed;
      if (check.contains("detail") && check["detail"].is_string()) c.detail = check["detail"].get<std::string>();
      if (!passed) run.failed_checks.push_back(c.name);
      run.checks.push_back(std::move(c));
    }
  }
  return run;
}

std::optional<FailureSignature> signature_of(const RunOutcome& run, const std::string& check, std::string* why) {
  DAGSIM_ASSERT(why != nullptr);
  if (run.exit_code == 0) {
    *why = "the run passed";
    return std::nullopt;
  }
  if (run.exit_code == kBadInput || run.exit_code == kResourceLimit) {
    *why = run.exit_code == kBadInput ? "the run refused its input (exit 2)" : "a host limit stopped the run (exit 4)";
    return std::nullopt;
  }
  FailureSignature s;
  s.exit_code = run.exit_code;
  if (run.exit_code != kCheckFailed) {
    s.kind = FailureSignature::Kind::crash;
    s.crash_line = run.crash_line;
    if (!check.empty()) {
      *why = "the run crashed (exit " + std::to_string(run.exit_code) + ") rather than failing check " + check;
      return std::nullopt;
    }
    return s;
  }
  s.outcome = run.outcome;
  // The chosen check: its name, and from the report's checks its place among those of its name
  // and the forms of its detail.
  auto chosen = [&](const std::string& name) {
    s.check = name;
    size_t seen = 0;
    for (const CheckReport& c : run.checks) {
      if (c.name != name) continue;
      if (!c.passed) {
        s.ordinal = seen;
        s.forms = detail_forms(c.detail);
        break;
      }
      ++seen;
    }
    return s;
  };
  if (!check.empty()) {
    if (std::find(run.failed_checks.begin(), run.failed_checks.end(), check) == run.failed_checks.end()) {
      *why = "check " + check + " did not fail";
      return std::nullopt;
    }
    return chosen(check);
  }
  for (const std::string& name : run.failed_checks) {
    if (!builtin_check(name)) return chosen(name);
  }
  if (!run.failed_checks.empty()) return chosen(run.failed_checks.front());
  // Exit 1 with no report that names a check (an older binary's): the exit code is the signature.
  return s;
}

bool FailureSignature::matches(const RunOutcome& run) const {
  if (run.exit_code != exit_code) return false;
  if (kind == Kind::crash) return crash_line.empty() || run.crash_line == crash_line;
  if (!outcome.empty() && run.outcome != outcome) return false;
  if (check.empty()) return true;
  if (run.checks.empty()) {
    // A run known only by its failed checks' names (no report of each): the name alone, and only
    // when nothing more was asked.
    if (ordinal != 0 || !forms.empty()) return false;
    return std::find(run.failed_checks.begin(), run.failed_checks.end(), check) != run.failed_checks.end();
  }
  size_t seen = 0;
  for (const CheckReport& c : run.checks) {
    if (c.name != check) continue;
    if (seen++ != ordinal) continue;
    if (c.passed) return false;
    if (forms.empty()) return true;
    for (const std::string& form : detail_forms(c.detail)) {
      if (std::find(forms.begin(), forms.end(), form) != forms.end()) return true;
    }
    return false;
  }
  return false;
}

std::string FailureSignature::describe() const {
  if (kind == Kind::crash) {
    return "exit code " + std::to_string(exit_code) + (crash_line.empty() ? "" : " (" + crash_line + ")");
  }
  std::string text = check.empty() ? "exit code 1" : "check " + check;
  if (ordinal > 0) {
    const size_t n = ordinal + 1;
    const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    text += " (the " + std::to_string(n) + suffix + " of its kind)";
  }
  if (!outcome.empty()) text += " (outcome " + outcome + ")";
  if (!forms.empty()) text += ": \"" + forms.front() + "\"" + (forms.size() > 1 ? " or " + std::to_string(forms.size() - 1) + " other form(s)" : "");
  return text;
}

CandidateRunner::CandidateRunner(std::string dagsim, std::string work_dir, std::string stem, uint64_t seed)
    : dagsim_(std::move(dagsim)), seed_(seed) {
  const std::string base = work_dir + "/." + stem + ".shrink-" + std::to_string(::getpid());
  candidate_path_ = base + ".toml";
  stdout_path_ = base + ".out";
  stderr_path_ = base + ".err";
}

CandidateRunner::~CandidateRunner() {
  std::remove(candidate_path_.c_str());
  std::remove(stdout_path_.c_str());
  std::remove(stderr_path_.c_str());
}

void CandidateRunner::write_candidate(const std::string& text) {
  std::ofstream out(candidate_path_, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw errors::invalid_argument("cannot write the candidate file " + candidate_path_);
}

bool CandidateRunner::validate(const std::string& text) {
  write_candidate(text);
  net::ProcessSpec spec;
  spec.argv = {dagsim_, "validate", candidate_path_};
  spec.env = net::current_environment();
  spec.stdout_path = stdout_path_;
  spec.stderr_path = stderr_path_;
  spec.name = "shrink validate";
  std::remove(stdout_path_.c_str());
  std::remove(stderr_path_.c_str());
  net::Process process = net::spawn(spec);
  const net::ProcessExit exit = process.wait();
  return exit.exited() && exit.exit_code() == 0;
}

RunOutcome CandidateRunner::run(const std::string& text, double wall_limit_s) {
  write_candidate(text);
  for (;;) {
    std::remove(stdout_path_.c_str());
    std::remove(stderr_path_.c_str());
    net::ProcessSpec spec;
    spec.argv = {dagsim_, "run", candidate_path_, "--seed", std::to_string(seed_), "--json"};
    if (wall_flag_ && wall_limit_s > 0) {
      std::ostringstream s;
      s.precision(17);
      s << wall_limit_s;
      spec.argv.insert(spec.argv.end(), {"--max-wall-time", s.str()});
    }
    spec.env = net::current_environment();
    spec.stdout_path = stdout_path_;
    spec.stderr_path = stderr_path_;
    spec.name = "shrink candidate";
    const auto started = std::chrono::steady_clock::now();
    net::Process process = net::spawn(spec);
    std::optional<net::ProcessExit> exit;
    bool killed = false;
    while (!(exit = process.poll())) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (wall_limit_s > 0 && elapsed > wall_limit_s + kGraceS) {
        process.kill();
        exit = process.wait();
        killed = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const int code = killed ? kResourceLimit : exit->exited() ? exit->exit_code() : kInternalError;
    const std::string err = slurp(stderr_path_);
    // An older binary without --max-wall-time refuses it as bad usage: run it again without.
    if (code == kBadInput && wall_flag_ && wall_limit_s > 0 && err.find("--max-wall-time") != std::string::npos) {
      wall_flag_ = false;
      continue;
    }
    RunOutcome run = classify_run(code, slurp(stdout_path_), err);
    run.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    return run;
  }
}

}  // namespace dagsim::shrink
