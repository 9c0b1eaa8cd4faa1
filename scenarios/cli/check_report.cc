#include "scenarios/cli/check_report.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/base/printable.h"
#include "scenarios/cli/html_report.h"
#include "scenarios/cli/junit.h"
#include "scenarios/cli/sweep_summary.h"
#include "scenarios/cli/report.h"

namespace dagsim::cli {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// One suite per seed, one case per check (see junit.h). A seed stopped by a limit has no verdict:
// its failing checks are skipped, not failures, as `check`'s own exit code treats them.
JunitReport junit_report(const CheckArgs& args, const std::vector<SeedOutcome>& outcomes, const std::string& timestamp,
                         const nlohmann::json& build) {
  const std::string stem = std::filesystem::path(args.file).stem().string();
  JunitReport report;
  report.name = "dagsim check " + args.file;
  report.timestamp = timestamp;
  report.properties = {{"scenario", args.file},
                       {"seeds", args.seeds},
                       {"dagsim_version", build.at("dagsim_version").get<std::string>()},
                       {"git_commit", build.at("git_commit").get<std::string>()}};
  if (!args.note.empty()) report.properties.push_back({"note", args.note});
  for (const SeedOutcome& o : outcomes) {
    const std::string replay = "replay: " + replay_command(args.file, o.seed);
    JunitSuite suite{args.file + " seed " + std::to_string(o.seed), stem + ".seed_" + std::to_string(o.seed), o.seconds, {}};
    for (const CheckVerdict& check : o.checks) {
      JunitCase c{check.name, JunitCase::Result::passed, "", ""};
      if (!check.passed) {
        c.result = o.exit_code == kResourceLimit ? JunitCase::Result::skipped : JunitCase::Result::failed;
        c.message = first_line(check.detail);
        c.text = check.detail + "\n" + replay;
      }
      suite.cases.push_back(std::move(c));
    }
    if (o.checks.empty()) {
      // No report to read: the run itself is the one case.
      JunitCase c{"run", JunitCase::Result::error, o.summary, o.summary + "\n" + replay};
      if (o.interrupted || o.exit_code == kResourceLimit) c.result = JunitCase::Result::skipped;
      if (o.exit_code == kPassed && !o.interrupted) c.result = JunitCase::Result::passed;
      suite.cases.push_back(std::move(c));
    }
    report.suites.push_back(std::move(suite));
  }
  return report;
}

}  // namespace

std::vector<CheckVerdict> read_checks(const std::string& stdout_text, std::string* unreadable, ProbeCounts* probes) {
  std::vector<CheckVerdict> out;
  try {
    const nlohmann::json report = nlohmann::json::parse(stdout_text);
    for (const auto& check : report.at("checks")) {
      out.push_back({check.at("name").get<std::string>(), check.at("passed").get<bool>(),
                     check.at("detail").get<std::string>()});
    }
    if (probes != nullptr) *probes = probes_of_report(report);
  } catch (const std::exception& e) {
    *unreadable = std::string("unreadable report: ") + e.what();
    out.clear();
    if (probes != nullptr) probes->clear();
  }
  return out;
}

SweepOrigin this_origin() { return {provenance(), build_probe_names(), ""}; }

std::string summarise(const std::vector<CheckVerdict>& checks, const std::string& unreadable,
                      const std::string& stderr_text, int exit_code) {
  if (exit_code == kBadInput) return first_line(stderr_text);
  if (exit_code != kPassed && exit_code != kCheckFailed && exit_code != kResourceLimit) {
    std::string assertion;
    const size_t at = stderr_text.find("assertion failed");
    if (at != std::string::npos) assertion = stderr_text.substr(at, stderr_text.find('\n', at) - at);
    return "internal error (exit " + std::to_string(exit_code) + "): " + (assertion.empty() ? first_line(stderr_text) : assertion);
  }
  if (!unreadable.empty()) return unreadable;
  std::string out;
  for (const CheckVerdict& check : checks) {
    if (!check.passed) out += (out.empty() ? "" : "; ") + check.name + ": " + first_line(check.detail);
  }
  return out;
}

