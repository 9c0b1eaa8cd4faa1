// Tests of the [job] reader (job_reader.h): a full job reads into the JobSpec the runner runs, and
// each thing a run could not do is refused with FILE:LINE: KEY and why. Each refusal below is
// shown failing by a file that differs from an accepted one only in the key it tests.
#include <gtest/gtest.h>

#include <string>

#include "scenarios/format/scenario_test_util.h"
#include "scenarios/workloads/job/job_spec.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::scenarios {
namespace {

using std::chrono::milliseconds;

// A job with every [job] key, one fault of each kind and one check of each kind.
const std::string kFull = R"(name = "ddp_worker_kill"
description = "a DDP job under faults"
[job]
command = ["ddp_job.py", "--steps", "30"]
module = false
no_python = false
python = "/usr/bin/python3"
agents = 2
nnodes = "1:3"
nproc_per_node = 2
launcher = "dagsim"
rdzv_backend = "c10d"
rdzv_conf = { last_call_timeout = "1", keep_alive_interval = 1, join_timeout = 60.5 }
max_restarts = 3
monitor_interval = 0.5
env = { OMP_NUM_THREADS = "1" }
timeout_ms = 120000
namespaces = true
directory = "."
rerendezvous_on_expiry = false
[[job.late_joins]]
agent = "agent2"
when = { round = 1, after_ms = 500 }
[[faults]]
kind = "kill"
worker = "agent1:1"
at_ms = 8000
[[faults]]
kind = "crash"
node = "agent2"
when = { store_key = "ckpt/*", after_ms = 10 }
restart_after_ms = 2000
[[faults]]
kind = "pause"
node = "agent0"
when = { output = "step [0-9]+", from = "agent1:0" }
resume_after_ms = 3000
[[faults]]
kind = "leave"
node = "agent1"
at_ms = 9000
[[faults]]
kind = "store_pause"
at_ms = 100
resume_after_ms = 5000
[[faults]]
kind = "store_restart"
at_ms = 200
restart_after_ms = 1000
keep_data = false
[[faults]]
kind = "partition"
groups = [["agent0"], ["agent1", "agent2"]]
at_ms = 300
heal_after_ms = 5000
[[checks]]
kind = "rendezvous_invariants"
l6 = "pytorch"
[[checks]]
kind = "reformed_within"
ms = 30000
[[checks]]
kind = "restarts"
max = 3
[[checks]]
kind = "no_orphans"
[[checks]]
kind = "command"
run = ["python3", "compare.py"]
reference_run = true
)";

// The header and a minimal [job], then `tail`.
std::string job(const std::string& job_keys, const std::string& tail = "") {
  return "name = \"j\"\n[job]\ncommand = [\"train.py\"]\n" + job_keys + tail;
}

