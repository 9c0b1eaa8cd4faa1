// Runtime-switched planted bugs: DAGSIM_PLANTED("name") is true only in a process whose
// environment variable DAGSIM_PLANTED_BUG equals "name". They exist to test the testers (does a
// sweep find the bug, does `dagsim shrink` reduce its failing run, does the regression corpus
// fail when it is in), as the compile-time plants in rendezvous_ops.cc and agent_life.cc do, but
// in the one dagsim binary everyone builds.
//
// Promises: the variable is read once per process (the first DAGSIM_PLANTED call) and never
// again, so a run is as deterministic with it as without; unset or empty, every DAGSIM_PLANTED is
// false and the code runs as written. Each plant's name is listed in kPlantedBugs, and a value
// that names none of them is refused at the first call (a misspelt name must not silently test
// the correct code).
//
// The plants (each a realistic one-line slip that only a fault exposes):
//   autograd_probe_timeout     core/dist_autograd/dist_engine.cc: termination probes bounded by
//                              the probe interval, so a worker paused or cut off for longer during
//                              a backward counts as lost and the pass fails.
//   rendezvous_reform_below_min core/rendezvous/rendezvous_state.cc: an expired participant makes
//                              the survivors re-form only when they are fewer than min_nodes.
//   elastic_round_lost_counted core/elastic/elastic_agent.cc: a group whose round is gone from the
//                              state (its node removed as dead after a pause) is restarted with the
//                              restart counted against max_restarts, as a failed group's is.
#pragma once

#include <array>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

namespace dagsim {

inline constexpr std::array<std::string_view, 3> kPlantedBugs = {
    "autograd_probe_timeout", "rendezvous_reform_below_min", "elastic_round_lost_counted"};

namespace detail {
// The planted bug this process runs with ("" for none), read from the environment once.
inline const std::string& planted_bug() {
  static const std::string bug = [] {
    const char* value = std::getenv("DAGSIM_PLANTED_BUG");
    std::string name = value == nullptr ? "" : value;
    if (name.empty()) return name;
    for (std::string_view known : kPlantedBugs) {
      if (known == name) return name;
    }
    std::fprintf(stderr, "DAGSIM_PLANTED_BUG=%s names no planted bug (core/base/planted.h lists them)\n", name.c_str());
    std::exit(2);  // dagsim's exit code for a bad environment
  }();
  return bug;
}
}  // namespace detail

// True only when DAGSIM_PLANTED_BUG names this bug. `name` must be one of kPlantedBugs.
inline bool planted(std::string_view name) {
  const std::string& bug = detail::planted_bug();
  return !bug.empty() && bug == name;
}

}  // namespace dagsim

#define DAGSIM_PLANTED(name) (::dagsim::planted(name))
