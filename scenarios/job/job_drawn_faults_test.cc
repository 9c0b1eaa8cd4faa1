// [random_faults] for a job (job_drawn_faults.cc): the draw is a function of the seed, lands only
// on agents that are neither excluded nor struck by a declared fault, and maps each drawn kind to
// a fault on real processes.
#include <gtest/gtest.h>

#include <set>

#include "scenarios/format/scenario_loader.h"
#include "scenarios/job/job_runner.h"

namespace dagsim::scenarios::job {
namespace {

using namespace std::chrono_literals;

constexpr const char* kJob = R"(
name = "drawn"
[job]
command = ["w.sh"]
no_python = true
agents = 4
nnodes = "2:4"
timeout_ms = 60000
rdzv_conf = { keep_alive_interval = "1" }
[[faults]]
kind = "kill"
node = "agent3"
at_ms = 500
[random_faults]
crash_per_min = 40
pause_per_min = 40
start_ms = 1000
end_ms = 30000
restart_after_ms = 2000
resume_after_ms = 700
exclude = ["agent0"]
max_concurrent = 2  # agent3, killed for good, counts as one faulted agent throughout
)";

std::string describe(const std::vector<JobFault>& faults) {
  std::string out;
  for (const JobFault& f : faults) {
    out += std::to_string(static_cast<int>(f.kind)) + "@" + std::to_string(f.when.at.count()) + ":" +
           std::to_string(f.target.agent) + ";";
  }
  return out;
}

TEST(JobDrawnFaults, TheSeedAloneFixesTheDraw) {
  const Scenario s = parse_scenario(kJob, "drawn.toml");
  const std::vector<JobFault> a = drawn_faults(s, 7);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(describe(a), describe(drawn_faults(s, 7)));
  // Another seed, another schedule (for these rates over 29 s, equal schedules are vanishingly rare).
  EXPECT_NE(describe(a), describe(drawn_faults(s, 8)));
}

TEST(JobDrawnFaults, DrawnFaultsAvoidExcludedAndDeclaredAgentsAndEndAsConfigured) {
  const Scenario s = parse_scenario(kJob, "drawn.toml");
  std::set<uint32_t> hit;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    for (const JobFault& f : drawn_faults(s, seed)) {
      hit.insert(f.target.agent);
      EXPECT_EQ(f.line, 0) << "a drawn fault has no line of its own";
      EXPECT_EQ(f.when.kind, JobTrigger::Kind::at);
      EXPECT_GE(f.when.at, 1000ms);
      EXPECT_LT(f.when.at, 30000ms);
      if (f.kind == JobFault::Kind::crash) {
        ASSERT_TRUE(f.restart_after.has_value());
        EXPECT_EQ(*f.restart_after, 2000ms);
      } else {
        ASSERT_EQ(f.kind, JobFault::Kind::pause) << "only crashes and pauses were asked for";
        ASSERT_TRUE(f.duration.has_value());
        EXPECT_EQ(*f.duration, 700ms);
      }
    }
  }
  EXPECT_EQ(hit.count(0), 0u) << "agent0 is excluded";
  EXPECT_EQ(hit.count(3), 0u) << "agent3 is killed by a declared fault for the rest of the run";
  EXPECT_EQ(hit, (std::set<uint32_t>{1, 2}));
}

TEST(JobDrawnFaults, NoRatesNoDraw) {
  Scenario s = parse_scenario(kJob, "drawn.toml");
  s.random_faults = RandomFaultSpec{};
  EXPECT_TRUE(drawn_faults(s, 7).empty());
}

}  // namespace
}  // namespace dagsim::scenarios::job
