// `dagsim check --junit`: the XML is well-formed whatever bytes a detail holds, its counts are
// those of its cases, and a real sweep's file validates against conformance/junit/junit.xsd with
// xmllint and reads, count for count, with python3-junitparser (a reader CI tools' plugins mirror).
#include "scenarios/cli/junit.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli {
namespace {

using testing::dagsim;
using testing::Output;
using testing::shell;
using testing::slurp;
using testing::temp_dir;
using testing::write_scenario;
namespace fs = std::filesystem;

bool have_readers() {
  return shell("command -v xmllint").exit_code == 0 && shell("/usr/bin/python3 -c 'import junitparser'").exit_code == 0;
}

std::string schema() { return std::string(DAGSIM_CONFORMANCE) + "/junit/junit.xsd"; }

TEST(Junit, EscapesMarkupAndWritesBytesXmlForbidsAsText) {
  EXPECT_EQ(xml_escape("a<b&\"c'>d"), "a&lt;b&amp;&quot;c&apos;&gt;d");
  EXPECT_EQ(xml_escape("tab\tline\nend"), "tab\tline\nend");
  EXPECT_EQ(xml_escape(std::string("nul\0bell\x07", 9)), "nul\\x00bell\\x07");
  EXPECT_EQ(xml_escape("caf\xC3\xA9"), "caf\xC3\xA9");             // well-formed UTF-8 stays
  EXPECT_EQ(xml_escape("\xC3("), "\\xC3(");                         // a lead byte without its tail
  EXPECT_EQ(xml_escape("\xC0\xAF"), "\\xC0\\xAF");                  // overlong '/'
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\\xED\\xA0\\x80");         // a UTF-16 surrogate
  EXPECT_EQ(xml_escape("\xEF\xBF\xBE"), "\\xEF\\xBF\\xBE");         // U+FFFE, not an XML Char
  EXPECT_EQ(xml_escape("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");    // U+1F600 stays
  EXPECT_EQ(xml_escape("\x7F"), "\\x7F");
}

TEST(Junit, CountsAreThoseOfTheCasesTheyHold) {
  JunitReport report{"dagsim check x.toml", "2026-11-27T03:00:00", {{"seeds", "1..2"}}, {}};
  report.suites.push_back({"x.toml seed 1", "x.seed_1", 1.5,
                           {{"formed", JunitCase::Result::passed, "", ""},
                            {"loss", JunitCase::Result::failed, "diverged", "detail\nreplay: dagsim run x.toml --seed 1"}}});
  report.suites.push_back({"x.toml seed 2", "x.seed_2", 0.25,
                           {{"run", JunitCase::Result::error, "crashed", "x"}, {"cut", JunitCase::Result::skipped, "interrupted", ""}}});
  const std::string xml = junit_xml(report);
  EXPECT_NE(xml.find("<testsuites name=\"dagsim check x.toml\" tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\" time=\"1.750\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"x.toml seed 1\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"1.500\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<failure message=\"diverged\" type=\"check_failed\">detail\nreplay: dagsim run x.toml --seed 1</failure>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<skipped message=\"interrupted\"/>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<property name=\"seeds\" value=\"1..2\"/>"), std::string::npos) << xml;
}

// The validator is not a rubber stamp: a case without a name, or a count that is not a number,
// is refused. (What makes the next test's pass mean something.)
TEST(Junit, TheSchemaRefusesWhatCiReadersWould) {
  if (!have_readers()) GTEST_SKIP() << "xmllint or python3-junitparser missing (scripts/deps.sh test installs them)";
  const fs::path bad_case = write_scenario(
      "no_name.xml", "<testsuites><testsuite name=\"s\" tests=\"1\"><testcase classname=\"c\"/></testsuite></testsuites>");
  EXPECT_NE(shell("xmllint --noout --schema " + schema() + " " + bad_case.string()).exit_code, 0);
  const fs::path bad_count = write_scenario(
      "bad_count.xml", "<testsuites><testsuite name=\"s\" tests=\"many\"><testcase name=\"t\"/></testsuite></testsuites>");
  EXPECT_NE(shell("xmllint --noout --schema " + schema() + " " + bad_count.string()).exit_code, 0);
  const fs::path good = write_scenario(
      "good.xml", "<testsuites><testsuite name=\"s\" tests=\"1\"><testcase name=\"t\"/></testsuite></testsuites>");
  EXPECT_EQ(shell("xmllint --noout --schema " + schema() + " " + good.string()).exit_code, 0);
}

TEST(Junit, ACheckSweepsFileValidatesAndReadsAsCiToolsReadIt) {
  if (!have_readers()) GTEST_SKIP() << "xmllint or python3-junitparser missing (scripts/deps.sh test installs them)";
  // Four checks per seed (the two every run has, and two of its own): one fails on every seed.
  const fs::path scenario = write_scenario("junit_sweep.toml", R"(
name = "junit_sweep"
[cluster]
nodes = 3
[[faults]]
at_ms = 500
kind = "kill"
node = "worker2"
[heartbeat]
duration_ms = 2000
[[checks]]
kind = "declared_dead"
nodes = ["worker2"]
[[checks]]
kind = "never_declared_dead"
nodes = ["worker2"]
)");
  const fs::path xml = temp_dir() / "sweep.xml";
  const Output check = dagsim("check " + scenario.string() + " --seeds 1..3 --jobs 2 --junit " + xml.string());
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  const Output valid = shell("xmllint --noout --schema " + schema() + " " + xml.string());
  EXPECT_EQ(valid.exit_code, 0) << valid.out << slurp(xml);
  // junitparser's own totals, and each failure's text, as a CI tool would show them.
  const Output read = shell("/usr/bin/python3 -c '"
                            "import sys, junitparser\n"
                            "x = junitparser.JUnitXml.fromfile(sys.argv[1])\n"
                            "print(\"suites\", len(list(x)), \"tests\", x.tests, \"failures\", x.failures, \"errors\", x.errors)\n"
                            "for s in x:\n"
                            "  for c in s:\n"
                            "    for r in c.result:\n"
                            "      print(\"case\", s.name, c.name, type(r).__name__, r.message)\n"
                            "      print(r.text.splitlines()[-1])\n"
                            "' " + xml.string());
  ASSERT_EQ(read.exit_code, 0) << read.out;
  EXPECT_NE(read.out.find("suites 3 tests 12 failures 3 errors 0"), std::string::npos) << read.out;
  EXPECT_NE(read.out.find("case " + scenario.string() + " seed 2 never_declared_dead Failure"), std::string::npos) << read.out;
  EXPECT_NE(read.out.find("replay: dagsim run " + scenario.string() + " --seed 2"), std::string::npos) << read.out;
}

TEST(Junit, AnUnwritablePathFailsBeforeAnySeedRuns) {
  const fs::path scenario = write_scenario("junit_ok.toml", "name = \"ok\"\n[cluster]\nnodes = 2\n[heartbeat]\nduration_ms = 500\n");
  const Output o = dagsim("check " + scenario.string() + " --seeds 1..2 --junit /nonexistent/dir/out.xml");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--junit /nonexistent/dir/out.xml: cannot write"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "");
}

}  // namespace
}  // namespace dagsim::cli
