// Tests of the scenario loader: a full scenario round-trips every field, absent tables give the
// documented defaults, and each class of bad input fails with "FILE:LINE: KEY: problem" naming
// the right line and key (the CLI prints these verbatim, so the tests pin whole messages).
#include "scenarios/format/scenario_test_util.h"
#include "scenarios/format/scenario_loader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/base/error.h"

namespace dagsim::scenarios {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using Kind = FaultSpec::Kind;
using Dist = runtime::LatencyModel::Dist;


constexpr std::string_view kFull = R"(name = "full"
description = "every key"
schedule = "random"
max_virtual_time_ms = 30000

[network]
latency = { dist = "normal", mean_us = 200, stddev_us = 50, max_us = 400, min_us = 100 }
bandwidth_mbps = 100
connection_failure_rate = 0.01
connection_timeout_ms = 2500.5

[[network.links]]
from = "node1"
to = "node2"
latency = { dist = "uniform", min_us = 50, max_us = 500 }
bandwidth_mbps = 8

[[network.links]]
from = "node0"
to = "node3"
latency = { dist = "exponential", mean_us = 300, max_us = 2000, min_us = 10 }
bidirectional = false

# After [network] on purpose: node names there resolve against this table all the same.
[cluster]
nodes = 4
name_prefix = "node"
clock_skew_max_ms = 1.5
clock_drift_max_ppm = 200

[[faults]]
at_ms = 100
kind = "kill"
node = "node1"
restart_at_ms = 2000

[[faults]]
at_ms = 150
kind = "crash"
node = "node2"

[[faults]]
at_ms = 200
kind = "pause"
node = "node3"
resume_at_ms = 300.25

[[faults]]
at_ms = 700
kind = "partition"
from = ["node3"]
to = ["node0", "node1"]

[[faults]]
at_ms = 600
kind = "partition"
groups = [["node0", "node1"], ["node2"]]
heal_at_ms = 900

[[faults]]
at_ms = 400
kind = "resume"
node = "node3"

[[faults]]
at_ms = 500
kind = "restart"
node = "node2"

[[faults]]
at_ms = 1000
kind = "heal"

[random_faults]
kill_per_min = 0.5
crash_per_min = 1
pause_per_min = 2.5
partition_per_min = 0.25
start_ms = 1000
end_ms = 20000
restart_after_ms = 1500
resume_after_ms = 250
heal_after_ms = 750
max_concurrent = 2
exclude = ["node0"]

[heartbeat]
monitor = "node3"
interval_ms = 50
max_attempts = 4
duration_ms = 25000
message_bytes = 128

[[checks]]
kind = "detects_failures"

[[checks]]
kind = "no_false_suspicion"

[[checks]]
kind = "partition_detected_after_start"

[[checks]]
kind = "declared_dead"
nodes = ["node1", "node2"]

[[checks]]
kind = "never_declared_dead"
nodes = ["node0"]
)";

