// Tests of what the loader refuses or warns of beyond a file's syntax and ranges (issue 50): a
// fault trigger the scenario shows can never fire, node counts a rendezvous cannot reach, and
// unknown keys that name the key meant (a close spelling, torchrun's name, another table's key).
// Whole messages are pinned, as in scenario_loader_test.cc: the CLI prints them verbatim.
#include "scenarios/format/scenario_test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace dagsim::scenarios {
namespace {

// A trigger the scenario itself shows can never fire is refused, naming the fault, the trigger and
// why (docs/scenarios.md, "Faults on workload events"), instead of a run that ends "never fired".
TEST(ScenarioValidation, TriggersThatCanNeverFireAreRefused) {
  const std::string program = R"(name = "x"
tensors = [{ name = "a", shape = [2], init = "uniform" }]
program = [{ out = "b", call = "sum", args = ["a"] }]
backward = { roots = ["b"], calls = 2 }
[cluster]
nodes = 3
[[faults]]
kind = "kill"
node = "worker1"
)";
  // Only the driver (worker0) runs backward passes, two of them here.
  EXPECT_EQ(error_of(program + "when = { backward = \"worker2\" }\n"),
            "bad.toml:7: faults[0].when: the kill fault's when = { backward = \"worker2\", pass = 1 } can never fire: worker2 "
            "runs no backward pass: only the driver, worker0, does");
  EXPECT_EQ(error_of(program + "when = { backward = \"worker0\", pass = 3 }\n"),
            "bad.toml:7: faults[0].when: the kill fault's when = { backward = \"worker0\", pass = 3 } can never fire: the "
            "driver, worker0, runs 2 backward passes, so pass 3 never begins");
  EXPECT_EQ(parse_scenario(program + "when = { backward = \"worker0\", pass = 2 }\n", "ok.toml").faults.size(), 1u);
  // A delay past the run's end: the event comes at 0 at the earliest.
  EXPECT_EQ(error_of("max_virtual_time_ms = 1000\n" + program + "when = { backward = \"worker0\", after_ms = 1500 }\n"),
            "bad.toml:11: faults[0].when.after_ms: 1500 is after max_virtual_time_ms (1000): the fault would strike after "
            "the run ends, so it can never fire");

  // The elastic and rendezvous workloads: the store node runs no agent; steps end at `steps`.
  const std::string elastic = R"(name = "x"
[cluster]
nodes = 4
[elastic]
steps = 5
input = 2
layers = [{ out = 1 }]
optimizer = { kind = "sgd", lr = 0.1 }
[elastic.rendezvous]
min_nodes = 2
[[faults]]
kind = "kill"
node = "worker1"
)";
  EXPECT_EQ(error_of(elastic + "when = { member = \"worker0\" }\n"),
            "bad.toml:11: faults[0].when: the kill fault's when = { member = \"worker0\", round = 0 } can never fire: worker0 "
            "hosts the store and runs no agent, so it is never a member and runs no backward pass");
  EXPECT_EQ(error_of(elastic + "when = { backward = \"worker0\" }\n").substr(0, 103),
            "bad.toml:11: faults[0].when: the kill fault's when = { backward = \"worker0\", pass = 1 } can never fire:");
  EXPECT_EQ(error_of(elastic + "when = { step = 6 }\n"),
            "bad.toml:11: faults[0].when: the kill fault's when = { step = 6 } can never fire: the job has 5 steps "
            "([elastic] steps), so step 6 is never committed");
  EXPECT_EQ(parse_scenario(elastic + "when = { step = 5 }\n", "ok.toml").faults.size(), 1u);
  EXPECT_EQ(parse_scenario(elastic + "when = { member = \"worker2\", round = 9 }\n", "ok.toml").faults.size(), 1u);

  const std::string rendezvous = R"(name = "x"
[cluster]
nodes = 4
[rendezvous]
min_nodes = 2
store = "worker3"
[[faults]]
kind = "kill"
node = "worker1"
)";
  EXPECT_EQ(error_of(rendezvous + "when = { member = \"worker3\", round = 1 }\n"),
            "bad.toml:7: faults[0].when: the kill fault's when = { member = \"worker3\", round = 1 } can never fire: worker3 "
            "hosts the store and takes no part in the rendezvous, so it is never a member");
  EXPECT_EQ(parse_scenario(rendezvous + "when = { member = \"worker0\", round = 1 }\n", "ok.toml").faults.size(), 1u);
  EXPECT_EQ(error_of(R"(name = "x"
[cluster]
nodes = 4
[rendezvous]
min_nodes = 2
backend = "etcd"
[[faults]]
kind = "kill"
node = "worker1"
when = { store_round = 1 }
)"),
            "bad.toml:7: faults[0].when: the kill fault's when = { store_round = 1 } can never fire: with backend = \"etcd\" "
            "the rounds are etcd's, which no node reports (store_round is the built-in store's)");
}

