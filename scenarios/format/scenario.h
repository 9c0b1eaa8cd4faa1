// Scenario: one parsed, validated scenario file as plain data (DESIGN.md, "Scenarios").
//
// The loader (scenario_loader.h) fills it from TOML and rejects anything it cannot represent, so
// the runner never has to re-validate: node references are resolved to indices, times are
// Durations, and every value is in range. Tests and RapidCheck generators build Scenarios
// directly as data. docs/scenarios.md documents every key.
#pragma once

#include <any>
#include <nlohmann/json.hpp>
#include <map>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/assert.h"
#include "compute/device/sim_gpu.h"
#include "core/rpc/device_maps.h"
#include "core/runtime/network_model.h"

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

// What a workload reports as it runs, for faults that strike on an event rather than at a time
// (FaultTrigger). Each carries a number: member and store_round a round, step_committed a step,
// backward the pass's number on its node (from 1, per incarnation).
enum class WorkloadEvent : uint8_t {
  member,          // the node is a member of a formed round (its worker group starts)
  step_committed,  // a training step's checkpoint is committed
  backward,        // a backward pass begins on the node (and is in flight until it returns)
  store_round,     // the store holds the rendezvous state of a round
};
std::string_view workload_event_name(WorkloadEvent event);
// workload_event_name's inverse; nullopt for any other text.
std::optional<WorkloadEvent> parse_workload_event(std::string_view name);

// A fault's trigger (`when = { ... }`): the first report of `event` (by `node`, when set) whose
// number is at least `at_least`, then `after`. Nemeses in FoundationDB and Jepsen strike on such
// moments; a wall-clock time over TCP lands wherever the workload happens to be.
struct FaultTrigger {
  WorkloadEvent event = WorkloadEvent::member;
  std::optional<uint32_t> node;
  uint64_t at_least = 0;
  Duration after{0};
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
  // Instead of `at`: the workload event the fault strikes on. Its end then comes `until_after`
  // after it fired (restart_after_ms, resume_after_ms, heal_after_ms); `until` stays unset.
  std::optional<FaultTrigger> when = std::nullopt;
  std::optional<Duration> until_after = std::nullopt;
};

// Faults drawn from seeded rates ([random_faults]). Each kind arrives as a Poisson process.
// The loader refuses a rate whose expected number of arrivals over the window it can know at load
// time ([start_ms, end_ms), or up to max_virtual_time_ms) passes kMaxExpected; drawing the
// timeline stops a kind at kMaxArrivals, twice that, which a Poisson count of mean 10^4 passes
// with probability below 10^-1000: what `run` refuses about the rates, `validate` refuses first.
struct RandomFaultSpec {
  static constexpr double kMaxExpected = 10'000;
  static constexpr size_t kMaxArrivals = 20'000;

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
  // Swarm testing (run/swarm.h): each seed switches kinds and targets on or off, scales the rates
  // and draws max_concurrent, from a stream of its own; and switches [buggify]'s points.
  bool swarm = false;

  bool any() const { return kill_per_min > 0 || crash_per_min > 0 || pause_per_min > 0 || partition_per_min > 0; }
};

// [buggify]: code-level faults (core/base/buggify.h) in a simulated run. Off by default.
struct BuggifySpec {
  bool enabled = false;
  std::vector<std::string> points;  // empty: every point of the build
  double enable_probability = 0.25;
  double fire_probability = 0.05;
};

// A scenario's workload: its name in the workload registry and its spec, whose type the workload
// defines (HeartbeatSpec, Program, ...). The format knows no workload: each reads its own keys.
class WorkloadSpec {
 public:
  WorkloadSpec() = default;
  template <typename Spec>
  WorkloadSpec(std::string name, Spec spec) : name_(std::move(name)), spec_(std::move(spec)) {}

  const std::string& name() const { return name_; }
  bool empty() const { return name_.empty(); }
  // The spec as `Spec`; asserts that it is one (a workload reads only its own spec).
  template <typename Spec>
  const Spec& as() const {
    const Spec* spec = std::any_cast<Spec>(&spec_);
    DAGSIM_ASSERT_MSG(spec != nullptr, "the workload " + name_ + " has another spec type");
    return *spec;
  }
  template <typename Spec>
  Spec& as() {
    Spec* spec = std::any_cast<Spec>(&spec_);
    DAGSIM_ASSERT_MSG(spec != nullptr, "the workload " + name_ + " has another spec type");
    return *spec;
  }
  template <typename Spec>
  const Spec* get() const { return std::any_cast<Spec>(&spec_); }

 private:
  std::string name_;
  std::any spec_;
};

struct CheckSpec {
  std::string kind;                // one of the workload's check kinds (docs/scenarios.md)
  std::vector<uint32_t> nodes;     // declared_dead / never_declared_dead: the nodes
  std::optional<double> rtol;      // gradients_match_local, params_match_local
  std::optional<double> atol;
  int line = 0;
  std::string message = {};        // expect_error: a fragment the error must contain
  bool equal_nan = true;           // gradients_match_local, params_match_local: NaN equals NaN
  // The check's own keys beyond these (CheckKind::extra_keys), as the file gave them: a job's
  // `reformed_within` takes `ms`, its `command` takes `run` and `reference_run`.
  nlohmann::json params = nlohmann::json::object();
};

// [devices]: every node's simulated GPUs (compute/device/sim_gpu.h) and the RPC device maps between
// nodes (core/rpc/device_maps.h). No GPUs by default.
struct DevicesSpec {
  uint32_t gpus = 0;  // per node: cuda:0 .. cuda:gpus-1
  device::SimGpuDelays delays = {};
  std::vector<rpc::DeviceMaps> maps;  // one per node (empty: no maps anywhere)

  // The maps of node `index`, by peer id, and the reverse maps it answers with.
  std::map<WorkerId, rpc::DeviceMap> maps_of(uint32_t index, const std::vector<std::string>& names) const;
  std::map<WorkerId, rpc::DeviceMap> reverse_maps_of(uint32_t index, const std::vector<std::string>& names) const;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;  // where it was loaded from ("" when built as data)
  Schedule schedule = Schedule::fifo;
  Duration max_virtual_time{std::chrono::seconds(60)};
  ClusterSpec cluster;
  runtime::NetworkModel network;
  DevicesSpec devices;
  std::vector<FaultSpec> faults;
  RandomFaultSpec random_faults;
  BuggifySpec buggify;
  WorkloadSpec workload;  // exactly one (scenarios/workloads/registry.h)
  std::vector<CheckSpec> checks;
  // Limits of the host, not of the simulation: the CLI stops a run that exceeds them (a wall-time
  // watchdog, an address-space limit) and reports that instead of a verdict. Unset: none (or the
  // command's flags, --max-wall-time and --max-memory, which take precedence).
  std::optional<Duration> max_wall_time = {};
  std::optional<uint64_t> max_memory_mib = {};
  // What the loader found valid but likely not meant ("FILE:LINE: KEY: ..."): a round that can
  // never reach max_nodes, say. `dagsim validate` and `dagsim run` print each before anything runs.
  std::vector<std::string> warnings = {};
};

// max_memory_mib's range: below 64 MiB the binary and its stacks do not fit; 2^20 MiB is 1 TiB.
inline constexpr int64_t kMinMemoryMib = 64;
inline constexpr int64_t kMaxMemoryMib = int64_t{1} << 20;

}  // namespace dagsim::scenarios
