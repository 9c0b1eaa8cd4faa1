// `dagsim report`, `dagsim judge` and `dagsim run` on a [job] scenario, with no job run: a job
// run's records directory is written as data (write_records_dir, job_spec.h's layout), then
// judged and drawn by the binary. The page is loaded in headless chromium (as report_html_test's
// main-job page is) and asserted on: an agent row per agent and one for the store, each agent's
// incarnations, its workers in lanes, the rounds, the restart between worker groups, the faults
// as marks and as spans on the rows they struck, the seed note; and a screenshot. Skips the
// browser part when chromium is missing (scripts/deps.sh test installs it).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cstdlib>
#include <regex>
#include <string>

#include "scenarios/cli/cli_test_util.h"
#include "scenarios/run/records.h"
#include "scenarios/workloads/job/job_records_test_util.h"

namespace dagsim::cli {
namespace {

using nlohmann::json;
using testing::dagsim;
using testing::Output;
using testing::shell;
using testing::slurp;
using testing::temp_dir;
namespace fs = std::filesystem;

constexpr const char* kScenario = R"(name = "job_report"
description = "two agents x two workers; agent1 crashes and comes back; the store pauses"

[job]
command = ["train.py"]
agents = 2
nnodes = "1:2"
nproc_per_node = 2
launcher = "dagsim"
rdzv_backend = "c10d"
timeout_ms = 60000

[[faults]]
kind = "crash"
node = "agent1"
at_ms = 3000
restart_after_ms = 1000

[[faults]]
kind = "store_pause"
at_ms = 6000
resume_after_ms = 500

[[checks]]
kind = "job_succeeded"

[[checks]]
kind = "no_orphans"

[[checks]]
kind = "reformed_within"
ms = 5000

[[checks]]
kind = "restarts"
max = 2
)";

// A job run as its runner would record it (job_records_test_util.h's): agent1 crashes at 3 s and
// starts again at 4 s; agent0's workers fail at the crash and its group restarts; rounds at 1 s,
// 5 s and 6.8 s (after the store's pause at 6 s).
scenarios::RunRecords job_records(const fs::path& job_dir) {
  scenarios::RunRecords r = scenarios::job_test::two_agent_job_run({"dagsim", "launch", "train.py"}, job_dir.string(), 7, "pytorch");
  r.scenario_file = "job_report.toml";
  r.seed = 7;
  r.workload_end = r.end;
  return r;
}

fs::path write_job_records(const std::string& name) {
  const fs::path dir = temp_dir() / name;
  scenarios::write_records_dir(dir.string(), job_records(dir), kScenario);
  return dir;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string chromium() {
  for (const char* candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(candidate)) return candidate;
  }
  return "";
}

TEST(JobCli, JudgeReJudgesAJobRunFromItsRecords) {
  const fs::path dir = write_job_records("judged");
  const Output judged = dagsim("judge " + dir.string());
  EXPECT_EQ(judged.exit_code, 0) << judged.out << judged.err;
  EXPECT_NE(judged.out.find("PASS job_succeeded"), std::string::npos) << judged.out;
  EXPECT_NE(judged.out.find("PASS reformed_within"), std::string::npos) << judged.out;
  EXPECT_NE(judged.out.find("the fault schedule is seeded"), std::string::npos) << judged.out;
  EXPECT_EQ(judged.out.find("--transport job"), std::string::npos) << judged.out;
  const Output json_report = dagsim("judge --json " + dir.string());
  ASSERT_EQ(json_report.exit_code, 0) << json_report.err;
  const json report = json::parse(json_report.out);
  EXPECT_EQ(report["job"]["agents"].size(), 3u);
  EXPECT_EQ(report["replay"], "dagsim run job_report.toml --seed 7");

  // A record made wrong for one check fails it, from the records alone.
  scenarios::RunRecords bad = job_records(dir);
  bad.job["orphans"] = {{{"pid", 4242}, {"cmdline", "python3 train.py"}}};
  const fs::path bad_dir = temp_dir() / "orphaned";
  scenarios::write_records_dir(bad_dir.string(), bad, kScenario);
  const Output failed = dagsim("judge " + bad_dir.string());
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  EXPECT_NE(failed.out.find("FAIL no_orphans"), std::string::npos) << failed.out;
  EXPECT_NE(failed.out.find("pid 4242: python3 train.py"), std::string::npos) << failed.out;
  // And a malformed job record is refused, naming the key.
  bad = job_records(dir);
  bad.job["rounds"][0].erase("at_ms");
  const fs::path malformed = temp_dir() / "malformed";
  scenarios::write_records_dir(malformed.string(), bad, kScenario);
  const Output refused = dagsim("judge " + malformed.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.err.find("job.rounds[0].at_ms"), std::string::npos) << refused.err;
}

TEST(JobCli, RunRefusesWhatAJobCannotDo) {
  const fs::path file = temp_dir() / "refused.toml";
  std::ofstream(file) << kScenario;
  for (const std::string& flags : std::vector<std::string>{"--transport tcp", "--trace " + (temp_dir() / "t.json").string(), "--check-determinism"}) {
    const Output out = dagsim("run " + file.string() + " " + flags);
    EXPECT_EQ(out.exit_code, 2) << flags << ": " << out.err;
    EXPECT_NE(out.err.find("is a [job] scenario"), std::string::npos) << flags << ": " << out.err;
  }
}

TEST(JobCli, ReportDrawsAgentsWorkersRoundsFaultsAndRestartsInABrowser) {
  const fs::path dir = write_job_records("drawn");
  const fs::path html = temp_dir() / "job.html";
  const Output made = dagsim("report " + dir.string() + " -o " + html.string());
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string page = slurp(html);
  // What the page holds, before any browser: a row per agent and the store's.
  EXPECT_EQ(count(page, "class=\"node-row\""), 3u);
  EXPECT_NE(page.find("data-node=\"store\""), std::string::npos);
  EXPECT_EQ(count(page, "<rect class=\"agent\""), 3u);   // agent0, agent1 and its second incarnation
  EXPECT_EQ(count(page, "<rect class=\"worker\""), 8u);  // every worker process
  EXPECT_EQ(count(page, "<rect class=\"restart\""), 1u);  // agent0's worker group restarted
  EXPECT_GE(count(page, "<rect class=\"round"), 6u);
  EXPECT_EQ(count(page, "<rect class=\"struck\""), 2u);  // agent1's crash, the store's pause
  EXPECT_EQ(count(page, "<line class=\"fault\""), 2u);
  EXPECT_NE(page.find("agent1:0 pid 201"), std::string::npos);
  EXPECT_NE(page.find("id=\"job-note\""), std::string::npos);
  EXPECT_NE(page.find("the fault schedule is seeded"), std::string::npos);
  EXPECT_NE(page.find("<table id=\"rounds\">"), std::string::npos);

  if (chromium().empty()) GTEST_SKIP() << "chromium missing (scripts/deps.sh test installs it)";
  const std::string flags = " --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                            " --user-data-dir=" + (temp_dir() / "chromium-profile").string() + " --enable-logging=stderr --v=0";
  const fs::path dom_file = temp_dir() / "job.dom.html";
  const fs::path console = temp_dir() / "job.console.txt";
  shell("timeout 120 " + chromium() + flags + " --dump-dom file://" + html.string() + " > " + dom_file.string() + " 2> " +
        console.string());
  const std::string dom = slurp(dom_file);
  ASSERT_NE(dom.find("<svg id=\"timeline-chart\""), std::string::npos) << slurp(console);
  EXPECT_NE(dom.find("id=\"verdict\" class=\"pass\">PASSED"), std::string::npos);
  EXPECT_EQ(count(dom, "<rect class=\"agent\""), 3u);
  EXPECT_EQ(count(dom, "<rect class=\"worker\""), 8u);
  EXPECT_EQ(count(dom, "<rect class=\"struck\""), 2u);
  EXPECT_EQ(count(dom, "<tr class=\"check pass\">"), 6u);  // run_completed, no_fiber_failures and the four
  // The legend names what was drawn.
  for (const char* kind : {"agent", "worker", "round", "restart", "struck", "fault"}) {
    EXPECT_NE(dom.find("data-kind=\"" + std::string(kind) + "\""), std::string::npos) << kind;
  }
  EXPECT_EQ(slurp(console).find("Uncaught"), std::string::npos) << slurp(console);
  const fs::path png = temp_dir() / "job.png";
  shell("timeout 120 " + chromium() + flags + " --window-size=1240,1300 --screenshot=" + png.string() + " file://" + html.string());
  EXPECT_GT(fs::exists(png) ? fs::file_size(png) : 0, 10'000u) << "no screenshot";
}

// A real job, tiny (two agents, a worker each, a script that prints and exits): `dagsim check`
// runs its seeds one at a time whatever --jobs says, and writes JUnit and the sweep page, each
// saying that the job is real; one seed's records draw its page.
TEST(JobCli, CheckSweepsARealJobOneSeedAtATimeToJunitAndHtml) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 for the job's workers";
  const fs::path dir = temp_dir() / "real_job";
  fs::create_directories(dir);
  std::ofstream(dir / "train.py") << "import os, time\nfor i in range(3):\n    print('step', i, os.environ.get('RANK'), flush=True)\n"
                                     "    time.sleep(0.1)\n";
  std::ofstream(dir / "job.toml") << R"(name = "tiny_job"

[job]
command = ["train.py"]
python = "/usr/bin/python3"
agents = 2
nnodes = "2:2"
nproc_per_node = 1
timeout_ms = 60000

[[checks]]
kind = "job_succeeded"

[[checks]]
kind = "no_orphans"

[[checks]]
kind = "restarts"
max = 0
)";
  // Each seed's run folder (agents' logs, the store's record) goes under $TMPDIR: here, the scratch dir.
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string saved = tmpdir != nullptr ? tmpdir : "";
  setenv("TMPDIR", dir.c_str(), 1);
  struct Restore {
    std::string value;
    ~Restore() { value.empty() ? unsetenv("TMPDIR") : setenv("TMPDIR", value.c_str(), 1); }
  } restore{saved};
  const fs::path junit = dir / "junit.xml", html = dir / "sweep.html";
  const Output checked = dagsim("check " + (dir / "job.toml").string() + " --seeds 1..3 --jobs 4 --no-progress --junit " +
                                junit.string() + " --html " + html.string());
  ASSERT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  EXPECT_NE(checked.err.find("its seeds run one at a time"), std::string::npos) << checked.err;
  EXPECT_NE(checked.out.find("3/3 seeds passed"), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("only its fault schedule is seeded"), std::string::npos) << checked.out;
  const std::string xml = slurp(junit);
  EXPECT_EQ(count(xml, "<testsuite "), 3u) << xml;
  EXPECT_NE(xml.find("name=\"note\""), std::string::npos) << xml;
  const std::string page = slurp(html);
  EXPECT_NE(page.find("id=\"sweep-note\""), std::string::npos);
  EXPECT_NE(page.find("3 of 3 seeds passed"), std::string::npos);

  const fs::path records = dir / "records";
  const Output run = dagsim("run " + (dir / "job.toml").string() + " --seed 5 --records " + records.string());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("the fault schedule is seeded"), std::string::npos) << run.out;
  const Output drawn = dagsim("report " + records.string() + " -o " + (dir / "run.html").string());
  ASSERT_EQ(drawn.exit_code, 0) << drawn.err;
  const std::string run_page = slurp(dir / "run.html");
  EXPECT_EQ(count(run_page, "<rect class=\"agent\""), 2u);
  EXPECT_EQ(count(run_page, "<rect class=\"worker\""), 2u);
  EXPECT_GE(count(run_page, "<rect class=\"round"), 2u);
}

}  // namespace
}  // namespace dagsim::cli
