// The sweep summary reader (sweep_summary.h) and the bounded JSON parse under it: typed fields,
// each wrong one named by its path; the nesting bound; special files and oversized files refused
// at once.
#include "scenarios/cli/sweep_summary.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/error.h"
#include "scenarios/format/bounded_json.h"

namespace dagsim::cli {
namespace {

std::string error_of(const std::string& text) {
  try {
    (void)parse_sweep_summary(text, "s.json");
    return "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.detail();
  }
}

TEST(SweepSummary, ReadsWhatCheckWrites) {
  const SweepSummary s = parse_sweep_summary(
      R"({"file": "a.toml", "seeds": "1..2", "runs": 2, "passed": 1, "failed": [], "provenance": {"git_commit": "x"},
          "results": [{"seed": 1, "verdict": "PASSED", "seconds": 0.25, "replay": "dagsim run a.toml --seed 1"},
                      {"seed": 18446744073709551615, "verdict": "FAILED", "seconds": 1, "summary": "why",
                       "replay": "r"}]})",
      "s.json");
  EXPECT_EQ(s.file, "a.toml");
  EXPECT_EQ(s.seeds, "1..2");
  EXPECT_EQ(s.runs, 2u);
  EXPECT_EQ(s.passed, 1u);
  ASSERT_EQ(s.results.size(), 2u);
  EXPECT_EQ(s.results[0].seconds, 0.25);
  EXPECT_EQ(s.results[0].summary, "");
  EXPECT_EQ(s.results[1].seed, 18446744073709551615u);
  EXPECT_EQ(s.results[1].summary, "why");
  // Missing fields take their defaults.
  const SweepSummary bare = parse_sweep_summary(R"({"results": [{}]})", "s.json");
  EXPECT_EQ(bare.file, "?");
  EXPECT_EQ(bare.results.at(0).verdict, "?");
}

TEST(SweepSummary, AMistypedFieldIsNamedByItsPath) {
  EXPECT_EQ(error_of(R"({"results":[{"seed":"x"}]})"), "s.json: results[0].seed: expected an unsigned integer, got a string");
  EXPECT_EQ(error_of(R"({"results":[1,2]})"), "s.json: results[0]: expected an object, got an integer");
  EXPECT_EQ(error_of(R"({"runs":"x","results":[]})"), "s.json: runs: expected an unsigned integer, got a string");
  EXPECT_EQ(error_of(R"({"passed":-1,"results":[]})"), "s.json: passed: expected an unsigned integer, got a negative integer");
  EXPECT_EQ(error_of(R"({"results":[{}, {"seconds": "1"}]})"), "s.json: results[1].seconds: expected a number, got a string");
  EXPECT_EQ(error_of(R"({"results":[{"verdict": 1.5}]})"), "s.json: results[0].verdict: expected a string, got a number with a fraction");
  EXPECT_EQ(error_of(R"({"file":null,"results":[]})"), "s.json: file: expected a string, got null");
  EXPECT_EQ(error_of(R"({"results":{}})"), "s.json: results: expected an array, got an object");
  EXPECT_EQ(error_of(R"({"runs":1})"), "s.json: not a `dagsim check --json` summary (no \"results\" list)");
  EXPECT_EQ(error_of(R"([1])"), "s.json: not a `dagsim check --json` summary (it is an array, not an object)");
  EXPECT_EQ(error_of("{"), "s.json: not JSON: [json.exception.parse_error.101] parse error at line 1, column 2: syntax error "
                           "while parsing object key - unexpected end of input; expected string literal");
}

TEST(SweepSummary, ANulByteIsNotTheEndOfTheFile) {
  // The fuzz target found it: nlohmann stops at a NUL, so what follows one went unread.
  EXPECT_EQ(error_of(std::string(R"({"results":[]})") + '\0' + "[[[[garbage"), "s.json: not JSON: a NUL byte at offset 14");
}

TEST(SweepSummary, NestingIsBounded) {
  const auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_NO_THROW(scenarios::parse_bounded_json(nested(3), 3, ErrorCode::invalid_argument, "n"));
  EXPECT_THROW(scenarios::parse_bounded_json(nested(4), 3, ErrorCode::invalid_argument, "n"), Error);
  const std::string deep = R"({"results": [{"x": )" + nested(kMaxSweepSummaryDepth) + "}]}";
  EXPECT_EQ(error_of(deep), "s.json: nested deeper than 16 arrays or objects, the limit of this file");
  EXPECT_EQ(error_of(nested(1000000)), "s.json: nested deeper than 16 arrays or objects, the limit of this file");
}

TEST(SweepSummary, ASpecialOrOversizedFileIsRefusedAtOnce) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("sweep_summary_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto refused = [](const std::string& path) -> std::string {
    try {
      (void)read_sweep_summary(path);
      return "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      return e.detail();
    }
  };
  // A FIFO with no writer: opened without waiting, refused (it once blocked `report` for ever).
  EXPECT_EQ(refused(fifo), fifo + ": cannot read: not a regular file");
  EXPECT_EQ(refused("/dev/zero"), "/dev/zero: cannot read: not a regular file");
  const std::string big = (dir / "big.json").string();
  std::ofstream(big).close();
  std::filesystem::resize_file(big, kMaxSweepSummaryBytes + 1);  // sparse: nothing is written
  EXPECT_EQ(refused(big), big + ": is larger than 512 MiB, the limit of a sweep summary");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dagsim::cli