TEST(ScenarioLoader, FullScenarioRoundTripsEveryField) {
  const Scenario s = parse_scenario(kFull, "full.toml");
  EXPECT_EQ(s.file, "full.toml");
  EXPECT_EQ(s.name, "full");
  EXPECT_EQ(s.description, "every key");
  EXPECT_EQ(s.schedule, Schedule::random);
  EXPECT_EQ(s.max_virtual_time, milliseconds(30000));

  EXPECT_EQ(s.cluster.nodes, 4u);
  EXPECT_EQ(s.cluster.name_prefix, "node");
  EXPECT_EQ(s.cluster.clock_skew_max, microseconds(1500));
  EXPECT_EQ(s.cluster.clock_drift_max_ppm, 200);

  const runtime::NetworkModel& net = s.network;
  EXPECT_EQ(net.latency.dist, Dist::normal);
  EXPECT_EQ(net.latency.mean, microseconds(200));
  EXPECT_EQ(net.latency.stddev, microseconds(50));
  EXPECT_EQ(net.latency.min, microseconds(100));
  EXPECT_EQ(net.latency.max, microseconds(400));
  EXPECT_DOUBLE_EQ(net.bandwidth_bytes_per_s, 12.5e6);
  EXPECT_DOUBLE_EQ(net.connection_failure_rate, 0.01);
  EXPECT_EQ(net.connection_timeout, microseconds(2'500'500));
  // The bidirectional link expands to both directions; the one-way link to one.
  ASSERT_EQ(net.links.size(), 3u);
  EXPECT_EQ(net.links[0].from, 1);
  EXPECT_EQ(net.links[0].to, 2);
  EXPECT_EQ(net.links[1].from, 2);
  EXPECT_EQ(net.links[1].to, 1);
  for (int i : {0, 1}) {
    EXPECT_EQ(net.links[i].latency.dist, Dist::uniform);
    EXPECT_EQ(net.links[i].latency.min, microseconds(50));
    EXPECT_EQ(net.links[i].latency.max, microseconds(500));
    EXPECT_EQ(net.links[i].latency.mean, microseconds(275));
    EXPECT_EQ(net.links[i].bandwidth_bytes_per_s, 1e6);
  }
  EXPECT_EQ(net.links[2].from, 0);
  EXPECT_EQ(net.links[2].to, 3);
  EXPECT_EQ(net.links[2].latency.dist, Dist::exponential);
  EXPECT_EQ(net.links[2].latency.mean, microseconds(300));
  EXPECT_EQ(net.links[2].latency.min, microseconds(10));
  EXPECT_EQ(net.links[2].latency.max, microseconds(2000));
  EXPECT_EQ(net.links[2].bandwidth_bytes_per_s, std::nullopt);

  // Faults stay in file order (the runner sorts them stably by time).
  ASSERT_EQ(s.faults.size(), 8u);
  const std::vector<FaultSpec>& f = s.faults;
  EXPECT_EQ(f[0].kind, Kind::kill);
  EXPECT_EQ(f[0].at, milliseconds(100));
  EXPECT_EQ(f[0].node, 1u);
  EXPECT_EQ(f[0].until, milliseconds(2000));
  EXPECT_EQ(f[0].line, 31);
  EXPECT_EQ(f[1].kind, Kind::crash);
  EXPECT_EQ(f[1].node, 2u);
  EXPECT_EQ(f[1].until, std::nullopt);
  EXPECT_EQ(f[2].kind, Kind::pause);
  EXPECT_EQ(f[2].node, 3u);
  EXPECT_EQ(f[2].until, microseconds(300'250));
  EXPECT_EQ(f[3].kind, Kind::partition);
  EXPECT_EQ(f[3].at, milliseconds(700));
  EXPECT_TRUE(f[3].groups.empty());
  EXPECT_EQ(f[3].from, (std::vector<uint32_t>{3}));
  EXPECT_EQ(f[3].to, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(f[3].until, std::nullopt);
  EXPECT_EQ(f[4].kind, Kind::partition);
  EXPECT_EQ(f[4].groups, (std::vector<std::vector<uint32_t>>{{0, 1}, {2}}));
  EXPECT_TRUE(f[4].from.empty());
  EXPECT_EQ(f[4].until, milliseconds(900));
  EXPECT_EQ(f[5].kind, Kind::resume);
  EXPECT_EQ(f[5].node, 3u);
  EXPECT_EQ(f[6].kind, Kind::restart);
  EXPECT_EQ(f[6].node, 2u);
  EXPECT_EQ(f[7].kind, Kind::heal);
  EXPECT_EQ(f[7].at, milliseconds(1000));
  EXPECT_EQ(f[7].line, 70);

  const RandomFaultSpec& r = s.random_faults;
  EXPECT_DOUBLE_EQ(r.kill_per_min, 0.5);
  EXPECT_DOUBLE_EQ(r.crash_per_min, 1);
  EXPECT_DOUBLE_EQ(r.pause_per_min, 2.5);
  EXPECT_DOUBLE_EQ(r.partition_per_min, 0.25);
  EXPECT_EQ(r.start, milliseconds(1000));
  EXPECT_EQ(r.end, milliseconds(20000));
  EXPECT_EQ(r.restart_after, milliseconds(1500));
  EXPECT_EQ(r.resume_after, milliseconds(250));
  EXPECT_EQ(r.heal_after, milliseconds(750));
  EXPECT_EQ(r.max_concurrent, 2u);
  EXPECT_EQ(r.exclude, (std::vector<uint32_t>{0}));

  ASSERT_TRUE((s.workload.name() == "heartbeat"));
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().monitor, 3u);
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().interval, milliseconds(50));
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().max_attempts, 4u);
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().duration, milliseconds(25000));
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().message_bytes, 128u);

  ASSERT_EQ(s.checks.size(), 5u);
  EXPECT_EQ(s.checks[0].kind, "detects_failures");
  EXPECT_EQ(s.checks[1].kind, "no_false_suspicion");
  EXPECT_EQ(s.checks[2].kind, "partition_detected_after_start");
  EXPECT_EQ(s.checks[3].kind, "declared_dead");
  EXPECT_EQ(s.checks[3].nodes, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(s.checks[3].line, 103);
  EXPECT_EQ(s.checks[4].kind, "never_declared_dead");
  EXPECT_EQ(s.checks[4].nodes, (std::vector<uint32_t>{0}));
  EXPECT_EQ(s.checks[0].rtol, std::nullopt);
}

