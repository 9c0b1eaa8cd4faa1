// Classifying a run (candidate_run.h): the report read defensively (older binaries, crashes), the
// failure signature chosen, and "the same way" matched.
#include "scenarios/shrink/candidate_run.h"
#include "scenarios/shrink/shrink_header.h"

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

TEST(ClassifyRun, KeepsTheSwarmMixForTheShrunkFilesHeader) {
  const RunOutcome run = classify_run(
      1, R"({"outcome": "finished", "checks": [], "swarm": {"summary": "kinds pause; targets worker1\nworker2"}})", "");
  EXPECT_EQ(run.swarm, "kinds pause; targets worker1\nworker2");
  ShrinkReport report;
  report.original = "a.toml";
  report.seed = 7;
  report.output = "a.seed7.shrunk.toml";
  report.result.text = "name = \"a\"\n";
  EXPECT_EQ(shrunk_file_text(report).find("swarm"), std::string::npos);
  report.swarm_mix = run.swarm;
  const std::string text = shrunk_file_text(report);
  // One comment line: the line break in the mix must not end the comment.
  EXPECT_NE(text.find("# The failing run's swarm mix (seed 7): kinds pause; targets worker1 worker2\n"), std::string::npos);
  EXPECT_EQ(classify_run(1, R"({"checks": [], "swarm": {"kinds": []}})", "").swarm, "");
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

TEST(DetailTemplate, NormalisesNumbersNodesHexAndDurationsButKeepsRuleIds) {
  EXPECT_EQ(detail_template("the program failed: Autograd error: Error on Node 0: backward pass of context 0:2 lost a worker: "
                            "termination probe of context 0:2 to worker2 timed out after 100 ms"),
            "the program failed: Autograd error: Error on Node #: backward pass of context #:# lost a worker: "
            "termination probe of context #:# to worker# timed out after #t");
  // Other numbers, another node, decimals, exponents, hex and units: the same form.
  EXPECT_EQ(detail_template("probe to worker13 timed out after 1.5 s (0x7f3a, 1e-05, -3)"),
            detail_template("probe to worker2 timed out after 100ms (0xdeadbeef, 2.5e+07, 4)"));
  EXPECT_EQ(detail_template("trace 3fa2b1c0 differs"), "trace # differs");
  // A rule id is kept: L6 is not L2.
  EXPECT_EQ(detail_template("1 violation: L6 (store life 0, round 0; worker1_0_0): expired"),
            "# violation: L6 (store life #, round #; worker#_#_#): expired");
  EXPECT_NE(detail_template("L6 (round 1)"), detail_template("L2 (round 1)"));
  // Another error is another form.
  EXPECT_NE(detail_template("the program failed: Network connection failed: rpc 'dagsim.optim.create' to worker2: "
                            "connection to worker2 timed out"),
            detail_template("the program failed: Autograd error: Error on Node 0: backward pass of context 0:2 lost a "
                            "worker: termination probe of context 0:2 to worker2 timed out after 100 ms"));
}

TEST(DetailTemplate, AViolationListIsMatchedByEachOfItsForms) {
  const std::vector<std::string> forms = detail_forms(
      "7 violations: L6 (store life 0, round 0; worker1_0_0): expired; L2 (round 3): not formed by 12 ms; "
      "L6 (store life 1, round 2; worker3_1_0): expired; and 4 more");
  EXPECT_EQ(forms, std::vector<std::string>({"L6 (store life #, round #; worker#_#_#): expired",
                                             "L2 (round #): not formed by #t"}));
  EXPECT_EQ(detail_forms("worker4 reports 1 restarts; its events count 0"),
            std::vector<std::string>({"worker# reports # restarts; its events count #"}));
  EXPECT_TRUE(detail_forms("").empty());
}

TEST(Signature, TheDetailsFormMustMatch) {
  auto report = [](const std::string& detail) {
    return classify_run(1, R"({"outcome": "finished", "checks": [{"name": "run_completed", "passed": true},
      {"name": "params_match_local", "passed": false, "detail": ")" + detail + R"("}]})", "");
  };
  const RunOutcome original = report("the program failed: Autograd error: backward pass of context 0:5 lost a worker: "
                                     "termination probe of context 0:5 to worker2 timed out after 100 ms");
  std::string why;
  const std::optional<FailureSignature> s = signature_of(original, "", &why);
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->forms.size(), 1u);
  EXPECT_TRUE(s->matches(original));
  EXPECT_TRUE(s->matches(report("the program failed: Autograd error: backward pass of context 0:2 lost a worker: "
                                "termination probe of context 0:2 to worker3 timed out after 100 ms")));
  // The same check failing for another reason: the shrinks that cut a timeout.
  EXPECT_FALSE(s->matches(report("the program failed: Network connection failed: rpc 'dagsim.optim.create' to worker2: "
                                 "connection to worker2 timed out")));
  EXPECT_FALSE(s->matches(report("the program failed: Autograd error: backward pass of context 0:2 made no progress "
                                 "for 102 ms")));
  EXPECT_NE(s->describe().find("termination probe of context #:# to worker# timed out after #t"), std::string::npos)
      << s->describe();

  // A violation list: a candidate showing one of the original's forms is the same failure.
  const RunOutcome listed = classify_run(1, R"({"outcome": "finished", "checks": [{"name": "invariants", "passed": false,
      "detail": "2 violations: L6 (store life 0, round 0; worker1_0_0): expired; L2 (round 3): not formed"}]})", "");
  const std::optional<FailureSignature> l = signature_of(listed, "", &why);
  ASSERT_TRUE(l.has_value());
  EXPECT_TRUE(l->matches(classify_run(1, R"({"outcome": "finished", "checks": [{"name": "invariants", "passed": false,
      "detail": "1 violation: L6 (store life 2, round 1; worker4_0_1): expired"}]})", "")));
  EXPECT_FALSE(l->matches(classify_run(1, R"({"outcome": "finished", "checks": [{"name": "invariants", "passed": false,
      "detail": "1 violation: L4 (round 1): two rounds"}]})", "")));
}

TEST(Signature, TwoChecksOfOneKindAreNotConfused) {
  // Two `formed` checks; the second fails.
  const char* second = R"({"outcome": "finished", "checks": [{"name": "formed", "passed": true, "detail": "formed"},
      {"name": "formed", "passed": false, "detail": "not formed by 10 ms"}]})";
  const char* first = R"({"outcome": "finished", "checks": [{"name": "formed", "passed": false, "detail": "not formed by 10 ms"},
      {"name": "formed", "passed": true, "detail": "formed"}]})";
  std::string why;
  const std::optional<FailureSignature> s = signature_of(classify_run(1, second, ""), "", &why);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->check, "formed");
  EXPECT_EQ(s->ordinal, 1u);
  EXPECT_NE(s->describe().find("the 2nd of its kind"), std::string::npos) << s->describe();
  EXPECT_TRUE(s->matches(classify_run(1, second, "")));
  EXPECT_FALSE(s->matches(classify_run(1, first, "")));
  // With only one `formed` left, the second is gone: not the same check.
  EXPECT_FALSE(s->matches(classify_run(1, R"({"outcome": "finished", "checks": [{"name": "formed", "passed": false,
      "detail": "not formed by 10 ms"}]})", "")));
  const std::optional<FailureSignature> f = signature_of(classify_run(1, first, ""), "formed", &why);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->ordinal, 0u);
  EXPECT_FALSE(f->matches(classify_run(1, second, "")));
}

}  // namespace
}  // namespace dagsim::shrink
