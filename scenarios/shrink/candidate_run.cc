// Candidate runs for `dagsim shrink` (candidate_run.h): classifying a run, and running one in a
// child process through net/process, as `dagsim check` runs its seeds.
#include "scenarios/shrink/candidate_run.h"

#include <unistd.h>

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

}  // namespace

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
  if (report.contains("wall_ms") && report["wall_ms"].is_number()) run.wall_ms = report["wall_ms"].get<double>();
  if (report.contains("checks") && report["checks"].is_array()) {
    for (const nlohmann::json& check : report["checks"]) {
      if (!check.is_object() || !check.contains("name") || !check["name"].is_string()) continue;
      const bool passed = check.contains("passed") && check["passed"].is_boolean() && check["passed"].get<bool>();
      if (!passed) run.failed_checks.push_back(check["name"].get<std::string>());
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
  if (!check.empty()) {
    for (const std::string& name : run.failed_checks) {
      if (name == check) s.check = name;
    }
    if (s.check.empty()) {
      *why = "check " + check + " did not fail";
      return std::nullopt;
    }
    return s;
  }
  for (const std::string& name : run.failed_checks) {
    if (!builtin_check(name)) {
      s.check = name;
      return s;
    }
  }
  if (!run.failed_checks.empty()) {
    s.check = run.failed_checks.front();
    return s;
  }
  // Exit 1 with no report that names a check (an older binary's): the exit code is the signature.
  return s;
}

bool FailureSignature::matches(const RunOutcome& run) const {
  if (run.exit_code != exit_code) return false;
  if (kind == Kind::crash) return crash_line.empty() || run.crash_line == crash_line;
  if (!outcome.empty() && run.outcome != outcome) return false;
  if (check.empty()) return true;
  for (const std::string& name : run.failed_checks) {
    if (name == check) return true;
  }
  return false;
}

std::string FailureSignature::describe() const {
  if (kind == Kind::crash) {
    return "exit code " + std::to_string(exit_code) + (crash_line.empty() ? "" : " (" + crash_line + ")");
  }
  std::string text = check.empty() ? "exit code 1" : "check " + check;
  if (!outcome.empty()) text += " (outcome " + outcome + ")";
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
