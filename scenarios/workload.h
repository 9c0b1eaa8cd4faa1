// Workload: what a scenario's nodes do, and the checks that judge it (DESIGN.md, "Scenarios").
//
// The runner builds a SimWorld, asks the workload for each node's main function, applies the
// scenario's faults, runs the world until the workload's end, and then asks the workload to
// evaluate each [[checks]] entry against what it recorded and the world's fault history. Checks
// are evaluated after the run, from data: never inside a node fiber.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scenarios/scenario.h"
#include "sim/sim_world.h"

namespace dagsim::scenarios {

struct CheckResult {
  std::string name;
  bool passed = false;
  std::string detail;
};

class Workload {
 public:
  virtual ~Workload() = default;

  // The main function of node `index`, run by every incarnation of it.
  virtual sim::SimWorld::NodeMain node_main(uint32_t index) = 0;
  // Called once the nodes exist and have started, before the run (foreground fibers, phases).
  virtual void install(sim::SimWorld& world) = 0;
  // When the workload ends on its own (nullopt: when its foreground fibers end).
  virtual std::optional<runtime::TimePoint> end_time() const = 0;
  // How long the world keeps running after the workload ended, before the checks (traffic the
  // workload left in flight, such as context releases, drains meanwhile).
  virtual runtime::Duration drain_time() const { return runtime::Duration{0}; }
  // Called once the world has shut down: drop anything bound to its nodes.
  virtual void release_nodes() {}
  // Evaluates one check of the scenario. The run has ended; `world` still holds its history.
  virtual CheckResult check(const CheckSpec& spec, const sim::SimWorld& world) const = 0;
  // Workload results for the JSON report (merged into the top-level object).
  virtual nlohmann::json results(const sim::SimWorld& world) const = 0;
};

// The workload a scenario declares; `seed` makes its seeded data (tensor values).
std::unique_ptr<Workload> make_workload(const Scenario& scenario, uint64_t seed);

}  // namespace dagsim::scenarios
