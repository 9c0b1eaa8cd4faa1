// `dagsim report`: the main job's records and a 50-seed `check` sweep rendered as HTML, loaded in
// a real browser (Debian's headless chromium), and asserted on what it rendered: the DOM after
// parsing (the timeline's rows and rounds, the fault marks, both loss curves, every check, every
// seed), no console errors, and a screenshot (kept under the test's scratch directory; the ones in
// reports/ were made the same way). Skips when chromium is missing (scripts/deps.sh test installs it).
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli {
namespace {

using testing::dagsim;
using testing::Output;
using testing::shell;
using testing::slurp;
using testing::temp_dir;
namespace fs = std::filesystem;

std::string chromium() {
  for (const char* candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(candidate)) return candidate;
  }
  return "";
}

// The page as the browser rendered it (its DOM after parsing), with its console on stderr, and a
// screenshot at `png`.
struct Rendered {
  std::string dom;
  std::string console;
};
Rendered render(const fs::path& html, const fs::path& png) {
  const std::string flags = " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                            " --user-data-dir=" + (temp_dir() / "chromium-profile").string() + " --enable-logging=stderr --v=0";
  Rendered r;
  const fs::path dom_file = temp_dir() / (html.stem().string() + ".dom.html");
  const fs::path console_file = temp_dir() / (html.stem().string() + ".console.txt");
  shell("timeout 120 " + chromium() + flags + " --dump-dom file://" + html.string() + " > " + dom_file.string() + " 2> " +
        console_file.string());
  r.dom = slurp(dom_file);
  r.console = slurp(console_file);
  shell("timeout 120 " + chromium() + flags + " --window-size=1240,1300 --screenshot=" + png.string() + " file://" + html.string());
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportHtml, TheMainJobsPageShowsItsTimelineLossCurveRoundsAndChecksInABrowser) {
  if (chromium().empty()) GTEST_SKIP() << "chromium missing (scripts/deps.sh test installs it)";
  const fs::path records = temp_dir() / "main_job_records";
  const std::string example = std::string(DAGSIM_EXAMPLES) + "/elastic_training.toml";
  ASSERT_EQ(dagsim("run " + example + " --seed 42 --records " + records.string()).exit_code, 0);
  const fs::path html = temp_dir() / "main_job.html";
  const Output made = dagsim("report " + records.string() + " -o " + html.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const fs::path png = temp_dir() / "main_job.png";
  const Rendered r = render(html, png);
  ASSERT_NE(r.dom.find("<svg id=\"timeline-chart\""), std::string::npos) << r.console;
  EXPECT_NE(r.dom.find("id=\"verdict\" class=\"pass\">PASSED"), std::string::npos);
  EXPECT_EQ(count(r.dom, "class=\"node-row\""), 9u);  // worker0 (the store) .. worker8
  EXPECT_GE(count(r.dom, "<rect class=\"round"), 27u);  // every member of every round
  EXPECT_EQ(count(r.dom, "<rect class=\"restart\""), 2u);
  EXPECT_EQ(count(r.dom, "<line class=\"fault\""), 2u);  // the kill and the crash
  // Both loss curves, a point per step.
  const std::regex curve(R"re(<polyline class="(loss-dagsim|loss-local)" points="([^"]*)")re");
  size_t curves = 0;
  for (auto it = std::sregex_iterator(r.dom.begin(), r.dom.end(), curve); it != std::sregex_iterator(); ++it) {
    ++curves;
    EXPECT_EQ(count((*it)[2].str(), ",") , 300u) << (*it)[1];
  }
  EXPECT_EQ(curves, 2u);
  EXPECT_NE(r.dom.find("<table id=\"rounds\">"), std::string::npos);
  EXPECT_EQ(count(r.dom, "<tr class=\"check pass\">"), 6u);
  EXPECT_NE(r.dom.find("worker8's agent joined late"), std::string::npos);
  EXPECT_EQ(r.console.find("Uncaught"), std::string::npos) << r.console;
  EXPECT_GT(fs::exists(png) ? fs::file_size(png) : 0, 10'000u) << "no screenshot";
}

TEST(ReportHtml, ASweepsPageListsEverySeedWithItsVerdictInABrowser) {
  if (chromium().empty()) GTEST_SKIP() << "chromium missing (scripts/deps.sh test installs it)";
  const std::string example = std::string(DAGSIM_EXAMPLES) + "/heartbeat_basic.toml";
  const fs::path summary = temp_dir() / "sweep.json";
  const Output sweep = dagsim("check " + example + " --seeds 1..50 --jobs 2 --json --no-progress > " + summary.string());
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
  const fs::path html = temp_dir() / "sweep.html";
  ASSERT_EQ(dagsim("report " + summary.string() + " -o " + html.string()).exit_code, 0);
  const Rendered r = render(html, temp_dir() / "sweep.png");
  EXPECT_NE(r.dom.find("50 of 50 seeds passed"), std::string::npos) << r.dom.substr(0, 2000);
  EXPECT_EQ(count(r.dom, "<tr class=\"seed pass\">"), 50u);
  EXPECT_NE(r.dom.find("dagsim run " + example + " --seed 37"), std::string::npos);
  EXPECT_EQ(r.console.find("Uncaught"), std::string::npos) << r.console;
}

TEST(ReportHtml, WhatIsNeitherRecordsNorASummaryIsRefusedByName) {
  const fs::path junk = temp_dir() / "junk.json";
  std::ofstream(junk) << "{\"runs\": 3}";
  const Output o = dagsim("report " + junk.string() + " -o " + (temp_dir() / "x.html").string());
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("not a `dagsim check --json` summary"), std::string::npos) << o.err;
  EXPECT_EQ(dagsim("report /nonexistent/records").exit_code, 2);
}

}  // namespace
}  // namespace dagsim::cli
