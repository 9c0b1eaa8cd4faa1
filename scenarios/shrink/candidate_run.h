// Candidate runs for `dagsim shrink`: one candidate scenario run as `dagsim run CAND.toml --seed N
// --json` in a child process, and the way it failed, read from its exit code, its JSON report and
// its standard error.
//
// Promises:
//  - A run's report is read defensively: the binary may be one built from an older commit, whose
//    JSON lacks keys or is not JSON at all (a crash). What cannot be read is absent, never an error:
//    the exit code alone then says how it failed.
//  - "The same way" (FailureSignature::matches) is a pure function of two classified runs: the same
//    failing check and the same outcome for a check failure; the same exit code, and the same
//    assertion line when the first run printed one, for a crash.
//  - A child is killed at its wall limit plus a grace; its exit then reads as kResourceLimit (4),
//    which never matches a failure: a run without a verdict is no evidence.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dagsim::shrink {

// One run of a candidate, as its process ended.
struct RunOutcome {
  int exit_code = -1;  // the child's, or 3 for a signal (an assert aborts)
  bool report_read = false;          // stdout held a JSON object
  std::string transport;             // sim | tcp | job ("" if absent); a job's times are wall times
  std::string outcome;               // finished | time_limit | deadlock | livelock ("" if absent)
  std::vector<std::string> failed_checks;  // names of checks with passed = false, in report order
  std::optional<double> virtual_time_ms;
  nlohmann::json faults;             // the applied fault timeline (null when absent)
  std::string crash_line;            // "dagsim: assertion failed: ..." from stderr, when printed
  double wall_ms = 0;                // the child's wall time (for the per-run limit only)
};

// Classifies a finished run from its exit code and outputs. Pure; never throws.
RunOutcome classify_run(int exit_code, const std::string& stdout_text, const std::string& stderr_text);

// How a run failed, fixed from the original failing run.
struct FailureSignature {
  enum class Kind : uint8_t { check, crash };
  Kind kind = Kind::check;
  std::string check;    // Kind::check: the failing check's name
  std::string outcome;  // Kind::check: the run's outcome ("" when the report had none)
  int exit_code = 1;
  std::string crash_line;  // Kind::crash: the assertion line ("" when none was printed)

  bool matches(const RunOutcome& run) const;
  // "check never_declared_dead (outcome finished)", "exit code 3 (dagsim: assertion failed: ...)"
  std::string describe() const;
};

// The signature of `run` when it failed: `check` if given (it must be among the failed checks),
// else the first failed check that is not one of the runner's own (run_completed,
// no_fiber_failures), else the first failed check. nullopt when the run passed, or `check` was
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