TEST(JobReader, ReadsEveryKey) {
  const Scenario s = parse_scenario(kFull, "job.toml");
  ASSERT_EQ(s.workload.name(), "job");
  const JobSpec& spec = s.workload.as<JobSpec>();
  EXPECT_EQ(spec.command, (std::vector<std::string>{"ddp_job.py", "--steps", "30"}));
  EXPECT_EQ(spec.python, "/usr/bin/python3");
  EXPECT_EQ(spec.agents, 2u);
  EXPECT_EQ(spec.min_nodes, 1u);
  EXPECT_EQ(spec.max_nodes, 3u);
  EXPECT_EQ(spec.nproc_per_node, 2u);
  EXPECT_EQ(spec.launcher, JobLauncher::dagsim);
  EXPECT_EQ(spec.rdzv_backend, JobRdzvBackend::c10d);
  EXPECT_EQ(spec.rdzv_conf, (std::map<std::string, std::string>{
                                {"join_timeout", "60.5"}, {"keep_alive_interval", "1"}, {"last_call_timeout", "1"}}));
  EXPECT_EQ(spec.monitor_interval, milliseconds(500));
  EXPECT_EQ(spec.env.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(spec.timeout, milliseconds(120000));
  EXPECT_TRUE(spec.namespaces);
  EXPECT_EQ(spec.directory, ".");
  EXPECT_FALSE(spec.rerendezvous_on_expiry);
  ASSERT_EQ(spec.late_joins.size(), 1u);
  EXPECT_EQ(spec.late_joins[0].agent, 2u);
  EXPECT_EQ(spec.late_joins[0].when.kind, JobTrigger::Kind::round);
  EXPECT_EQ(spec.late_joins[0].when.after, milliseconds(500));
  EXPECT_EQ(spec.total_agents(), 3u);

  ASSERT_EQ(spec.faults.size(), 7u);
  EXPECT_EQ(spec.faults[0].target.kind, JobTarget::Kind::worker);
  EXPECT_EQ(spec.faults[0].target.agent, 1u);
  EXPECT_EQ(spec.faults[0].target.local_rank, 1u);
  EXPECT_EQ(spec.faults[0].when.at, milliseconds(8000));
  EXPECT_EQ(spec.faults[0].line, 24);
  EXPECT_EQ(spec.faults[1].kind, JobFault::Kind::crash);
  EXPECT_EQ(spec.faults[1].when.kind, JobTrigger::Kind::store_key);
  EXPECT_EQ(spec.faults[1].when.pattern, "ckpt/*");
  EXPECT_EQ(spec.faults[1].restart_after, milliseconds(2000));
  EXPECT_EQ(spec.faults[2].when.kind, JobTrigger::Kind::output);
  ASSERT_TRUE(spec.faults[2].when.from.has_value());
  EXPECT_EQ(spec.faults[2].when.from->kind, JobTarget::Kind::worker);
  EXPECT_EQ(spec.faults[2].duration, milliseconds(3000));
  EXPECT_EQ(spec.faults[3].kind, JobFault::Kind::leave);
  EXPECT_EQ(spec.faults[4].target.kind, JobTarget::Kind::store);
  EXPECT_EQ(spec.faults[5].kind, JobFault::Kind::store_restart);
  EXPECT_FALSE(spec.faults[5].keep_data);
  EXPECT_EQ(spec.faults[6].groups, (std::vector<std::vector<uint32_t>>{{0}, {1, 2}}));
  EXPECT_EQ(spec.faults[6].duration, milliseconds(5000));

  // The runner's other halves read the cluster and the end as for any workload.
  EXPECT_TRUE(s.faults.empty());
  EXPECT_EQ(s.cluster.nodes, 3u);
  EXPECT_EQ(s.cluster.node_name(2), "agent2");
  EXPECT_EQ(s.max_virtual_time, milliseconds(120000));

  ASSERT_EQ(s.checks.size(), 5u);
  EXPECT_EQ(s.checks[0].params, (nlohmann::json{{"l6", "pytorch"}}));
  EXPECT_EQ(s.checks[1].params, (nlohmann::json{{"ms", 30000}}));
  EXPECT_TRUE(s.checks[1].params["ms"].is_number_integer());
  EXPECT_EQ(s.checks[2].params, (nlohmann::json{{"max", 3}}));
  EXPECT_EQ(s.checks[3].params, nlohmann::json::object());
  EXPECT_EQ(s.checks[4].params, (nlohmann::json{{"run", {"python3", "compare.py"}}, {"reference_run", true}}));
  EXPECT_EQ(workload_type(s).summary(s), "job: 2 agents x 2 workers (+1 late) under dagsim launch, 7 faults");
  EXPECT_TRUE(s.warnings.empty());
}

TEST(JobReader, DefaultsAreTorchrunsWhereItHasThem) {
  const Scenario s = parse_scenario(job(""), "job.toml");
  const JobSpec& spec = s.workload.as<JobSpec>();
  EXPECT_EQ(spec.agents, 2u);
  EXPECT_EQ(spec.min_nodes, 2u);  // nnodes: the agents the job starts, up to every late joiner
  EXPECT_EQ(spec.max_nodes, 2u);
  EXPECT_EQ(spec.nproc_per_node, 1u);
  EXPECT_EQ(spec.max_restarts, 3u);
  EXPECT_EQ(spec.timeout, std::chrono::minutes(5));
  EXPECT_EQ(s.cluster.name_prefix, "agent");
  EXPECT_EQ(parse_scenario(job("nnodes = 3\nagents = 3\n"), "j.toml").workload.as<JobSpec>().min_nodes, 3u);
  EXPECT_EQ(parse_scenario(job("launcher = \"torchrun\"\nrdzv_backend = \"c10d\"\n"), "j.toml").workload.as<JobSpec>().launcher,
            JobLauncher::torchrun);
  EXPECT_EQ(parse_scenario(job("rdzv_backend = \"etcd\"\n"), "j.toml").workload.as<JobSpec>().rdzv_backend, JobRdzvBackend::etcd);
  // torchrun on etcd: its etcd-v2 backend over the v2 API the run's etcd serves (python-etcd).
  EXPECT_EQ(parse_scenario(job("launcher = \"torchrun\"\nrdzv_backend = \"etcd\"\n"), "j.toml").workload.as<JobSpec>().rdzv_backend,
            JobRdzvBackend::etcd);
}

TEST(JobReader, RefusesWhatItCannotRun) {
  // [job] itself.
  EXPECT_EQ(error_of("name = \"j\"\n[job]\nagents = 2\n"), "bad.toml:2: job.command: required");
  EXPECT_EQ(error_of(job("comand = 1\n")),
            "bad.toml:4: job.comand: unknown key (did you mean command?); allowed keys in [job]: command, module, no_python, "
            "python, agents, nnodes, nproc_per_node, launcher, rdzv_backend, rdzv_conf, max_restarts, monitor_interval, env, "
            "timeout_ms, namespaces, directory, rerendezvous_on_expiry, late_joins");
  EXPECT_EQ(error_of("name = \"j\"\n[job]\ncommand = []\n"),
            "bad.toml:3: job.command: must not be empty: it names the program to run first");
  EXPECT_EQ(error_of("name = \"j\"\n[job]\ncommand = [\"a\", \"\"]\n"), "bad.toml:3: job.command[1]: must not be empty");
  EXPECT_EQ(error_of(job("agents = 65\n")), "bad.toml:4: job.agents: 65 is out of range [1, 64]");
  EXPECT_EQ(error_of(job("nproc_per_node = 0\n")), "bad.toml:4: job.nproc_per_node: 0 is out of range [1, 64]");
  EXPECT_EQ(error_of(job("module = true\nno_python = true\n")),
            "bad.toml:5: job.no_python: module and no_python exclude each other (as in torchrun)");
  EXPECT_EQ(error_of(job("rdzv_backend = \"dagsim\"\nlauncher = \"torchrun\"\n")),
            "bad.toml:4: job.rdzv_backend: \"dagsim\" is dagsim launch's own backend: with launcher = \"torchrun\" use "
            "\"c10d\"");
  EXPECT_EQ(error_of(job("rdzv_backend = \"static\"\n")),
            "bad.toml:4: job.rdzv_backend: unknown value \"static\"; allowed: c10d, etcd, dagsim");
  EXPECT_EQ(error_of(job("rdzv_conf = { a = \"1,2\" }\n")),
            "bad.toml:4: job.rdzv_conf.a: \"1,2\" contains ',' or '=', which --rdzv_conf k=v,... cannot carry");
  EXPECT_EQ(error_of(job("env = { 1X = \"1\" }\n")),
            "bad.toml:4: job.env.1X: a variable's name is letters, digits and _, not starting with a digit");
  EXPECT_EQ(error_of(job("env = { X = [1] }\n")), "bad.toml:4: job.env.X: expected a string, a number or a boolean");
  EXPECT_EQ(error_of(job("monitor_interval = 0\n")), "bad.toml:4: job.monitor_interval: 0 is out of range (0, 3600]");
  EXPECT_EQ(error_of(job("nnodes = \"3:2\"\nagents = 3\n")), "bad.toml:4: job.nnodes: MAX (2) is less than MIN (3)");
  EXPECT_EQ(error_of(job("nnodes = \"0:2\"\n")), "bad.toml:4: job.nnodes: MIN must be at least 1");
  EXPECT_EQ(error_of(job("nnodes = \"x\"\n")), "bad.toml:4: job.nnodes: \"x\" is not \"MIN:MAX\" or \"N\" (whole numbers)");
  EXPECT_EQ(error_of(job("nnodes = \"1:65\"\n")), "bad.toml:4: job.nnodes: MAX must be at most 64");
}

TEST(JobReader, WarnsWhenNoRoundCanFormFromTheAgentsAtStart) {
  EXPECT_EQ(parse_scenario(job("nnodes = \"3:3\"\n"), "w.toml").warnings,
            std::vector<std::string>{"w.toml:4: job.nnodes: MIN is 3 but the job has only 2 agents (late joiners included): "
                                     "no round can ever form"});
  EXPECT_EQ(parse_scenario(job("nnodes = \"3:3\"\n", "[[job.late_joins]]\nagent = \"agent2\"\nat_ms = 10\n"), "w.toml").warnings,
            std::vector<std::string>{"w.toml:4: job.nnodes: MIN is 3 but [job] starts 2 agents: no round forms until late "
                                     "joiners come"});
}

TEST(JobReader, RefusesSimulatedSectionsByName) {
  EXPECT_EQ(error_of(job("", "[cluster]\nnodes = 2\n")),
            "bad.toml:4: cluster: does not apply to a [job] scenario: its agents are [job] agents (and late joins), named "
            "agent0 ..");
  EXPECT_EQ(error_of("max_virtual_time_ms = 5\n" + job("")),
            "bad.toml:1: max_virtual_time_ms: does not apply to a [job] scenario: a job runs in wall time; [job] timeout_ms "
            "says when the run stops it");
  EXPECT_EQ(error_of(job("", "[network]\n")).substr(0, 56), "bad.toml:4: network: does not apply to a [job] scenario:");
  EXPECT_EQ(error_of(job("", "[devices]\ngpus = 1\n")).substr(0, 56), "bad.toml:4: devices: does not apply to a [job] scenario:");
}

TEST(JobReader, LateJoinsFollowTheAgentsInOrder) {
  EXPECT_EQ(error_of(job("", "[[job.late_joins]]\nagent = \"agent3\"\nat_ms = 10\n")),
            "bad.toml:5: job.late_joins[0].agent: late joiner 0 must be agent2 (late joiners follow the 2 agents [job] "
            "starts, in order, each once)");
  EXPECT_EQ(error_of(job("", "[[job.late_joins]]\nagent = \"agent2\"\n")),
            "bad.toml:4: job.late_joins[0].at_ms: required: a late join needs at_ms or when = { ... }");
  EXPECT_EQ(error_of(job("agents = 64\n", "[[job.late_joins]]\nagent = \"agent64\"\nat_ms = 1\n")),
            "bad.toml:5: job.late_joins: 64 agents and 1 late joiners; at most 64 in all");
}

const std::string kFault = "[[faults]]\n";  // at line 4 of job("")

TEST(JobReader, FaultsNameAgentsWorkersAndTheStoreAsTheirKindTakes) {
  EXPECT_EQ(error_of(job("", kFault + "kind = \"kill\"\nnode = \"agent2\"\nat_ms = 1\n")),
            "bad.toml:6: faults[0].node: unknown agent \"agent2\"; the agents are agent0 .. agent1");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"kill\"\nnode = \"worker1\"\nat_ms = 1\n")),
            "bad.toml:6: faults[0].node: unknown agent \"worker1\"; the agents are agent0 .. agent1");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"kill\"\nworker = \"agent1:2\"\nat_ms = 1\n")),
            "bad.toml:6: faults[0].worker: \"agent1:2\": the local rank must be 0 .. 0 ([job] nproc_per_node = 1)");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"kill\"\nworker = \"agent1\"\nat_ms = 1\n")),
            "bad.toml:6: faults[0].worker: \"agent1\" names no worker; write \"agentK:LOCAL_RANK\" (\"agent1:0\")");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"kill\"\nat_ms = 1\n")),
            "bad.toml:4: faults[0].node: required for kind \"kill\": node = \"agent1\" or worker = \"agent1:0\"");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"crash\"\nworker = \"agent1:0\"\nat_ms = 1\nrestart_after_ms = 1\n")),
            "bad.toml:6: faults[0].worker: does not apply to kind \"crash\" in a [job] scenario; allowed: kind, node, at_ms, "
            "when, restart_after_ms");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"crash\"\nnode = \"agent1\"\nat_ms = 1\n")),
            "bad.toml:4: faults[0].restart_after_ms: required for kind \"crash\"");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"store_pause\"\nnode = \"agent1\"\nat_ms = 1\n")),
            "bad.toml:6: faults[0].node: does not apply to kind \"store_pause\" in a [job] scenario; allowed: kind, at_ms, "
            "when, resume_after_ms");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"store_pause\"\nat_ms = 1\n")),
            "bad.toml:4: faults[0].resume_after_ms: required for kind \"store_pause\"");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"restart\"\nat_ms = 1\n")),
            "bad.toml:5: faults[0].kind: unknown value \"restart\"; allowed: kill, crash, pause, leave, store_pause, "
            "store_restart, partition, store_delay, store_drop, store_reset");
  EXPECT_EQ(error_of(job("", kFault + "kind = \"leave\"\nnode = \"agent1\"\nat_ms = 300000\n")),
            "bad.toml:7: faults[0].at_ms: is not before [job] timeout_ms (300000), when the run stops everything");
  std::string many;
  for (int i = 0; i < 257; ++i) many += kFault + "kind = \"store_pause\"\nat_ms = 1\nresume_after_ms = 1\n";
  EXPECT_EQ(error_of(job("", many)), "bad.toml:4: faults: 257 faults; at most 256");
}

