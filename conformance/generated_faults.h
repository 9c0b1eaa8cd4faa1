// What the generated-scenario properties share (rendezvous, elastic training): node names, one
// random fault as a scenario file's [[faults]] entry, and the first failing case written out before
// RapidCheck shrinks it. Tests only; rapidcheck generators, so call inside a property.
#pragma once

#include <rapidcheck.h>

#include <cstdio>
#include <sstream>
#include <string>

namespace dagsim::conformance {

inline std::string worker(int i) { return "\"worker" + std::to_string(i) + "\""; }

// One generated fault on `node` at `at` (ms), within the run's `duration` (ms).
inline void gen_fault(std::ostringstream& out, int node, int nodes, int at) {
  out << "\n[[faults]]\nat_ms = " << at << "\n";
  switch (*rc::gen::inRange(0, 4)) {
    case 0:
    case 1:
      out << "kind = \"" << (*rc::gen::arbitrary<bool>() ? "kill" : "crash") << "\"\nnode = " << worker(node) << "\n";
      if (*rc::gen::arbitrary<bool>()) out << "restart_at_ms = " << at + *rc::gen::inRange(300, 5000) << "\n";
      break;
    case 2:
      out << "kind = \"pause\"\nnode = " << worker(node) << "\nresume_at_ms = " << at + *rc::gen::inRange(100, 4000) << "\n";
      break;
    default: {
      out << "kind = \"partition\"\ngroups = [[" << worker(node) << "], [";
      bool first = true;
      for (int i = 0; i < nodes; ++i) {
        if (i == node) continue;
        out << (first ? "" : ", ") << worker(i);
        first = false;
      }
      out << "]]\nheal_at_ms = " << at + *rc::gen::inRange(100, 5000) << "\n";
    }
  }
}

// Writes `failure` (the seed, the failed checks and the scenario's text) to stderr the first time a
// case fails in this process, then fails the case. Why: RapidCheck shrinks before it reports, and a
// shrink of simulated runs can outlast CTest's timeout. CI's rendezvous property found a 54-node
// case at its 90th and spent its whole 900 s shrinking it, leaving a Timeout and the run's seed; with
// this the log holds the case itself, which `dagsim run FILE --seed N` replays.
[[noreturn]] inline void fail_case(const std::string& failure) {
  static bool written = false;
  if (!written) {
    written = true;
    std::fprintf(stderr, "first failing case (before RapidCheck shrinks it):\n%s\n", failure.c_str());
    std::fflush(stderr);
  }
  RC_FAIL(failure);
}

}  // namespace dagsim::conformance
