// JUnit XML for `dagsim check --junit FILE`: the Ant/Jenkins "testsuites" format that GitLab,
// Jenkins, GitHub's test reporters and most CI tools read. One <testsuite> per seed (its wall time
// is the seed's run), one <testcase> per check the seed's report names, and a seed without a report
// (a crash, an invalid scenario, a limit, an interrupt) as one <testcase name="run">.
//
// Promises: the output is well-formed XML 1.0 whatever bytes a detail holds (markup characters are
// escaped; bytes XML forbids, and malformed UTF-8, are written as \xNN text); it validates against
// conformance/junit/junit.xsd, the schema CI tools' readers accept; a failing case's text ends with
// the line that replays the seed; the counts on each element are those of what it contains.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dagsim::cli {

struct JunitCase {
  enum class Result { passed, failed, error, skipped };
  std::string name;
  Result result = Result::passed;
  std::string message;  // one line: the failure's, error's or skip's reason
  std::string text;     // the detail, for failures and errors
};

struct JunitSuite {
  std::string name;       // e.g. "elastic_training.toml seed 42"
  std::string classname;  // e.g. "elastic_training.seed_42": what reporters group cases by
  double seconds = 0;
  std::vector<JunitCase> cases;
};

struct JunitReport {
  std::string name;                                            // the whole run, e.g. "dagsim check FILE"
  std::string timestamp;                                       // ISO 8601, UTC, no zone suffix
  std::vector<std::pair<std::string, std::string>> properties;  // on every suite
  std::vector<JunitSuite> suites;
};

// The document, ready to write.
std::string junit_xml(const JunitReport& report);

// `text` escaped for an XML attribute value or element content (see the promises above).
std::string xml_escape(std::string_view text);

}  // namespace dagsim::cli
