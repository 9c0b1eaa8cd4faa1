// SweepSummary: `dagsim check --json`'s summary read back, as `dagsim report SUMMARY.json` pages it.
//
// The file is input like any other: a user names it, and anyone may have written it. So it is
// read through read_bounded_file() (a regular file of at most kMaxSweepSummaryBytes: a FIFO, a
// device or a socket is refused at once, never waited on) and parse_bounded_json() (nested at most
// kMaxSweepSummaryDepth deep), and every field the page uses is checked for its type here, once,
// so the page is written from typed values and never meets a JSON type error.
//
// Promises: read_sweep_summary and parse_sweep_summary return a summary or throw
// Error(invalid_argument) whose message is one printable line starting with the file's name and,
// where one field is wrong, naming it by its path: "s.json: results[0].seed: expected an unsigned
// integer, got a string". Missing fields take the defaults below (a summary from an older dagsim
// may lack some); fields the page does not use are not read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dagsim::cli {

// A summary of a million seeds is about 250 MB; a larger file is not one `check` wrote.
inline constexpr size_t kMaxSweepSummaryBytes = size_t{512} << 20;
// `check --json` nests four deep (the summary, results, a seed, its fields); room to spare.
inline constexpr size_t kMaxSweepSummaryDepth = 16;

// One check a seed failed, with its detail's first line.
struct SweepFailure {
  std::string check;
  std::string message;
};

struct SweepSeed {
  uint64_t seed = 0;
  std::string verdict = "?";
  double seconds = 0;
  std::string summary;
  std::string replay;
  std::vector<SweepFailure> failed_checks;  // empty in summaries older than the field
};

// A probe the sweep's seeds hit (`check --probes`, sweep_probes.h): by how many seeds, how often.
struct SweepProbe {
  std::string name;
  uint64_t seeds = 0;
  uint64_t hits = 0;
};

struct SweepSummary {
  std::string file = "?";
  std::string seeds = "?";
  uint64_t runs = 0;
  uint64_t passed = 0;
  // What the reader must know about every seed ("the job is real: only its fault schedule is
  // seeded"); empty when the summary has none.
  std::string note;
  std::vector<SweepSeed> results;
  // The probe table, when the summary has one (`--probes`): the probes hit, sorted by name, and
  // those never hit.
  bool has_probes = false;
  std::vector<SweepProbe> probes;
  std::vector<std::string> probes_never_hit;
};

// The summary in `text`; `name` (the file's path) starts every error.
SweepSummary parse_sweep_summary(std::string_view text, const std::string& name);
// The summary in the file at `path`.
SweepSummary read_sweep_summary(const std::string& path);

}  // namespace dagsim::cli