// Unknown keys name the key meant: a close spelling, torchrun's name for it (whose seconds are
// milliseconds here), or the table that has it.
TEST(ScenarioValidation, UnknownKeysSuggestTheKeyMeant) {
  const std::string head = "name = \"x\"\n[cluster]\nnodes = 4\n[rendezvous]\nmin_nodes = 2\n";
  const auto problem = [](const std::string& message) { return message.substr(0, message.find("; allowed")); };
  EXPECT_EQ(problem(error_of(head + "last_call_timeout = 30\n")),
            "bad.toml:6: rendezvous.last_call_timeout: unknown key (did you mean last_call_ms? torchrun's "
            "last_call_timeout is in seconds, last_call_ms in milliseconds)");
  for (const auto& [torchrun, ours] : std::vector<std::pair<std::string, std::string>>{
           {"join_timeout", "join_timeout_ms"},
           {"timeout", "join_timeout_ms"},
           {"close_timeout", "close_timeout_ms"},
           {"keep_alive_interval", "keep_alive_interval_ms"},
           {"heartbeat_timeout", "heartbeat_timeout_ms"},
           {"monitor_interval", "monitor_interval_ms"},
           {"read_timeout", "store_timeout_ms"},
           {"rdzv_backend", "backend"},
           {"rdzv_endpoint", "etcd_endpoint"},
           {"rdzv_id", "run_id"},
           {"rdzv_conf_last_call_timeout", ""},
           {"keep_alive_max_attempts", "keep_alive_max_attempt"},
           {"keep_alive_max_atempt", "keep_alive_max_attempt"},
       }) {
    const std::string message = problem(error_of(head + torchrun + " = 1\n"));
    if (ours.empty()) {
      EXPECT_EQ(message, "bad.toml:6: rendezvous." + torchrun + ": unknown key") << torchrun;
    } else {
      EXPECT_TRUE(message.starts_with("bad.toml:6: rendezvous." + torchrun + ": unknown key (did you mean " + ours + "?"))
          << message;
    }
  }
  // A key of another table says which; one close to nothing suggests nothing.
  EXPECT_EQ(problem(error_of(head + "max_restarts = 1\n")),
            "bad.toml:6: rendezvous.max_restarts: unknown key (max_restarts is a key of [elastic] or [job])");
  EXPECT_EQ(problem(error_of(head + "nproc_per_node = 2\n")),
            "bad.toml:6: rendezvous.nproc_per_node: unknown key (torchrun's nproc_per_node has no scenario key: an elastic "
            "scenario's agent runs one worker, of its rank in the round (dagsim launch --nproc_per_node runs several))");
  EXPECT_EQ(problem(error_of(head + "zzz_quux = 2\n")), "bad.toml:6: rendezvous.zzz_quux: unknown key");
  EXPECT_EQ(problem(error_of("name = \"x\"\n[cluster]\nnnodes = 4\n[heartbeat]\n")),
            "bad.toml:3: cluster.nnodes: unknown key (did you mean nodes? nnodes is a key of [job], [rendezvous] or elastic.rendezvous)");
  // Variant tables too: a fault's keys depend on its kind.
  EXPECT_EQ(problem(error_of("name = \"x\"\n[heartbeat]\n[[faults]]\nkind = \"kill\"\nnode = \"worker1\"\nat_ms = 1\nrestart_at = 5\n")),
            "bad.toml:7: faults[0].restart_at: unknown key (did you mean restart_at_ms?)");
}

// torchrun's --nnodes counts agents and [cluster] nodes counts the store's node too: a maximum
// the cluster cannot reach is valid (rounds form at last call) but warned of, with the count to write.
TEST(ScenarioValidation, NodeCountsNameTheNodesToWrite) {
  const std::string head = "name = \"x\"\n[cluster]\nnodes = 6\n[rendezvous]\n";
  Scenario s = parse_scenario(head + "nnodes = \"4:6\"\n", "ok.toml");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0],
            "ok.toml:4: rendezvous.nnodes: [cluster] nodes = 6 leaves 5 agents (one node hosts the store), so a round never "
            "reaches max_nodes = 6; for nnodes = \"4:6\" write [cluster] nodes = 7");
  s = parse_scenario(head + "min_nodes = 2\nmax_nodes = 8\n", "ok.toml");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("rendezvous.max_nodes: [cluster] nodes = 6 leaves 5 agents"), std::string::npos);
  EXPECT_NE(s.warnings[0].find("for max_nodes = 8 write [cluster] nodes = 9"), std::string::npos);
  EXPECT_TRUE(parse_scenario(head + "nnodes = \"4:5\"\n", "ok.toml").warnings.empty());
  // What can never form is refused, with the count to write; MAX below MIN too.
  EXPECT_EQ(error_of(head + "nnodes = \"6:6\"\n"),
            "bad.toml:4: rendezvous.nnodes: 6 participants can never join: the cluster has 5 besides the store node, which "
            "takes a node of its own; write [cluster] nodes = 7 (or more) for 6 agents");
  EXPECT_EQ(error_of(head + "nnodes = \"5:4\"\n"), "bad.toml:5: rendezvous.nnodes: \"5:4\": MAX is below MIN");
  EXPECT_EQ(error_of(head + "min_nodes = 3\nmax_nodes = 2\n"), "bad.toml:4: rendezvous.max_nodes: 2 is below min_nodes (3)");
}

}  // namespace
}  // namespace dagsim::scenarios
