// scenarios/cli/sweep_summary_fuzz.cc: the libFuzzer target for the sweep summary reader
// (sweep_summary.h), what `dagsim report SUMMARY.json` reads; built and run by scripts/fuzz.sh
// (target "sweep_summary"). The file may have been written by anyone, so the reader trusts
// nothing. The target reports (aborts, so libFuzzer saves the input) any of:
//  - parse_sweep_summary throwing anything but Error(invalid_argument), or crashing, leaking, or
//    tripping ASan, UBSan or an assert, on any bytes;
//  - an error that does not start with the file's name or is not one printable line;
//  - a summary accepted from text nested deeper than kMaxSweepSummaryDepth (counted here by its
//    own scan of the brackets outside strings, apart from the parser's);
//  - more seeds than the text could hold, or a summary that, written back as JSON with the fields
//    `dagsim check --json` gives, does not read as itself;
//  - a digest (sweep_digest.h) that loses or invents a seed: its histogram must hold every seed
//    with a verdict once, its groups only failing seeds, its slowest no more than asked.
// Input: the file's bytes, as is.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "scenarios/cli/sweep_digest.h"
#include "scenarios/cli/sweep_summary.h"

namespace {

using dagsim::cli::SweepSeed;
using dagsim::cli::SweepSummary;

constexpr const char* kName = "fuzz.json";

bool same(const SweepSummary& a, const SweepSummary& b) {
  if (a.file != b.file || a.seeds != b.seeds || a.runs != b.runs || a.passed != b.passed) return false;
  if (a.results.size() != b.results.size()) return false;
  for (size_t i = 0; i < a.results.size(); ++i) {
    const SweepSeed &x = a.results[i], &y = b.results[i];
    if (x.seed != y.seed || x.verdict != y.verdict || x.seconds != y.seconds || x.summary != y.summary || x.replay != y.replay) {
      return false;
    }
    if (x.failed_checks.size() != y.failed_checks.size()) return false;
    for (size_t k = 0; k < x.failed_checks.size(); ++k) {
      if (x.failed_checks[k].check != y.failed_checks[k].check || x.failed_checks[k].message != y.failed_checks[k].message) return false;
    }
  }
  return true;
}

std::string written_back(const SweepSummary& s) {
  nlohmann::json results = nlohmann::json::array();
  for (const SweepSeed& r : s.results) {
    nlohmann::json failed = nlohmann::json::array();
    for (const auto& f : r.failed_checks) failed.push_back({{"check", f.check}, {"message", f.message}});
    results.push_back({{"seed", r.seed}, {"verdict", r.verdict}, {"seconds", r.seconds}, {"summary", r.summary}, {"replay", r.replay},
                       {"failed_checks", failed}});
  }
  const nlohmann::json j{{"file", s.file}, {"seeds", s.seeds}, {"runs", s.runs}, {"passed", s.passed}, {"results", results}};
  // Strings the parser accepted may hold bytes that are not UTF-8: kept as they are.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::ignore);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  SweepSummary summary;
  try {
    summary = dagsim::cli::parse_sweep_summary(text, kName);
  } catch (const dagsim::Error& e) {
    dagsim::net::fuzz::check_named_refusal(e, kName);
    return 0;
  }
  DAGSIM_FUZZ_CHECK(dagsim::net::fuzz::bracket_depth(text) <= dagsim::cli::kMaxSweepSummaryDepth);
  // Each seed is at least "{}" and a comma.
  DAGSIM_FUZZ_CHECK(summary.results.size() <= size / 2);
  const std::string again = written_back(summary);
  try {
    DAGSIM_FUZZ_CHECK(same(dagsim::cli::parse_sweep_summary(again, kName), summary));
  } catch (const dagsim::Error& e) {
    dagsim::net::fuzz::fail("the summary, written back, was refused", e.what());
  }
  const dagsim::cli::SweepDigest digest = dagsim::cli::digest_sweep(summary, 5, 12);
  uint64_t judged = 0, passed = 0, binned = 0;
  for (const SweepSeed& s : summary.results) {
    judged += s.verdict != "INTERRUPTED" ? 1 : 0;
    passed += s.verdict == "PASSED" ? 1 : 0;
  }
  for (const dagsim::cli::SweepTimeBin& b : digest.histogram) binned += b.passed + b.failed;
  DAGSIM_FUZZ_CHECK(digest.judged == judged && digest.passed == passed && binned == judged);
  DAGSIM_FUZZ_CHECK(digest.slowest.size() <= 5 && digest.histogram.size() <= 12);
  for (const dagsim::cli::SweepFailureGroup& g : digest.failures) DAGSIM_FUZZ_CHECK(!g.seeds.empty() && g.seeds.size() <= judged - passed);
  if (dagsim::net::fuzz::tracing()) std::fprintf(stderr, "read %zu seeds\n", summary.results.size());
  return 0;
}