TEST(ScenarioLoader, AbsentTablesGiveDefaults) {
  const Scenario s = parse_scenario(R"(name = "minimal"
[heartbeat]
)",
                                    "minimal.toml");
  EXPECT_EQ(s.name, "minimal");
  EXPECT_EQ(s.description, "");
  EXPECT_EQ(s.schedule, Schedule::fifo);
  EXPECT_EQ(s.max_virtual_time, milliseconds(60000));
  EXPECT_EQ(s.cluster.nodes, 2u);
  EXPECT_EQ(s.cluster.name_prefix, "worker");
  EXPECT_EQ(s.cluster.clock_skew_max, nanoseconds(0));
  EXPECT_EQ(s.cluster.clock_drift_max_ppm, 0);
  EXPECT_EQ(s.network.latency.dist, Dist::constant);
  EXPECT_EQ(s.network.latency.max, microseconds(100));
  EXPECT_EQ(s.network.latency.min, microseconds(100));
  EXPECT_EQ(s.network.bandwidth_bytes_per_s, 0);
  EXPECT_EQ(s.network.connection_failure_rate, 0);
  EXPECT_EQ(s.network.connection_timeout, milliseconds(5000));
  EXPECT_TRUE(s.network.links.empty());
  EXPECT_TRUE(s.faults.empty());
  EXPECT_FALSE(s.random_faults.any());
  EXPECT_EQ(s.random_faults.start, nanoseconds(0));
  EXPECT_EQ(s.random_faults.end, std::nullopt);
  EXPECT_EQ(s.random_faults.restart_after, milliseconds(1000));
  EXPECT_EQ(s.random_faults.resume_after, milliseconds(500));
  EXPECT_EQ(s.random_faults.heal_after, milliseconds(1000));
  EXPECT_EQ(s.random_faults.max_concurrent, 1u);
  ASSERT_TRUE((s.workload.name() == "heartbeat"));
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().monitor, 0u);
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().interval, milliseconds(100));
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().max_attempts, 3u);
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().duration, milliseconds(10000));
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().message_bytes, 64u);
  EXPECT_TRUE(s.checks.empty());
}

TEST(ScenarioLoader, FractionalDurationsRoundToTheNearestNanosecond) {
  const Scenario s = parse_scenario(R"(name = "x"
[network]
latency = { dist = "uniform", min_us = 0.0004, max_us = 0.25 }
connection_timeout_ms = 0.0000006
[heartbeat]
duration_ms = 90000
)",
                                    "x.toml");
  EXPECT_EQ(s.network.latency.min, nanoseconds(0));
  EXPECT_EQ(s.network.latency.max, nanoseconds(250));
  EXPECT_EQ(s.network.connection_timeout, nanoseconds(1));
  // A workload longer than max_virtual_time is legal; the run then fails, as a verdict.
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().duration, milliseconds(90000));
}

// Error tests: every message is "FILE:LINE: KEY: problem"; the TOML starts on line 1.