TEST(JobReader, TheStoresFaultLayerTakesOpsProbabilityAndDelay) {
  const std::string delay = kFault + "kind = \"store_delay\"\nat_ms = 1\nheal_after_ms = 5000\nops = [\"compare_set\", \"get\"]\n" +
                            "probability = 0.25\ndelay_ms = 300\n";
  const Scenario s = parse_scenario(job("", delay + kFault + "kind = \"store_reset\"\nat_ms = 2\nheal_after_ms = 10\n"), "job.toml");
  const JobSpec& spec = s.workload.as<JobSpec>();
  ASSERT_EQ(spec.faults.size(), 2u);
  EXPECT_EQ(spec.faults[0].kind, JobFault::Kind::store_delay);
  EXPECT_EQ(spec.faults[0].target.kind, JobTarget::Kind::store);
  EXPECT_EQ(spec.faults[0].store_ops, (std::vector<std::string>{"compare_set", "get"}));
  EXPECT_EQ(spec.faults[0].probability, 0.25);
  EXPECT_EQ(spec.faults[0].delay, milliseconds(300));
  EXPECT_EQ(spec.faults[0].duration, milliseconds(5000));
  EXPECT_EQ(spec.faults[1].kind, JobFault::Kind::store_reset);
  EXPECT_TRUE(spec.faults[1].store_ops.empty());  // every query
  EXPECT_EQ(spec.faults[1].probability, 1.0);
  EXPECT_EQ(spec.faults[1].duration, milliseconds(10));

  const std::string drop = kFault + "kind = \"store_drop\"\nat_ms = 1\n";  // heal_after_ms at line 7, what follows at 8
  EXPECT_EQ(error_of(job("", drop)), "bad.toml:4: faults[0].heal_after_ms: required for kind \"store_drop\"");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 0\n")), "bad.toml:7: faults[0].heal_after_ms: 0 is out of range (0, 1000000000]");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\ndelay_ms = 5\n")),
            "bad.toml:8: faults[0].delay_ms: does not apply to kind \"store_drop\" in a [job] scenario; allowed: kind, at_ms, "
            "when, heal_after_ms, ops, probability");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nnode = \"agent1\"\n")),
            "bad.toml:8: faults[0].node: does not apply to kind \"store_drop\" in a [job] scenario; allowed: kind, at_ms, "
            "when, heal_after_ms, ops, probability");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nops = []\n")),
            "bad.toml:8: faults[0].ops: must not be empty: leave ops out for every query");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nops = [\"COMPARE_SET\"]\n")),
            "bad.toml:8: faults[0].ops[0]: unknown value \"COMPARE_SET\"; allowed: set, compare_set, get, add, check, wait, "
            "get_num_keys, watch_key, delete_key");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nops = [\"get\", \"get\"]\n")),
            "bad.toml:8: faults[0].ops[1]: \"get\" is named more than once");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nops = \"get\"\n")), "bad.toml:8: faults[0].ops: expected an array, got a string");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nprobability = 1.5\n")),
            "bad.toml:8: faults[0].probability: 1.5 is out of range [0, 1]");
  EXPECT_EQ(error_of(job("", drop + "heal_after_ms = 5\nprobability = nan\n")),
            "bad.toml:8: faults[0].probability: nan is out of range [0, 1]");
  const std::string slow = kFault + "kind = \"store_delay\"\nat_ms = 1\nheal_after_ms = 5\n";  // delay_ms at line 8
  EXPECT_EQ(error_of(job("", slow)), "bad.toml:4: faults[0].delay_ms: required for kind \"store_delay\"");
  EXPECT_EQ(error_of(job("", slow + "delay_ms = 0\n")), "bad.toml:8: faults[0].delay_ms: 0 is out of range [1, 3600000]");
  EXPECT_EQ(error_of(job("", slow + "delay_ms = 3600001\n")), "bad.toml:8: faults[0].delay_ms: 3600001 is out of range [1, 3600000]");
  EXPECT_EQ(error_of(job("", slow + "delay_ms = 2.5\n")), "bad.toml:8: faults[0].delay_ms: expected an integer, got a float");
  EXPECT_EQ(error_of(job("rdzv_backend = \"etcd\"\n", kFault + "kind = \"store_reset\"\nat_ms = 1\nheal_after_ms = 5\n")),
            "bad.toml:6: faults[0].kind: the store's fault layer is dagsim store's: with rdzv_backend = \"etcd\" use store_pause "
            "or store_restart");
}

