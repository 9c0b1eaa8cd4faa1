// What the generated-scenario properties share (rendezvous, elastic training): node names and one
// random fault as a scenario file's [[faults]] entry. Tests only; rapidcheck generators, so call
// inside a property.
#pragma once

#include <rapidcheck.h>

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

}  // namespace dagsim::conformance
