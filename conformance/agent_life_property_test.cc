// The simulated launcher under generated faults (issue 48 item 1): agents living
// core/elastic/agent_life.h, the code `dagsim launch` lives, over simulated worker processes that
// crash, exit non-zero, hang, start slowly, report UNHEALTHY or ignore SIGTERM, with late joins,
// SIGTERMs, agent deaths and a store host that dies (agent_life_harness.h). Every case must keep
// the agent's rules: no life hangs but on its own workers' hang, the close rule (judged from the
// events), PyTorch's restart count, groups stopped, a departure from the last round.
// RC_PARAMS="max_success=N" scales it; the bar is 1,000 cases.
#include <gtest/gtest.h>

#include <rapidcheck/gtest.h>
#include <sstream>

#include "conformance/agent_life_gen.h"

namespace dagsim::conformance {
namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

RC_GTEST_PROP(AgentLifeProperties, EveryLifeKeepsTheAgentsRules, ()) {
  const LifeCase c = gen_life_case();
  const LifeRun run = run_life_case(c);
  const std::vector<std::string> violations = judge_life(c, run);
  std::ostringstream text;
  for (const std::string& v : violations) text << "  " << v << "\n";
  RC_LOG() << c << text.str();
  RC_ASSERT(violations.empty());
  // What the cases reached, so a generator that stopped reaching them shows in the output.
  bool succeeded = false, failed_for_good = false, rendezvous_error = false, left = false;
  for (const AgentRun& a : run.agents) {
    if (!a.end) continue;
    left = left || a.end->left;
    if (!a.end->result) continue;
    succeeded = succeeded || a.end->result->outcome == elastic::AgentOutcome::succeeded;
    const bool group = a.end->result->error && a.end->result->error->code() == ErrorCode::worker_group_failed;
    failed_for_good = failed_for_good || (a.end->result->outcome == elastic::AgentOutcome::failed && group);
    rendezvous_error = rendezvous_error || (a.end->result->outcome == elastic::AgentOutcome::failed && !group);
  }
  RC_TAG(run.close_t ? "closed" : "not closed");
  RC_TAG(succeeded ? "a group succeeded" : "no group succeeded");
  if (failed_for_good) RC_TAG("restarts spent");
  if (rendezvous_error) RC_TAG("a rendezvous error");
  if (left) RC_TAG("a SIGTERM");
}

TEST(AgentLifeProperties, TheSameCaseRunsTheSameWay) {
  // Determinism of the harness itself: two runs of one case agree on every time.
  LifeCase c;
  c.min_nodes = 2;
  c.max_nodes = 3;
  for (int i = 0; i < 3; ++i) {
    AgentPlan a;
    a.max_restarts = 1;
    a.groups = {{.run_time = std::chrono::seconds(2 + i), .end = elastic::SimulatedWorker::End::exit, .exit_code = i == 1 ? 3 : 0}};
    c.agents.push_back(a);
  }
  const LifeRun a = run_life_case(c);
  const LifeRun b = run_life_case(c);
  ASSERT_EQ(a.agents.size(), b.agents.size());
  EXPECT_EQ(a.close_t, b.close_t);
  for (size_t i = 0; i < a.agents.size(); ++i) {
    EXPECT_EQ(a.agents[i].end_t, b.agents[i].end_t) << i;
    EXPECT_EQ(a.agents[i].events.size(), b.agents[i].events.size()) << i;
  }
  EXPECT_EQ(joined(judge_life(c, a)), "");
  ASSERT_TRUE(a.close_t.has_value()) << "the job succeeded after one counted restart: it is closed";
}

TEST(AgentLifeProperties, TheStoreHostLingersUntilItsRoundHasDeparted) {
  // Agent 1 serves the store; agent 2's workers run 20 s longer, so agent 1 waits for its
  // departure (and for no longer); with agent 2 killed instead, it waits the whole linger (60 s).
  LifeCase c;
  c.min_nodes = c.max_nodes = 2;
  c.exit_barrier_timeout = std::chrono::seconds(5);
  c.agents.resize(2);
  c.agents[0].serves_store = true;
  c.agents[0].groups = {{.run_time = std::chrono::seconds(1)}};
  c.agents[1].groups = {{.run_time = std::chrono::seconds(21)}};
  const LifeRun waited = run_life_case(c);
  EXPECT_EQ(joined(judge_life(c, waited)), "");
  ASSERT_TRUE(waited.agents[0].end && waited.agents[1].end_t);
  EXPECT_EQ(waited.agents[0].end->departed, 2);
  EXPECT_GE(*waited.agents[0].end_t, *waited.agents[1].end_t) << "the host left before the other departed";
  EXPECT_LT(*waited.agents[0].end_t - *waited.agents[1].end_t, std::chrono::seconds(1));

  c.agents[1].kill_at = std::chrono::seconds(3);  // before agent 1's close (its barrier times out at 6 s)
  const LifeRun alone = run_life_case(c);
  EXPECT_EQ(joined(judge_life(c, alone)), "");
  ASSERT_TRUE(alone.agents[0].end && alone.agents[0].end_t);
  EXPECT_EQ(alone.agents[0].end->departed, 1);
}

}  // namespace
}  // namespace dagsim::conformance