TEST(JobReader, APartitionNeedsNamespaces) {
  const std::string partition = kFault + "kind = \"partition\"\ngroups = [[\"agent0\"], [\"agent1\"]]\nat_ms = 1\nheal_after_ms = 5\n";
  EXPECT_EQ(error_of(job("", partition)),
            "bad.toml:6: faults[0].groups: a partition needs [job] namespaces = true (each agent in a network namespace "
            "of its own, which the run builds as root); without them the agents share one network and cannot be cut apart");
  EXPECT_EQ(parse_scenario(job("namespaces = true\n", partition), "ok.toml").workload.as<JobSpec>().faults.size(), 1u);
  EXPECT_EQ(error_of(job("namespaces = true\n", kFault + "kind = \"partition\"\ngroups = [[\"agent0\"], [\"agent0\"]]\nat_ms = 1\nheal_after_ms = 5\n")),
            "bad.toml:7: faults[0].groups[1][0]: agent0 is in more than one place in groups");
  EXPECT_EQ(error_of(job("namespaces = true\n", kFault + "kind = \"partition\"\ngroups = [[\"agent0\", \"agent1\"]]\nat_ms = 1\nheal_after_ms = 5\n")),
            "bad.toml:7: faults[0].groups: needs at least two groups to cut apart");
  EXPECT_EQ(error_of(job("", "[random_faults]\npartition_per_min = 1\n")),
            "bad.toml:5: random_faults.partition_per_min: a partition needs [job] namespaces = true (each agent in a network "
            "namespace of its own)");
  // [random_faults] names the job's agents.
  EXPECT_EQ(parse_scenario(job("", "[random_faults]\nkill_per_min = 1\nexclude = [\"agent0\"]\n"), "ok.toml").random_faults.exclude,
            std::vector<uint32_t>{0});
}