TEST(ScenarioLoader, SyntaxErrorGivesLineAndColumn) {
  const std::string message = error_of(R"(name = "x"
[heartbeat]
interval_ms =
)");
  EXPECT_EQ(message, "bad.toml:3:14: invalid TOML: Error while parsing key-value pair: expected value, saw '\\n'");
}

TEST(ScenarioLoader, UnknownTopLevelKeyListsAllowedKeys) {
  EXPECT_EQ(error_of(R"(name = "x"

nmae = "y"
[heartbeat]
)"),
            "bad.toml:3: nmae: unknown key (did you mean name?); allowed top-level keys: name, description, schedule, "
            "max_virtual_time_ms, max_wall_time_ms, max_memory_mib, cluster, network, devices, faults, random_faults, checks, buggify, heartbeat, tensors, parameters, "
            "program, backward, optimizer, message_faults, model, train, rendezvous, elastic, job");
}

TEST(ScenarioLoader, UnknownNestedKeyListsAllowedKeys) {
  EXPECT_EQ(error_of(R"(name = "x"
[cluster]
nodez = 3
[heartbeat]
)"),
            "bad.toml:3: cluster.nodez: unknown key (did you mean nodes?); allowed keys in [cluster]: nodes, name_prefix, "
            "clock_skew_max_ms, clock_drift_max_ppm");
  // toml++ iterates keys sorted; the first bad key in the file is the one named.
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
zzz = 1
aaa = 2
)"),
            "bad.toml:3: heartbeat.zzz: unknown key; allowed keys in [heartbeat]: monitor, interval_ms, "
            "max_attempts, duration_ms, message_bytes");
}

TEST(ScenarioLoader, WrongTypeNamesBothTypes) {
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[cluster]
nodes = "4"
)"),
            "bad.toml:4: cluster.nodes: expected an integer, got a string");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
interval_ms = "1s"
)"),
            "bad.toml:3: heartbeat.interval_ms: expected a number of milliseconds, got a string");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
max_attempts = 2.0
)"),
            "bad.toml:3: heartbeat.max_attempts: expected an integer, got a float");
  EXPECT_EQ(error_of(R"(name = "x"
network = 3
[heartbeat]
)"),
            "bad.toml:2: network: expected a table, got an integer");
}

TEST(ScenarioLoader, OutOfRangeShowsTheRange) {
  const std::string head = R"(name = "x"
[heartbeat]
)";
  EXPECT_EQ(error_of(head + "[cluster]\nnodes = 0\n"), "bad.toml:4: cluster.nodes: 0 is out of range [1, 1024]");
  EXPECT_EQ(error_of(head + "[network]\nconnection_failure_rate = 1\n"),
            "bad.toml:4: network.connection_failure_rate: 1 is out of range [0, 1)");
  EXPECT_EQ(error_of(head + "[network]\nbandwidth_mbps = nan\n"),
            "bad.toml:4: network.bandwidth_mbps: nan is out of range [0, 1000000000]");
  EXPECT_EQ(error_of(head + "[random_faults]\nmax_concurrent = 3\n"),
            "bad.toml:4: random_faults.max_concurrent: 3 is out of range [1, 2]");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
interval_ms = 0
)"),
            "bad.toml:3: heartbeat.interval_ms: 0 is out of range (0, 1000000000]");
  EXPECT_EQ(error_of(head + "[network]\nconnection_timeout_ms = 0.0000004\n"),
            "bad.toml:4: network.connection_timeout_ms: 4e-07 rounds to 0 ns; must be positive");
}

TEST(ScenarioLoader, UnknownEnumValueListsAllowedValues) {
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[cluster]
nodes = 3
[network]
bandwidth_mbps = 10
latency = { dist = "gaussian", us = 1 }
)"),
            "bad.toml:7: network.latency.dist: unknown value \"gaussian\"; allowed: constant, uniform, "
            "exponential, normal");
  EXPECT_EQ(error_of(R"(name = "x"
schedule = "lifo"
[heartbeat]
)"),
            "bad.toml:2: schedule: unknown value \"lifo\"; allowed: fifo, random");
}

