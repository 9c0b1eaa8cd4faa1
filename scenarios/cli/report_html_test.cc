// `dagsim report`: the main job's records, the main job through a partition, and 50-seed `check`
// sweeps rendered as HTML, loaded in a real browser (Debian's headless chromium), and asserted on
// what it rendered: the DOM after parsing (the timeline's rows, rounds and legend, the fault marks,
// a partition's span with its groups and its cut-off node not drawn as training, both loss curves
// and their difference, the rounds with who left each, every check; a sweep's summary: pass rate,
// failures grouped by check and message, slowest seeds, the run-time histogram; every seed), no
// console errors, and a screenshot (kept under the test's scratch directory; the ones in reports/
// were made the same way, by scripts/report_screenshots.sh). Skips when chromium is missing
// (scripts/deps.sh test installs it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

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

// Every match of `pattern` in `text`, each as its groups.
std::vector<std::smatch> matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::smatch> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) out.push_back(*it);
  return out;
}

// The legend's kinds, in order: the data-kind of each .legend-item under #timeline-legend.
std::vector<std::string> legend_kinds(const std::string& dom) {
  std::vector<std::string> kinds;
  const size_t legend = dom.find("<g id=\"timeline-legend\"");
  if (legend == std::string::npos) return kinds;
  const std::string part = dom.substr(legend, dom.find("</svg>", legend) - legend);
  for (const std::smatch& m : matches(part, R"re(<g class="legend-item" data-kind="([^"]*)")re")) kinds.push_back(m[1]);
  return kinds;
}

bool contains(const std::vector<std::string>& list, const std::string& what) {
  return std::find(list.begin(), list.end(), what) != list.end();
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
  // Beside them, their difference step by step, a point per step: 0 at every one.
  const auto difference = matches(r.dom, R"re(<polyline class="loss-difference" points="([^"]*)")re");
  ASSERT_EQ(difference.size(), 1u) << "no difference from local training drawn";
  EXPECT_EQ(count(difference[0][1].str(), ","), 300u);
  EXPECT_NE(r.dom.find("id=\"loss-difference-verdict\" x=\"70\" y=\"278\">0 at every one of 300 steps"), std::string::npos);
  // The timeline's legend names what the chart drew, and only that: the rounds in their two
  // colours, the restarts and the faults; no partition was drawn, so none is in the legend.
  const std::vector<std::string> legend = legend_kinds(r.dom);
  EXPECT_TRUE(contains(legend, "round") && contains(legend, "round odd") && contains(legend, "restart") && contains(legend, "fault"))
      << ::testing::PrintToString(legend);
  EXPECT_FALSE(contains(legend, "partition") || contains(legend, "cut")) << ::testing::PrintToString(legend);
  // The rounds table says who left each round and why: worker3's kill ends round 0, worker6's crash round 2.
  EXPECT_NE(r.dom.find("<table id=\"rounds\">"), std::string::npos);
  const auto left = matches(r.dom, R"re(<td class="left">([^<]*)</td>)re");
  ASSERT_EQ(left.size(), 4u);
  EXPECT_EQ(left[0][1].str(), "worker3 (killed, 2.020 s)");
  EXPECT_EQ(left[1][1].str(), "");
  EXPECT_EQ(left[2][1].str(), "worker6 (crashed, 7.562 s)");
  EXPECT_EQ(left[3][1].str(), "");
  EXPECT_EQ(count(r.dom, "<tr class=\"check pass\">"), 6u);
  EXPECT_NE(r.dom.find("worker8's agent joined late"), std::string::npos);
  EXPECT_EQ(r.console.find("Uncaught"), std::string::npos) << r.console;
  EXPECT_GT(fs::exists(png) ? fs::file_size(png) : 0, 10'000u) << "no screenshot";
}

TEST(ReportHtml, APartitionIsASpanWithItsGroupsAndItsCutOffNodeIsNotDrawnAsTraining) {
  if (chromium().empty()) GTEST_SKIP() << "chromium missing (scripts/deps.sh test installs it)";
  // The main job, with worker7 cut off from every other live node for 0.8 s while round 3 trains.
  std::ifstream in(std::string(DAGSIM_EXAMPLES) + "/elastic_training.toml");
  const fs::path scenario = temp_dir() / "elastic_partition.toml";
  std::ofstream(scenario) << in.rdbuf() << "\n[[faults]]\nat_ms = 10500\nkind = \"partition\"\n"
                          << "groups = [[\"worker7\"], [\"worker0\", \"worker1\", \"worker2\", \"worker4\", \"worker5\", \"worker6\", \"worker8\"]]\n"
                          << "heal_after_ms = 800\n";
  const fs::path records = temp_dir() / "partition_records";
  ASSERT_EQ(dagsim("run " + scenario.string() + " --seed 42 --records " + records.string()).exit_code, 0);
  const fs::path html = temp_dir() / "partition.html";
  ASSERT_EQ(dagsim("report " + records.string() + " -o " + html.string()).exit_code, 0);
  const Rendered r = render(html, temp_dir() / "partition.png");
  // One span, naming both groups, from its start to its heal.
  const auto bands = matches(r.dom, R"re(<rect class="partition" data-groups="([^"]*)" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)")re");
  ASSERT_EQ(bands.size(), 1u) << r.console;
  EXPECT_EQ(bands[0][1].str(), "{worker7} | {worker0, worker1, worker2, worker4, worker5, worker6, worker8}");
  const double x0 = std::stod(bands[0][2]), x1 = x0 + std::stod(bands[0][3]);
  EXPECT_GT(x1 - x0, 20);  // 0.8 s of 13 s across 1060 px
  // Each node of each group tagged on its row.
  EXPECT_EQ(count(r.dom, "<rect class=\"partition-group g0\" data-node=\"worker7\""), 1u);
  EXPECT_EQ(count(r.dom, "<rect class=\"partition-group g1\""), 7u);
  // worker7 is drawn cut off inside the span, and no round of it is drawn there.
  EXPECT_EQ(count(r.dom, "<rect class=\"cut\" data-node=\"worker7\""), 1u);
  size_t worker7_rounds = 0;
  for (const std::smatch& m : matches(r.dom, R"re(<rect class="round[^"]*" data-node="worker7" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)")re")) {
    ++worker7_rounds;
    const double b = std::stod(m[1]), e = b + std::stod(m[2]);
    EXPECT_TRUE(e <= x0 + 0.01 || b >= x1 - 0.01) << "worker7 drawn training from " << b << " to " << e << " inside " << x0 << ".." << x1;
  }
  EXPECT_GE(worker7_rounds, 4u);
  // Every other node goes on being drawn as a member through the span.
  for (const std::smatch& m : matches(r.dom, R"re(<rect class="cut" data-node="([^"]*)")re")) EXPECT_EQ(m[1].str(), "worker7");
  const std::vector<std::string> legend = legend_kinds(r.dom);
  EXPECT_TRUE(contains(legend, "partition") && contains(legend, "cut") && contains(legend, "partition-group g0"))
      << ::testing::PrintToString(legend);
  EXPECT_EQ(r.console.find("Uncaught"), std::string::npos) << r.console;
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
  // The summary first: everything passed, so no failure groups; the histogram holds every seed.
  ASSERT_NE(r.dom.find("<section id=\"sweep-summary\">"), std::string::npos);
  EXPECT_LT(r.dom.find("<section id=\"sweep-summary\">"), r.dom.find("<table id=\"seeds\">"));
  EXPECT_NE(r.dom.find("<b class=\"pass\">100%</b>pass rate (50 of 50)"), std::string::npos);
  EXPECT_NE(r.dom.find("<p id=\"failure-groups\" class=\"pass\">No seed failed.</p>"), std::string::npos);
  EXPECT_EQ(count(r.dom, "<tr class=\"failure-group\">"), 0u);
  EXPECT_EQ(count(r.dom, "<tr class=\"slow pass\">"), 5u);
  EXPECT_EQ(count(r.dom, "<tr class=\"seed pass\">"), 50u);
  EXPECT_NE(r.dom.find("dagsim run " + example + " --seed 37"), std::string::npos);
  EXPECT_EQ(r.console.find("Uncaught"), std::string::npos) << r.console;
}

TEST(ReportHtml, AFailingSweepsPageOpensWithItsPassRateFailuresByCheckAndMessageSlowestSeedsAndRunTimes) {
  if (chromium().empty()) GTEST_SKIP() << "chromium missing (scripts/deps.sh test installs it)";
  // reports/screenshots/strict_check.toml: random kills, and a check that no worker is ever
  // declared dead, so the seeds that kill one fail, each with its own node and times.
  const fs::path scenario = temp_dir() / "strict_check.toml";
  std::ofstream(scenario) << "name = \"strict_check\"\n[cluster]\nnodes = 4\n[random_faults]\nkill_per_min = 4\n"
                          << "restart_after_ms = 1000\nexclude = [\"worker0\"]\n[heartbeat]\nduration_ms = 6000\n"
                          << "[[checks]]\nkind = \"never_declared_dead\"\nnodes = [\"worker1\", \"worker2\", \"worker3\"]\n";
  const fs::path summary = temp_dir() / "strict_sweep.json";
  const Output sweep = dagsim("check " + scenario.string() + " --seeds 1..50 --jobs 2 --json --no-progress > " + summary.string());
  ASSERT_EQ(sweep.exit_code, 1) << sweep.err;
  const fs::path html = temp_dir() / "strict_sweep.html";
  ASSERT_EQ(dagsim("report " + summary.string() + " -o " + html.string()).exit_code, 0);
  const Rendered r = render(html, temp_dir() / "strict_sweep.png");
  const size_t failed = count(r.dom, "<tr class=\"seed fail\">");
  ASSERT_GT(failed, 0u);
  ASSERT_LT(failed, 50u);
  const size_t passed = 50 - failed;
  // The pass rate.
  EXPECT_NE(r.dom.find("%</b>pass rate (" + std::to_string(passed) + " of 50)"), std::string::npos) << r.dom.substr(0, 3000);
  // Failures by check and message, numbers aside: every failing seed in one group or another, the
  // one-violation group first (the most seeds) with its message's pattern.
  const auto groups = matches(r.dom, R"re(<tr class="failure-group"><td>([^<]*)</td><td>([0-9]+)</td><td class="mono"[^>]*>([^<]*)</td>)re");
  ASSERT_GE(groups.size(), 1u) << r.dom.substr(0, 4000);
  size_t grouped = 0;
  for (const std::smatch& g : groups) {
    EXPECT_EQ(g[1].str(), "never_declared_dead");
    grouped += std::stoul(g[2]);
  }
  EXPECT_GE(grouped, failed);
  EXPECT_EQ(groups[0][3].str(), "# violation: worker# was declared dead by worker# at # s, after the kill worker# at # s");
  // The slowest seeds, slowest first.
  const auto slow = matches(r.dom, R"re(<tr class="slow (?:pass|fail)"><td>([0-9]+)</td><td>([0-9.]+)</td>)re");
  ASSERT_EQ(slow.size(), 5u);
  for (size_t i = 1; i < slow.size(); ++i) EXPECT_GE(std::stod(slow[i - 1][2]), std::stod(slow[i][2]));
  // The histogram of run times holds every seed once, passed and failed apart.
  size_t in_bins_passed = 0, in_bins_failed = 0;
  for (const std::smatch& m : matches(r.dom, R"re(<g class="bin" data-passed="([0-9]+)" data-failed="([0-9]+)")re")) {
    in_bins_passed += std::stoul(m[1]);
    in_bins_failed += std::stoul(m[2]);
  }
  EXPECT_EQ(in_bins_passed, passed);
  EXPECT_EQ(in_bins_failed, failed);
  EXPECT_NE(r.dom.find("<svg id=\"runtime-histogram\""), std::string::npos);
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
