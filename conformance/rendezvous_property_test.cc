// Rendezvous properties (issue 11 item 7): over random clusters (4 to 64 participants besides the
// store), random settings and timeouts, random schedules of late joins, leaves and closes, random
// kills, crashes, restarts, pauses and partitions (of participants, and now and then of the store),
// skewed and drifting clocks and random latencies, every run ends and the invariant checker finds
// S1-S10 and L1-L6 holding (rendezvous_invariants.h). RC_PARAMS="max_success=N" scales it.
//
// A case is generated as a scenario file's text and loaded by the loader, so a failing case prints
// as a file that `dagsim run FILE --seed N` replays.
#include <gtest/gtest.h>

#include <rapidcheck/gtest.h>
#include <sstream>

#include "conformance/generated_faults.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"

namespace dagsim::conformance {
namespace {

// A rendezvous scenario's text: worker0 hosts the store, worker1..workerN take part.
std::string gen_rendezvous_scenario() {
  const int participants = *rc::gen::weightedOneOf<int>({{6, rc::gen::inRange(4, 17)}, {1, rc::gen::inRange(17, 65)}});
  const int nodes = participants + 1;
  const int min_nodes = *rc::gen::inRange(1, participants + 1);
  const int max_nodes = *rc::gen::inRange(min_nodes, participants + 1);
  const int duration = *rc::gen::inRange(8000, 30001);
  const int join_timeout = *rc::gen::inRange(5000, 30001);
  const int store_timeout = *rc::gen::inRange(2000, 10001);
  const int keep_alive = *rc::gen::inRange(200, 2001);
  const int attempts = *rc::gen::inRange(2, 5);
  const int expiry = keep_alive * attempts;
  const int skew = *rc::gen::inRange(0, 201);
  // PyTorch's polling where the loader takes it: a polling node's heartbeat must stay below the
  // expiry (poll + keep-alive interval + skew).
  int poll = *rc::gen::element(0, 0, 0, 500, 1000);
  if (poll + keep_alive + skew >= expiry) poll = 0;
  std::ostringstream out;
  out << "name = \"rendezvous_property\"\n"
      << "schedule = \"" << (*rc::gen::arbitrary<bool>() ? "random" : "fifo") << "\"\n"
      << "max_virtual_time_ms = " << duration + join_timeout + 2 * store_timeout + 40000 << "\n\n"
      << "[cluster]\nnodes = " << nodes << "\n"
      << "clock_skew_max_ms = " << skew << "\n"
      << "clock_drift_max_ppm = " << *rc::gen::inRange(0, 301) << "\n\n"
      << "[network]\nlatency = { dist = \"uniform\", min_us = 100, max_us = " << *rc::gen::inRange(200, 3001) << " }\n\n"
      << "[rendezvous]\nmin_nodes = " << min_nodes << "\nmax_nodes = " << max_nodes << "\n"
      << "join_timeout_ms = " << join_timeout << "\n"
      << "last_call_ms = " << *rc::gen::inRange(200, 5001) << "\n"
      << "keep_alive_interval_ms = " << keep_alive << "\n"
      << "keep_alive_max_attempt = " << attempts << "\n"
      << "rerendezvous_on_expiry = " << (*rc::gen::weightedOneOf<bool>({{3, rc::gen::just(true)}, {1, rc::gen::just(false)}}) ? "true" : "false") << "\n"
      << "poll_interval_ms = " << poll << "\n"
      << "monitor_interval_ms = " << *rc::gen::inRange(100, 1001) << "\n"
      << "store_timeout_ms = " << store_timeout << "\n"
      << "duration_ms = " << duration << "\n";
  bool closed = false;
  for (int i = 1; i <= participants; ++i) {
    const int dice = *rc::gen::inRange(0, 16);
    const char* action = dice < 4 ? "join" : dice < 6 ? "leave" : (dice == 6 && !closed) ? "close" : nullptr;
    if (action == nullptr) continue;
    closed = closed || dice == 6;
    out << "\n[[rendezvous.actions]]\naction = \"" << action << "\"\nnode = " << worker(i)
        << "\nat_ms = " << *rc::gen::inRange(0, duration) << "\n";
  }
  const int faults = *rc::gen::inRange(0, 6);
  for (int f = 0; f < faults; ++f) {
    const bool store = *rc::gen::inRange(0, 10) == 0;
    gen_fault(out, store ? 0 : *rc::gen::inRange(1, nodes), nodes, *rc::gen::inRange(0, duration));
  }
  out << "\n[[checks]]\nkind = \"invariants\"\n";
  return out.str();
}

RC_GTEST_PROP(RendezvousProperties, InvariantsHoldOverRandomSchedulesAndFaults, ()) {
  const std::string text = gen_rendezvous_scenario();
  const uint64_t seed = *rc::gen::inRange<uint64_t>(1, 1'000'000);
  const scenarios::Scenario scenario = scenarios::parse_scenario(text, "generated");
  scenarios::RunOptions options;
  options.seed = seed;
  const scenarios::RunResult result = scenarios::run_scenario(scenario, options);
  std::string failures;
  for (const scenarios::CheckResult& check : result.checks) {
    if (!check.passed) failures += check.name + ": " + check.detail + "\n";
  }
  if (!result.passed) fail_case("seed " + std::to_string(seed) + "\n" + failures + "--- scenario ---\n" + text);
}

}  // namespace
}  // namespace dagsim::conformance
