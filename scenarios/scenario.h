// Scenario: one parsed, validated scenario file as plain data (DESIGN.md, "Scenarios").
//
// The loader (scenario_loader.h) fills it from TOML and rejects anything it cannot represent, so
// the runner never has to re-validate: node references are resolved to indices, times are
// Durations, and every value is in range. Tests and RapidCheck generators build Scenarios
// directly as data. docs/scenarios.md documents every key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scenarios/model_spec.h"
#include "scenarios/program_spec.h"
#include "sim/network_model.h"

namespace dagsim::scenarios {

using runtime::Duration;

enum class Schedule : uint8_t { fifo, random };

struct ClusterSpec {
  uint32_t nodes = 2;
  std::string name_prefix = "worker";  // nodes are <prefix>0 .. <prefix>N-1
  Duration clock_skew_max{0};          // each node's clock offset, uniform in [0, max]
  int64_t clock_drift_max_ppm = 0;     // each node's rate error, uniform in [-max, +max] ppm

  std::string node_name(uint32_t index) const { return name_prefix + std::to_string(index); }
};

// One scheduled fault ([[faults]]).
struct FaultSpec {
  enum class Kind : uint8_t { kill, crash, restart, pause, resume, partition, heal };
  Kind kind = Kind::kill;
  Duration at{0};
  // kill, crash, restart, pause, resume: the node.
  uint32_t node = 0;
  // kill/crash: restart the node (a fresh incarnation) at this time. pause: resume at this time.
  // partition: heal this partition at this time.
  std::optional<Duration> until;
  // partition: either symmetric groups (traffic between different groups is blocked; nodes in no
  // group are unaffected) or one-way (traffic from each `from` node to each `to` node is blocked).
  std::vector<std::vector<uint32_t>> groups;
  std::vector<uint32_t> from;
  std::vector<uint32_t> to;
  int line = 0;  // where it was declared, for messages
};

// Faults drawn from seeded rates ([random_faults]). Each kind arrives as a Poisson process.
struct RandomFaultSpec {
  double kill_per_min = 0;
  double crash_per_min = 0;
  double pause_per_min = 0;
  double partition_per_min = 0;  // isolates one random node (symmetric) from the others
  Duration start{0};
  std::optional<Duration> end;           // default: the workload's end
  Duration restart_after{std::chrono::seconds(1)};  // killed/crashed nodes come back after this
  Duration resume_after{std::chrono::milliseconds(500)};
  Duration heal_after{std::chrono::seconds(1)};
  uint32_t max_concurrent = 1;           // at most this many nodes faulted at once
  std::vector<uint32_t> exclude;         // never faulted (e.g. the monitor)

  bool any() const { return kill_per_min > 0 || crash_per_min > 0 || pause_per_min > 0 || partition_per_min > 0; }
};

// The heartbeat failure detector workload ([heartbeat]).
struct HeartbeatSpec {
  uint32_t monitor = 0;
  Duration interval{std::chrono::milliseconds(100)};
  uint32_t max_attempts = 3;  // declared dead after interval × max_attempts without a heartbeat
  Duration duration{std::chrono::seconds(10)};
  uint32_t message_bytes = 64;

  Duration timeout() const { return interval * max_attempts; }
  // Heartbeats from a live, reachable node arrive at most interval + (latency max) apart, so a
  // latency maximum below this slack can never cause a false suspicion.
  Duration slack() const { return interval * (max_attempts - 1); }
};

struct CheckSpec {
  std::string kind;                // one of the workload's check kinds (docs/scenarios.md)
  std::vector<uint32_t> nodes;     // declared_dead / never_declared_dead: the nodes
  std::optional<double> rtol;      // gradients_match_local, params_match_local
  std::optional<double> atol;
  int line = 0;
  std::string message = {};        // expect_error: a fragment the error must contain
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;  // where it was loaded from ("" when built as data)
  Schedule schedule = Schedule::fifo;
  Duration max_virtual_time{std::chrono::seconds(60)};
  ClusterSpec cluster;
  sim::NetworkModel network;
  std::vector<FaultSpec> faults;
  RandomFaultSpec random_faults;
  std::optional<HeartbeatSpec> heartbeat;  // the workload: exactly one of these
  // A program workload, or the one a model workload compiles to (then `model` says so).
  std::optional<Program> program;
  std::optional<ModelSpec> model;
  std::vector<CheckSpec> checks;
};

}  // namespace dagsim::scenarios