TEST(ScenarioLoader, LatencyKeysFollowTheDist) {
  const std::string head = R"(name = "x"
[heartbeat]
[network]
)";
  EXPECT_EQ(error_of(head + R"(latency = { dist = "uniform", min_us = 1, max_us = 2, stddev_us = 1 })"),
            "bad.toml:4: network.latency.stddev_us: does not apply to dist \"uniform\"; allowed: dist, min_us, max_us");
  EXPECT_EQ(error_of(head + R"(latency = { dist = "uniform", min_us = 3, max_us = 2 })"),
            "bad.toml:4: network.latency.min_us: 3 is more than max_us (2)");
  EXPECT_EQ(error_of(head + R"(latency = { dist = "exponential", mean_us = 3 })"),
            "bad.toml:4: network.latency.max_us: required for dist \"exponential\"");
  EXPECT_EQ(error_of(head + R"(latency = { dist = "normal", mean_us = 5, stddev_us = 1, max_us = 4 })"),
            "bad.toml:4: network.latency.mean_us: 5 is outside [min_us, max_us] = [0, 4]");
}

TEST(ScenarioLoader, UnknownNodeNameListsTheNodes) {
  const std::string head = R"(name = "x"
[heartbeat]
[cluster]
nodes = 4
[[faults]]
at_ms = 1
kind = "kill"
)";
  EXPECT_EQ(error_of(head + R"(node = "worker9")"),
            "bad.toml:8: faults[0].node: unknown node \"worker9\"; nodes are worker0..worker3");
  // Names are exact: no leading zeros.
  EXPECT_EQ(error_of(head + R"(node = "worker01")"),
            "bad.toml:8: faults[0].node: unknown node \"worker01\"; nodes are worker0..worker3");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
monitor = "node0"
)"),
            "bad.toml:3: heartbeat.monitor: unknown node \"node0\"; nodes are worker0..worker1");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[cluster]
name_prefix = "w1"
)"),
            "bad.toml:4: cluster.name_prefix: \"w1\" must not end in a digit");
}

TEST(ScenarioLoader, MissingRequiredKeyNamesTheTableLine) {
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[cluster]
nodes = 3

# The kill below has no node.

[[faults]]
at_ms = 5
kind = "kill"
)"),
            "bad.toml:8: faults[0].node: required for kind \"kill\"");
  EXPECT_EQ(error_of(R"([heartbeat]
)"),
            "bad.toml:1: name: required");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[[checks]]
kind = "declared_dead"
)"),
            "bad.toml:3: checks[0].nodes: required for kind \"declared_dead\"");
}

TEST(ScenarioLoader, KeyNotApplyingToFaultKindNamesTheKind) {
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[[faults]]
at_ms = 5
kind = "pause"
node = "worker1"
restart_at_ms = 9
)"),
            "bad.toml:7: faults[0].restart_at_ms: does not apply to kind \"pause\"; allowed: at_ms, when, kind, node, "
            "resume_at_ms, resume_after_ms");
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[[faults]]
at_ms = 5
kind = "heal"
nodes = 1
)"),
            "bad.toml:6: faults[0].nodes: unknown key (nodes is a key of [[checks]] or [cluster]); allowed keys for kind "
            "\"heal\": at_ms, when, kind");
}

TEST(ScenarioLoader, PartitionGroupsMustBeDisjoint) {
  const std::string head = R"(name = "x"
[heartbeat]
[cluster]
nodes = 3
[[faults]]
at_ms = 5
kind = "partition"
)";
  EXPECT_EQ(error_of(head + R"(groups = [["worker0", "worker1"], ["worker1", "worker2"]])"),
            "bad.toml:8: faults[0].groups[1]: groups must be disjoint: worker1 is in groups[0] and groups[1]");
  EXPECT_EQ(error_of(head + R"(groups = [["worker0"]])"),
            "bad.toml:8: faults[0].groups: needs at least 2 groups, got 1");
  EXPECT_EQ(error_of(head + R"(groups = [["worker0"], []])"),
            "bad.toml:8: faults[0].groups[1]: must name at least one node");
  EXPECT_EQ(error_of(head + R"(from = ["worker0"])"),
            "bad.toml:5: faults[0].to: required with from (a one-way partition)");
  EXPECT_EQ(error_of(head + "from = [\"worker0\"]\nto = [\"worker0\"]\n"),
            "bad.toml:9: faults[0].to: worker0 is also in from; from and to must be disjoint");
  EXPECT_EQ(error_of(head),
            "bad.toml:5: faults[0].groups: required for kind \"partition\" (or from + to for a one-way partition)");
}