TEST(JobReader, TriggersAreBoundedAndCompile) {
  const std::string kill = kFault + "kind = \"kill\"\nnode = \"agent1\"\n";
  EXPECT_EQ(error_of(job("", kill)), "bad.toml:4: faults[0].at_ms: required: a fault needs at_ms or when = { ... }");
  EXPECT_EQ(error_of(job("", kill + "at_ms = 1\nwhen = { round = 1 }\n")),
            "bad.toml:8: faults[0].when: a fault takes at_ms or when, not both");
  EXPECT_EQ(error_of(job("", kill + "when = { after_ms = 1 }\n")),
            "bad.toml:7: faults[0].when: names no event: give round = K, store_key = \"GLOB\" or output = \"REGEX\"");
  EXPECT_EQ(error_of(job("", kill + "when = { round = 1, output = \"x\" }\n")),
            "bad.toml:7: faults[0].when: names more than one event: give one of round, store_key and output");
  EXPECT_EQ(error_of(job("", kill + "when = { output = \"(\" }\n")).substr(0, 63),
            "bad.toml:7: faults[0].when.output: \"(\" is no ECMAScript regex: ");
  EXPECT_EQ(error_of(job("", kill + "when = { output = \"" + std::string(1025, 'a') + "\" }\n")),
            "bad.toml:7: faults[0].when.output: 1025 bytes; at most 1024");
  EXPECT_EQ(error_of(job("", kill + "when = { store_key = \"" + std::string(17, '*') + "\" }\n")),
            "bad.toml:7: faults[0].when.store_key: has more than 16 '*'");
  EXPECT_EQ(error_of(job("", kill + "when = { round = 1, from = \"agent0\" }\n")),
            "bad.toml:7: faults[0].when.from: applies only to when = { output = ... }");
  EXPECT_EQ(error_of(job("", kill + "when = { output = \"x\", from = \"agent0:1\" }\n")),
            "bad.toml:7: faults[0].when.from: \"agent0:1\": the local rank must be 0 .. 0 ([job] nproc_per_node = 1)");
  EXPECT_EQ(error_of(job("", kill + "when = { store_round = 1 }\n")),
            "bad.toml:7: faults[0].when.store_round: unknown key (store_round is a key of when); allowed keys in a job's when: "
            "round, store_key, output, from, after_ms");
  // A fault on a late joiner, and a trigger on its output, are fine before it starts.
  EXPECT_EQ(parse_scenario(job("", "[[job.late_joins]]\nagent = \"agent2\"\nat_ms = 10\n" + kFault +
                                       "kind = \"kill\"\nnode = \"agent2\"\nwhen = { output = \"x\", from = \"agent2\" }\n"),
                           "ok.toml")
                .workload.as<JobSpec>()
                .faults.size(),
            1u);
}

