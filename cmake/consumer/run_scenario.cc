// Uses the installed scenario runner (dagsim::scenarios) as a C++ program would: loads a scenario
// file, runs it in the simulator with a seed, and reads its result (the outcome, each check, the
// trace hash); then runs it again, since the same seed must give the same run. Exit 0 when both
// runs passed with one trace hash, 1 when not, 2 for a scenario the loader refuses.
// Usage: run_scenario FILE [SEED]
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/base/error.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"

namespace scenarios = dagsim::scenarios;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: run_scenario FILE [SEED]\n";
    return 2;
  }
  scenarios::Scenario scenario;
  try {
    scenario = scenarios::load_scenario_file(argv[1]);
  } catch (const dagsim::Error& e) {
    std::cerr << e.detail() << "\n";  // "FILE:LINE: KEY: problem", as dagsim validate prints it
    return 2;
  }
  for (const std::string& warning : scenario.warnings) std::cerr << "warning: " << warning << "\n";

  scenarios::RunOptions options;
  options.seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  const scenarios::RunResult result = scenarios::run_scenario(scenario, options);
  std::cout << "run_scenario: " << result.scenario << " seed " << result.seed << ": " << result.outcome << ", "
            << (result.passed ? "passed" : "FAILED") << ", trace " << scenarios::hash_hex(result.trace_hash) << " ("
            << result.trace_events << " events, " << result.virtual_time_ms << " ms virtual, " << result.messages
            << " messages)\n";
  for (const scenarios::CheckResult& check : result.checks) {
    std::cout << "  " << (check.passed ? "pass " : "FAIL ") << check.name << ": " << check.detail << "\n";
  }

  const scenarios::RunResult again = scenarios::run_scenario(scenario, options);
  if (again.trace_hash != result.trace_hash) {
    std::cout << "run_scenario: the same seed gave another run: trace " << scenarios::hash_hex(again.trace_hash) << "\n";
    return 1;
  }
  return result.passed && again.passed ? 0 : 1;
}
