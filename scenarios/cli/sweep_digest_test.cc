// The sweep's digest (sweep_digest.h): the pass rate over the seeds with a verdict, failures grouped
// by check and message with the numbers taken out (from failed_checks, or from an older summary's
// one line), the slowest seeds, and a histogram that holds every judged seed once; and the
// summary's failed_checks read and type-checked.
#include "scenarios/cli/sweep_digest.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/base/error.h"

namespace dagsim::cli {
namespace {

SweepSeed seed(uint64_t n, const std::string& verdict, double seconds, std::vector<SweepFailure> failed = {},
               const std::string& summary = "") {
  SweepSeed s;
  s.seed = n;
  s.verdict = verdict;
  s.seconds = seconds;
  s.failed_checks = std::move(failed);
  s.summary = summary;
  return s;
}

TEST(SweepDigest, NumbersAreTakenOutOfAMessageNamesAndTimesAlike) {
  EXPECT_EQ(message_pattern("1 violation: worker3 was declared dead by worker0 at 5.000 s"),
            "# violation: worker# was declared dead by worker# at # s");
  EXPECT_EQ(message_pattern("steps 1..300, 0.5."), "steps #..#, #.");
  EXPECT_EQ(message_pattern(""), "");
}

TEST(SweepDigest, ASeedStoppedByALimitIsItsOwnGroupNotItsChecksFailures) {
  SweepSummary s;
  s.results = {
      seed(1, "LIMIT", 3.0, {{"all_steps_committed", "12 of 300 steps"}}, "stopped by --max-memory-mib"),
      seed(2, "FAILED", 0.7, {{"restarts", "2 restarts"}}),
  };
  const SweepDigest d = digest_sweep(s);
  ASSERT_EQ(d.failures.size(), 2u);
  EXPECT_EQ(d.failures[0].check, "LIMIT");
  EXPECT_EQ(d.failures[0].seeds, (std::vector<uint64_t>{1}));
  EXPECT_EQ(d.failures[1].check, "restarts");
}

TEST(SweepDigest, FailuresGroupByCheckAndMessageMostSeedsFirst) {
  SweepSummary s;
  s.results = {
      seed(1, "PASSED", 0.5),
      seed(2, "FAILED", 0.7, {{"never_declared_dead", "1 violation: worker3 at 5.000 s"}}),
      seed(3, "FAILED", 0.6, {{"never_declared_dead", "1 violation: worker2 at 1.900 s"}, {"restarts", "2 restarts"}}),
      seed(4, "FAILED", 0.9, {{"never_declared_dead", "2 violations: worker2 at 1.000 s; worker3 at 4.100 s"}}),
      seed(5, "CRASHED", 2.0, {}, "internal error (exit 134): assertion failed"),
      // An older summary: no failed_checks, the check named in its one line.
      seed(6, "FAILED", 0.4, {}, "restarts: 3 restarts"),
      seed(7, "INTERRUPTED", 9.0),
  };
  const SweepDigest d = digest_sweep(s);
  EXPECT_EQ(d.judged, 6u);  // not the interrupted seed
  EXPECT_EQ(d.passed, 1u);
  EXPECT_DOUBLE_EQ(d.pass_rate, 1.0 / 6.0);
  ASSERT_EQ(d.failures.size(), 4u);
  EXPECT_EQ(d.failures[0].check, "never_declared_dead");
  EXPECT_EQ(d.failures[0].pattern, "# violation: worker# at # s");
  EXPECT_EQ(d.failures[0].example, "1 violation: worker3 at 5.000 s");
  EXPECT_EQ(d.failures[0].seeds, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(d.failures[1].check, "restarts");  // seeds 3 and 6: "# restarts"
  EXPECT_EQ(d.failures[1].seeds, (std::vector<uint64_t>{3, 6}));
  // One seed each, by check then pattern.
  EXPECT_EQ(d.failures[2].check, "CRASHED");
  EXPECT_EQ(d.failures[2].pattern, "internal error (exit #): assertion failed");
  EXPECT_EQ(d.failures[3].pattern, "# violations: worker# at # s; worker# at # s");
}

TEST(SweepDigest, TheSlowestSeedsAndAHistogramThatHoldsEverySeedOnce) {
  SweepSummary s;
  for (uint64_t n = 1; n <= 20; ++n) s.results.push_back(seed(n, n % 4 == 0 ? "FAILED" : "PASSED", 0.125 * static_cast<double>(n % 7)));
  const SweepDigest d = digest_sweep(s, 3, 6);
  ASSERT_EQ(d.slowest.size(), 3u);
  EXPECT_EQ(d.slowest[0].seed, 6u);  // 0.75 s, the lowest seed of the slowest first
  EXPECT_EQ(d.slowest[1].seed, 13u);
  EXPECT_EQ(d.slowest[2].seed, 20u);
  ASSERT_EQ(d.histogram.size(), 6u);
  EXPECT_DOUBLE_EQ(d.histogram.front().from, 0.0);
  EXPECT_DOUBLE_EQ(d.histogram.back().to, 0.75);
  uint64_t passed = 0, failed = 0;
  for (const SweepTimeBin& b : d.histogram) {
    passed += b.passed;
    failed += b.failed;
  }
  EXPECT_EQ(passed, 15u);
  EXPECT_EQ(failed, 5u);
  // Seven distinct times in six bins of 0.125 s: the last holds 0.625 s and the slowest, 0.75 s.
  EXPECT_EQ(d.histogram.back().passed + d.histogram.back().failed, 6u);
  EXPECT_EQ(d.histogram.front().passed + d.histogram.front().failed, 2u);  // 0 s: seeds 7 and 14
}

TEST(SweepDigest, EqualTimesMakeOneBinAndNoSeedsNone) {
  SweepSummary s;
  s.results = {seed(1, "PASSED", 0.25), seed(2, "PASSED", 0.25)};
  const SweepDigest d = digest_sweep(s);
  ASSERT_EQ(d.histogram.size(), 1u);
  EXPECT_EQ(d.histogram[0].passed, 2u);
  EXPECT_DOUBLE_EQ(d.pass_rate, 1.0);
  const SweepDigest none = digest_sweep(SweepSummary{});
  EXPECT_TRUE(none.histogram.empty() && none.failures.empty() && none.slowest.empty());
  EXPECT_EQ(none.pass_rate, 0);
}

TEST(SweepDigest, ATimeThatIsNoTimeCountsAsZero) {
  SweepSummary s;
  s.results = {seed(1, "PASSED", -3), seed(2, "FAILED", std::numeric_limits<double>::infinity()),
               seed(3, "PASSED", std::numeric_limits<double>::quiet_NaN()), seed(4, "FAILED", 2.0)};
  const SweepDigest d = digest_sweep(s);
  uint64_t binned = 0;
  for (const SweepTimeBin& b : d.histogram) binned += b.passed + b.failed;
  EXPECT_EQ(binned, 4u);
  EXPECT_EQ(d.histogram.front().passed + d.histogram.front().failed, 3u);
  ASSERT_FALSE(d.slowest.empty());
  EXPECT_EQ(d.slowest.front().seed, 4u);
}

TEST(SweepDigest, TheSummarysFailedChecksAreReadAndTypeChecked) {
  const SweepSummary s = parse_sweep_summary(
      R"({"results": [{"seed": 2, "verdict": "FAILED", "failed_checks": [{"check": "restarts", "message": "3 restarts"}]}]})",
      "s.json");
  ASSERT_EQ(s.results.at(0).failed_checks.size(), 1u);
  EXPECT_EQ(s.results[0].failed_checks[0].check, "restarts");
  EXPECT_EQ(s.results[0].failed_checks[0].message, "3 restarts");
  try {
    (void)parse_sweep_summary(R"({"results": [{"seed": 2, "failed_checks": [{"check": 7}]}]})", "s.json");
    ADD_FAILURE() << "a mistyped check was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.detail(), "s.json: results[0].failed_checks[0].check: expected a string, got an integer");
  }
  try {
    (void)parse_sweep_summary(R"({"results": [{"seed": 2, "failed_checks": "restarts"}]})", "s.json");
    ADD_FAILURE() << "a mistyped list was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.detail(), "s.json: results[0].failed_checks: expected an array, got a string");
  }
}

}  // namespace
}  // namespace dagsim::cli