TEST(ScenarioLoader, FaultEndMustFollowItsStart) {
  EXPECT_EQ(error_of(R"(name = "x"
[heartbeat]
[[faults]]
at_ms = 100
kind = "kill"
node = "worker1"
restart_at_ms = 100
)"),
            "bad.toml:7: faults[0].restart_at_ms: 100 is not after at_ms (100)");
  EXPECT_EQ(error_of(R"(name = "x"
max_virtual_time_ms = 50
[heartbeat]
[[faults]]
at_ms = 60.5
kind = "heal"
)"),
            "bad.toml:5: faults[0].at_ms: 60.5 is after max_virtual_time_ms (50)");
}

// Faults on workload events (`when`), and ends relative to the fault (`*_after_ms`).
TEST(ScenarioLoader, FaultsOnWorkloadEventsAreReadAndCheckedAgainstTheWorkload) {
  const std::string program = R"(name = "x"
tensors = [{ name = "a", shape = [2], init = "uniform" }]
program = [{ out = "b", call = "sum", args = ["a"] }]
backward = { roots = ["b"], calls = 2 }
)";
  const Scenario s = parse_scenario(program + R"(
[[faults]]
when = { backward = "worker0", pass = 2, after_ms = 5 }
kind = "kill"
node = "worker1"
restart_after_ms = 10

[[faults]]
at_ms = 7
kind = "pause"
node = "worker1"
resume_after_ms = 3
)", "ok.toml");
  ASSERT_EQ(s.faults.size(), 2u);
  ASSERT_TRUE(s.faults[0].when);
  EXPECT_EQ(s.faults[0].when->event, WorkloadEvent::backward);
  EXPECT_EQ(s.faults[0].when->node, 0u);
  EXPECT_EQ(s.faults[0].when->at_least, 2u);
  EXPECT_EQ(s.faults[0].when->after, milliseconds(5));
  EXPECT_EQ(s.faults[0].until_after, milliseconds(10));
  EXPECT_EQ(s.faults[0].until, std::nullopt);
  // At a time, an end after it is a time too.
  EXPECT_FALSE(s.faults[1].when);
  EXPECT_EQ(s.faults[1].until, milliseconds(10));
  EXPECT_EQ(s.faults[1].until_after, std::nullopt);

  const std::string fault = "[[faults]]\nkind = \"kill\"\nnode = \"worker1\"\n";
  EXPECT_EQ(error_of(program + fault + "at_ms = 5\nwhen = { backward = \"worker0\" }\n"),
            "bad.toml:8: faults[0].at_ms: a fault takes at_ms or when, not both");
  EXPECT_EQ(error_of(program + fault), "bad.toml:5: faults[0].at_ms: required (or when = { ... }, a workload event; docs/scenarios.md)");
  EXPECT_EQ(error_of(program + fault + "when = { after_ms = 5 }\n"),
            "bad.toml:8: faults[0].when: names no event; one of: member, step, backward, store_round");
  EXPECT_EQ(error_of(program + fault + "when = { backward = \"worker0\", step = 3 }\n"),
            "bad.toml:8: faults[0].when.backward: a trigger waits for one event; step is already given");
  EXPECT_EQ(error_of(program + fault + "when = { backward = \"worker0\", round = 3 }\n"),
            "bad.toml:8: faults[0].when.round: goes with member");
  EXPECT_EQ(error_of(program + fault + "when = { backward = \"worker9\" }\n").substr(0, 48),
            "bad.toml:8: faults[0].when.backward: unknown nod");
  EXPECT_EQ(error_of(program + fault + "when = { backward = \"worker0\" }\nrestart_at_ms = 9\n"),
            "bad.toml:9: faults[0].restart_at_ms: a fault with when = { ... } ends restart_after_ms after it fires");
  EXPECT_EQ(error_of(program + fault + "at_ms = 5\nrestart_at_ms = 9\nrestart_after_ms = 4\n"),
            "bad.toml:10: faults[0].restart_after_ms: takes restart_at_ms or restart_after_ms, not both");
  // The program workload reports backward passes only: a trigger on anything else could never fire.
  EXPECT_EQ(error_of(program + fault + "when = { step = 3 }\n"),
            "bad.toml:5: faults[0].when: the program workload never reports step_committed events, so this fault "
            "could never fire (it reports: backward)");
  EXPECT_EQ(error_of("name = \"x\"\n[heartbeat]\n" + fault + "when = { member = \"worker0\" }\n"),
            "bad.toml:3: faults[0].when: the heartbeat workload never reports member events, so this fault could "
            "never fire (it reports none: use at_ms)");
}

