// Swarm testing ([random_faults] swarm = true): each seed draws its own fault mix (TigerBeetle's
// options_swarm; Groce et al., "Swarm Testing", ISSTA 2012). Uniform random faults give every seed
// the same mix, so a bug that needs, say, many partitions and no kills is as rare in seed 9,000 as
// in seed 1; a swarm sweep instead spends some seeds on each corner of the mix.
//
// Per seed, from a stream of its own (the seed forked with kSwarmStream, never the fault
// schedule's or the simulator's, so swarm = false draws nothing and replays as before):
//   - each fault kind with a rate (kill, crash, pause, partition) is switched on or off with
//     probability 1/2, at least one staying on;
//   - each kind's rate is scaled by 2^U(-2, 2) (quantised to quarter powers of two, exact on any
//     machine), kept under the loader's bound on expected faults;
//   - each node that is not excluded is a target or not with probability 1/2, at least one staying
//     a target (the others join `exclude`);
//   - max_concurrent is drawn in [1, the scenario's];
//   - when [buggify] is enabled, each of its points is switched on or off with probability 1/2 (at
//     least one on), which replaces the points' own enable_probability draw.
// The mix is a pure function of (scenario, seed): the runner applies it where [random_faults] is
// drawn (fault_schedule.cc, so a [job]'s drawn faults get it too), and records it (run.json
// "swarm"), so a report and `dagsim shrink` see what the seed ran with.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

struct SwarmMix {
  // In the order kill, crash, pause, partition.
  static constexpr std::array<const char*, 4> kKinds = {"kill", "crash", "pause", "partition"};
  std::array<bool, 4> kinds = {false, false, false, false};
  std::array<double, 4> rate_factors = {1, 1, 1, 1};
  std::vector<bool> targets;  // by node
  uint32_t max_concurrent = 1;
  // The [buggify] points switched on, when [buggify] is enabled.
  std::optional<std::vector<std::string>> buggify_points;
};

// The mix of `seed`. REQUIRES: scenario.random_faults.swarm.
SwarmMix draw_swarm(const Scenario& scenario, uint64_t seed);

// `spec` with `mix` applied: kinds off have rate 0, rates scaled (at most `max_per_min`),
// non-targets excluded, max_concurrent replaced.
RandomFaultSpec apply_swarm(const RandomFaultSpec& spec, const SwarmMix& mix, double max_per_min);

// The mix as the run's records and report show it: {"kinds": {kind: {"on", "rate_factor",
// "per_min"}}, "targets": [names], "max_concurrent", "buggify_points": [...] (when drawn),
// "summary": one line}.
nlohmann::json swarm_json(const Scenario& scenario, const SwarmMix& mix);

}  // namespace dagsim::scenarios
