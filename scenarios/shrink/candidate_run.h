// Candidate runs for `dagsim shrink`: one candidate scenario run as `dagsim run CAND.toml --seed N
// --json` in a child process, and the way it failed, read from its exit code, its JSON report and
// its standard error.
//
// Promises:
//  - A run's report is read defensively: the binary may be one built from an older commit, whose
//    JSON lacks keys or is not JSON at all (a crash). What cannot be read is absent, never an error:
//    the exit code alone then says how it failed.
//  - "The same way" (FailureSignature::matches) is a pure function of two classified runs: for a
//    check failure, the same check (its kind and its place among the checks of that kind) failing,
//    the same outcome, and a detail of the same form (detail_template: numbers, hex, durations and
//    node numbers normalised; a rule id such as "L6" kept; for a list of violations, one violation
//    of the original's forms); for a crash, the same exit code and the same assertion line when the
//    first run printed one.
//  - A child is killed at its wall limit plus a grace; its exit then reads as kResourceLimit (4),
//    which never matches a failure: a run without a verdict is no evidence.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dagsim::shrink {

// One check of a run's report.
struct CheckReport {
  std::string name;
  bool passed = false;
  std::string detail;
};

// One run of a candidate, as its process ended.
struct RunOutcome {
  int exit_code = -1;  // the child's, or 3 for a signal (an assert aborts)
  bool report_read = false;          // stdout held a JSON object
  std::string transport;             // sim | tcp | job ("" if absent); a job's times are wall times
  std::string outcome;               // finished | time_limit | deadlock | livelock ("" if absent)
  std::vector<std::string> failed_checks;  // names of checks with passed = false, in report order
  std::vector<CheckReport> checks;         // every check of the report, in report order
  std::optional<double> virtual_time_ms;
  nlohmann::json faults;             // the applied fault timeline (null when absent)
  std::string swarm;                 // [random_faults] swarm = true: the seed's mix ("" when none)
  std::string crash_line;            // "dagsim: assertion failed: ..." from stderr, when printed
  double wall_ms = 0;                // the child's wall time (for the per-run limit only)
};

// Classifies a finished run from its exit code and outputs. Pure; never throws.
RunOutcome classify_run(int exit_code, const std::string& stdout_text, const std::string& stderr_text);

// The form of a check's detail: every number (decimals, exponents, hex, the digits in a node's
// name such as worker1 or worker1_0_0) becomes '#', a duration ("100 ms", "1.5 s") '#t'; a rule
// id (one or two capitals and up to two digits: "L6", "E12") is kept; runs of spaces are one.
// "backward ... timed out after 100 ms" and "... after 102 ms" have the same form; "L6" and "L2"
// do not. Pure.
std::string detail_template(const std::string& detail);
// The forms that a detail is matched by: for a list of violations ("3 violations: A; B; C; and 2
// more"), the template of each violation (split at the "; " that are not inside brackets, the
// "and N more" left out); for any other detail, its one template. Empty for an empty detail.
std::vector<std::string> detail_forms(const std::string& detail);

// How a run failed, fixed from the original failing run.
struct FailureSignature {
  enum class Kind : uint8_t { check, crash };
  Kind kind = Kind::check;
  std::string check;    // Kind::check: the failing check's name
  size_t ordinal = 0;   // Kind::check: its place among the report's checks of that name (0: the first)
  std::vector<std::string> forms;  // Kind::check: detail_forms of its detail (empty: not compared)
  std::string outcome;  // Kind::check: the run's outcome ("" when the report had none)
  int exit_code = 1;
  std::string crash_line;  // Kind::crash: the assertion line ("" when none was printed)

  bool matches(const RunOutcome& run) const;
  // "check never_declared_dead (outcome finished): \"worker# was never declared dead\"",
  // "check formed (the 2nd of its kind) ...", "exit code 3 (dagsim: assertion failed: ...)"
  std::string describe() const;
};

// The signature of `run` when it failed: `check` if given (it must be among the failed checks),
// else the first failed check that is not one of the runner's own (run_completed,
// no_fiber_failures), else the first failed check; with its place among the checks of its name
// and the forms of its detail. nullopt when the run passed, or `check` was
// given and did not fail, or the run had no verdict (exit 2 or 4); `why` then says so.
std::optional<FailureSignature> signature_of(const RunOutcome& run, const std::string& check, std::string* why);

// Runs candidates through a dagsim binary.
class CandidateRunner {
 public:
  // `dagsim`: the binary; `work_dir`: where candidate files and outputs are written (the original
  // file's folder, so a [job]'s relative paths resolve the same); `seed` the run's.
  CandidateRunner(std::string dagsim, std::string work_dir, std::string stem, uint64_t seed);
  ~CandidateRunner();
  CandidateRunner(const CandidateRunner&) = delete;
  CandidateRunner& operator=(const CandidateRunner&) = delete;

  // Writes `text` as the candidate file and runs it. `wall_limit_s` > 0 is passed as
  // --max-wall-time (dropped for good if the binary refuses the flag) and enforced with a grace.
  // Throws dagsim::Error when the file cannot be written or the binary cannot start.
  RunOutcome run(const std::string& text, double wall_limit_s);
  // Writes `text` as the candidate file and asks the binary's own loader: `dagsim validate CAND`
  // exits 0. For a binary of another commit, whose loader may take keys this one does not.
  bool validate(const std::string& text);

  const std::string& candidate_path() const { return candidate_path_; }

 private:
  std::string dagsim_;
  std::string candidate_path_;
  std::string stdout_path_;
  std::string stderr_path_;
  void write_candidate(const std::string& text);
  uint64_t seed_;
  bool wall_flag_ = true;  // false once the binary refused --max-wall-time
};

}  // namespace dagsim::shrink