int report_outcomes(const CheckArgs& args, const std::vector<SeedOutcome>& outcomes, uint64_t count,
                    int stopped_by, const std::string& timestamp, const SweepOrigin& origin) {
  size_t failed = 0, crashed = 0, invalid = 0, limited = 0, interrupted = 0;
  nlohmann::json failing = nlohmann::json::array();
  for (const SeedOutcome& o : outcomes) {
    if (o.interrupted) {
      ++interrupted;
      continue;
    }
    if (o.exit_code == kPassed) continue;
    ++failed;
    if (o.exit_code == kBadInput) ++invalid;
    if (o.exit_code == kResourceLimit) ++limited;
    if (o.exit_code != kCheckFailed && o.exit_code != kBadInput && o.exit_code != kResourceLimit) ++crashed;
    if (!args.json) {
      std::cout << "seed " << o.seed << ": " << verdict_of(o) << ": " << o.summary
                << "\n  replay: " << replay_command(args.file, o.seed) << "\n";
    }
    failing.push_back({{"seed", o.seed}, {"exit_code", o.exit_code}, {"verdict", verdict_of(o)}, {"summary", o.summary},
                       {"replay", replay_command(args.file, o.seed)}});
  }
  const size_t total = outcomes.size() - interrupted;  // seeds with a verdict
  // Every seed, in seed order, for pages that list them all (`dagsim report SUMMARY.json`).
  nlohmann::json seeds = nlohmann::json::array();
  for (const SeedOutcome& o : outcomes) {
    nlohmann::json s = {{"seed", o.seed}, {"verdict", verdict_of(o)}, {"seconds", o.seconds}, {"replay", replay_command(args.file, o.seed)}};
    if (!o.summary.empty()) s["summary"] = o.summary;
    // Each check it failed, by name, for the page's failures grouped by check and message.
    nlohmann::json failed_checks = nlohmann::json::array();
    for (const CheckVerdict& check : o.checks) {
      if (!check.passed) failed_checks.push_back({{"check", check.name}, {"message", first_line(check.detail)}});
    }
    if (!failed_checks.empty()) s["failed_checks"] = std::move(failed_checks);
    seeds.push_back(std::move(s));
  }
  const std::string requested = count == 0 ? std::string("2^64") : std::to_string(count);
  const std::string signal_name = stopped_by != 0 ? std::string("SIG") + sigabbrev_np(stopped_by) : "";
  nlohmann::json summary{{"file", args.file}, {"seeds", args.seeds}, {"runs", total}, {"passed", total - failed},
                         {"failed", failing}, {"results", seeds}, {"provenance", origin.provenance}};
  if (!args.note.empty()) summary["note"] = args.note;
  if (!origin.shard.empty()) summary["shard"] = origin.shard;
  const ProbeTable probes = args.probes ? probe_table(outcomes, origin.probe_names) : ProbeTable{};
  if (args.probes) add_probe_table(summary, probes);
  if (stopped_by != 0) {
    summary["interrupted"] = {{"signal", signal_name}, {"requested", requested}, {"cut_short", interrupted}};
  }
  if (args.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    if (!args.note.empty()) std::cout << "note: " << args.note << "\n";
    std::cout << args.file << ": " << (total - failed) << "/" << total << " seeds passed (" << args.seeds
              << (origin.shard.empty() ? "" : ", shard " + origin.shard) << ")"
              << (crashed > 0 ? ", " + std::to_string(crashed) + " crashed" : "")
              << (limited > 0 ? ", " + std::to_string(limited) + " stopped by a limit" : "") << "\n";
    if (stopped_by != 0) {
      std::cout << "interrupted by " << signal_name << ": " << total << " of " << requested << " seeds finished"
                << (interrupted > 0 ? ", " + std::to_string(interrupted) + " cut short" : "")
                << "; this summary covers only those\n";
    }
    if (args.probes) print_probe_table(std::cout, probes);
  }
  int code = kPassed;
  if (crashed > 0) {
    code = kInternalError;
  } else if (invalid > 0) {
    code = kBadInput;  // e.g. the file changed or vanished mid-check
  } else if (failed > limited) {
    // A seed that failed a check is a finding; one stopped by a limit has no verdict, which matters
    // only when no seed found anything.
    code = kCheckFailed;
  } else if (limited > 0) {
    code = kResourceLimit;
  }
  if (!args.html.empty()) {
    // The page `dagsim report` draws from this summary.
    std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
    out << sweep_report_html(parse_sweep_summary(summary.dump(), args.html));
    out.close();
    if (!out) {
      std::cerr << "dagsim check: --html " << printable(args.html) << ": cannot write: " << std::strerror(errno) << "\n";
      if (code == kPassed) code = kBadInput;
    }
  }
  if (!args.junit.empty()) {
    std::ofstream out(args.junit, std::ios::binary | std::ios::trunc);
    out << junit_xml(junit_report(args, outcomes, timestamp, origin.provenance));
    out.close();
    if (!out) {
      std::cerr << "dagsim check: --junit " << printable(args.junit) << ": cannot write: " << std::strerror(errno) << "\n";
      if (code == kPassed) code = kBadInput;
    }
  }
  return code;
}

}  // namespace dagsim::cli
