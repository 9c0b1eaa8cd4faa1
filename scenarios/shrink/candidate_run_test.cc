// Classifying a run (candidate_run.h): the report read defensively (older binaries, crashes), the
// failure signature chosen, and "the same way" matched.
#include "scenarios/shrink/candidate_run.h"

#include <gtest/gtest.h>

namespace dagsim::shrink {
namespace {

const char* kReport = R"({"outcome": "finished", "virtual_time_ms": 60000.5, "wall_ms": 12,
  "faults": [{"kind": "kill", "at_ms": 10, "node": "worker1"}],
  "checks": [{"name": "run_completed", "passed": true}, {"name": "no_false_suspicion", "passed": false},
             {"name": "never_declared_dead", "passed": false}]})";

TEST(ClassifyRun, ReadsTheReport) {
  const RunOutcome run = classify_run(1, kReport, "");
  EXPECT_TRUE(run.report_read);
  EXPECT_EQ(run.outcome, "finished");
  ASSERT_TRUE(run.virtual_time_ms.has_value());
  EXPECT_DOUBLE_EQ(*run.virtual_time_ms, 60000.5);
  EXPECT_EQ(run.failed_checks, std::vector<std::string>({"no_false_suspicion", "never_declared_dead"}));
  EXPECT_EQ(run.faults.size(), 1u);
}

TEST(ClassifyRun, OlderOrBrokenReportsFallBackToTheExitCode) {
  // An older binary's report: no outcome, no faults, a check without "passed".
  const RunOutcome old = classify_run(1, R"({"checks": [{"name": "x"}, 7, {"passed": false}]})", "");
  EXPECT_TRUE(old.report_read);
  EXPECT_EQ(old.outcome, "");
  EXPECT_EQ(old.failed_checks, std::vector<std::string>({"x"}));
  EXPECT_FALSE(old.virtual_time_ms.has_value());
  const RunOutcome crashed = classify_run(3, "{\"checks\": [", "noise\ndagsim: assertion failed: x > 0 at a.cc:12\nmore\n");
  EXPECT_FALSE(crashed.report_read);
  EXPECT_EQ(crashed.crash_line, "dagsim: assertion failed: x > 0 at a.cc:12");
}

TEST(Signature, PrefersAWorkloadCheckAndMatchesTheSameWay) {
  std::string why;
  const RunOutcome run = classify_run(1, kReport, "");
  const std::optional<FailureSignature> s = signature_of(run, "", &why);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->check, "no_false_suspicion");
  EXPECT_TRUE(s->matches(run));
  // The other check failing alone is another failure; so is the same check in another outcome.
  EXPECT_FALSE(s->matches(classify_run(1, R"({"outcome": "finished", "checks": [{"name": "never_declared_dead", "passed": false}]})", "")));
  EXPECT_FALSE(s->matches(classify_run(1, R"({"outcome": "time_limit", "checks": [{"name": "no_false_suspicion", "passed": false}]})", "")));
  EXPECT_FALSE(s->matches(classify_run(0, R"({"outcome": "finished", "checks": []})", "")));
  EXPECT_FALSE(s->matches(classify_run(4, "", "")));
  const std::optional<FailureSignature> chosen = signature_of(run, "never_declared_dead", &why);
  ASSERT_TRUE(chosen.has_value());
  EXPECT_EQ(chosen->check, "never_declared_dead");
}

TEST(Signature, RefusesPassingRunsAndChecksThatDidNotFail) {
  std::string why;
  EXPECT_FALSE(signature_of(classify_run(0, R"({"checks": []})", ""), "", &why).has_value());
  EXPECT_EQ(why, "the run passed");
  EXPECT_FALSE(signature_of(classify_run(1, kReport, ""), "detects_failures", &why).has_value());
  EXPECT_FALSE(signature_of(classify_run(4, "", ""), "", &why).has_value());
}

TEST(Signature, ACrashMatchesItsExitCodeAndAssertion) {
  std::string why;
  const RunOutcome crash = classify_run(3, "", "dagsim: assertion failed: a at b.cc:1\n");
  const std::optional<FailureSignature> s = signature_of(crash, "", &why);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, FailureSignature::Kind::crash);
  EXPECT_TRUE(s->matches(crash));
  EXPECT_FALSE(s->matches(classify_run(3, "", "dagsim: assertion failed: c at d.cc:2\n")));
  EXPECT_FALSE(s->matches(classify_run(1, kReport, "")));
}

}  // namespace
}  // namespace dagsim::shrink