TEST(JobReader, ChecksTakeTheirOwnKeysTyped) {
  const std::string check = "[[checks]]\n";  // at line 4 of job("")
  EXPECT_EQ(error_of(job("", check + "kind = \"reformed_within\"\n")), "bad.toml:4: checks[0].ms: required for kind \"reformed_within\"");
  EXPECT_EQ(error_of(job("", check + "kind = \"reformed_within\"\nms = 0\n")), "bad.toml:6: checks[0].ms: 0 is out of range [1, 1000000000]");
  EXPECT_EQ(error_of(job("", check + "kind = \"reformed_within\"\nms = \"5\"\n")),
            "bad.toml:6: checks[0].ms: expected an integer, got a string");
  EXPECT_EQ(error_of(job("", check + "kind = \"no_orphans\"\nms = 5\n")), "bad.toml:6: checks[0].ms: does not apply to kind \"no_orphans\"");
  EXPECT_EQ(error_of(job("", check + "kind = \"restarts\"\n")), "bad.toml:4: checks[0].max: required for kind \"restarts\": max = N, min = N or both");
  EXPECT_EQ(error_of(job("", check + "kind = \"restarts\"\nmin = 3\nmax = 2\n")), "bad.toml:6: checks[0].min: is more than max");
  EXPECT_EQ(error_of(job("", check + "kind = \"rendezvous_invariants\"\nl6 = \"torch\"\n")),
            "bad.toml:6: checks[0].l6: unknown value \"torch\"; allowed: dagsim, pytorch");
  EXPECT_EQ(error_of(job("", check + "kind = \"command\"\n")), "bad.toml:4: checks[0].run: required for kind \"command\"");
  EXPECT_EQ(error_of(job("", check + "kind = \"command\"\nrun = []\n")),
            "bad.toml:6: checks[0].run: must not be empty: it names the program to run first");
  EXPECT_EQ(error_of(job("", check + "kind = \"command\"\nrun = [\"x\"]\nreference_run = 1\n")),
            "bad.toml:7: checks[0].reference_run: expected a boolean, got an integer");
  EXPECT_EQ(error_of(job("", check + "kind = \"reformed_within\"\nmss = 5\n")).substr(0, 58),
            "bad.toml:6: checks[0].mss: unknown key (did you mean ms?);");
  // job_succeeded: a message names the expected failure, and only that.
  EXPECT_EQ(error_of(job("", check + "kind = \"job_succeeded\"\nexpect_failure = true\nmessage = \"\"\n")),
            "bad.toml:7: checks[0].message: must not be empty");
  EXPECT_EQ(error_of(job("", check + "kind = \"job_succeeded\"\nexpect_failure = \"yes\"\nmessage = \"x\"\n")),
            "bad.toml:6: checks[0].expect_failure: expected a boolean, got a string");
  const Scenario ok = parse_scenario(job("", check + "kind = \"job_succeeded\"\nexpect_failure = true\nmessage = \"lost step\"\n"), "ok.toml");
  EXPECT_EQ(ok.checks[0].message, "lost step");
  EXPECT_EQ(ok.checks[0].params, (nlohmann::json{{"expect_failure", true}}));
  // Another workload's check kinds do not take a job's keys.
  EXPECT_EQ(error_of("name = \"h\"\n[heartbeat]\nduration_ms = 100\n[[checks]]\nkind = \"no_false_suspicion\"\nms = 5\n"),
            "bad.toml:6: checks[0].ms: does not apply to kind \"no_false_suspicion\"");
}

TEST(JobReader, TheNodeSideRefusesToRun) {
  const Scenario s = parse_scenario(job(""), "job.toml");
  const auto workload = workload_type(s).make(s, 1);
  ASSERT_NE(workload, nullptr);
  EXPECT_EQ(workload->end_time(), std::nullopt);
}

}  // namespace
}  // namespace dagsim::scenarios