TEST(ScenarioLoader, LinksAreCheckedAndNotDeclaredTwice) {
  const std::string head = R"(name = "x"
[heartbeat]
[cluster]
nodes = 3
[[network.links]]
from = "worker0"
)";
  EXPECT_EQ(error_of(head + R"(to = "worker1"
latency = { dist = "constant", us = 5 }
[[network.links]]
from = "worker1"
to = "worker0"
latency = { dist = "constant", us = 9 }
)"),
            "bad.toml:9: network.links[1]: worker1 -> worker0 is already set by network.links[0]");
  EXPECT_EQ(error_of(head + R"(to = "worker0")"),
            "bad.toml:7: network.links[0].to: same node as from; a link joins two nodes");
  EXPECT_EQ(error_of(head + R"(to = "worker2")"), "bad.toml:5: network.links[0].latency: required");
}

TEST(ScenarioLoader, CheckKeysFollowTheKind) {
  const std::string head = R"(name = "x"
[heartbeat]
[[checks]]
)";
  EXPECT_EQ(error_of(head + "kind = \"detects_failures\"\nnodes = [\"worker1\"]\n"),
            "bad.toml:5: checks[0].nodes: does not apply to kind \"detects_failures\"");
  EXPECT_EQ(error_of(head + "kind = \"no_false_suspicion\"\nrtol = 1e-9\n"),
            "bad.toml:5: checks[0].rtol: does not apply to kind \"no_false_suspicion\"");
  EXPECT_EQ(error_of(head + "kind = \"gradients_match\"\n"),
            "bad.toml:4: checks[0].kind: unknown value \"gradients_match\"; allowed: detects_failures, "
            "no_false_suspicion, partition_detected_after_start, declared_dead, never_declared_dead, "
            "gradients_match_local, params_match_local, no_leaked_contexts, expect_error, invariants, formed, no_step_twice, "
            "all_steps_committed, restarts, rendezvous_invariants, job_succeeded, no_orphans, reformed_within, command");
}

TEST(ScenarioLoader, MissingWorkloadSaysWhatToAdd) {
  EXPECT_EQ(error_of(R"(name = "x"
[cluster]
nodes = 3
)"),
            "bad.toml:1: no workload: add a [heartbeat] table, program + backward, [model] + [train], a [rendezvous] table, an [elastic] table, or a [job] table");
}

TEST(ScenarioLoader, LoadsAFileAndNamesAnUnreadablePath) {
  const std::string path = ::testing::TempDir() + "/scenario_loader_test.toml";
  {
    std::ofstream out(path);
    out << "name = \"from_file\"\n[heartbeat]\nmax_attempts = 7\n";
  }
  const Scenario s = load_scenario_file(path);
  EXPECT_EQ(s.name, "from_file");
  EXPECT_EQ(s.file, path);
  EXPECT_EQ(s.workload.as<HeartbeatSpec>().max_attempts, 7u);
  std::remove(path.c_str());

  try {
    load_scenario_file("/nonexistent/dir/missing.toml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_scenario);
    EXPECT_EQ(e.detail(), "/nonexistent/dir/missing.toml: cannot open: No such file or directory");
  }
}

}  // namespace
}  // namespace dagsim::scenarios
