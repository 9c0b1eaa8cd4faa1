// `dagsim judge DIR`: a run judged from its records alone (scenarios/run/records.h), with the
// same code and the same report as `dagsim run`. Records gathered from several hosts are judged
// the same way.
#include <iostream>

#include "core/base/error.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/report.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/records.h"
#include "scenarios/run/runner.h"

namespace dagsim::cli {

int judge_command(const JudgeArgs& args) {
  scenarios::RecordsDir dir;
  scenarios::Scenario scenario;
  try {
    dir = scenarios::read_records_dir(args.dir);
    // Messages name the scenario as the run did; the text is the one it ran.
    const std::string& file = dir.records.scenario_file;
    scenario = scenarios::parse_scenario(dir.scenario_text, file.empty() ? args.dir + "/scenario.toml" : file);
    if (scenario.cluster.nodes != dir.records.node_names.size()) {
      throw errors::invalid_records(args.dir + ": run.json names " + std::to_string(dir.records.node_names.size()) +
                                    " nodes; the scenario has " + std::to_string(scenario.cluster.nodes));
    }
    // Records find their node by name: the names must be the scenario's, in its order.
    for (uint32_t i = 0; i < scenario.cluster.nodes; ++i) {
      if (dir.records.node_names[i] != scenario.cluster.node_name(i)) {
        throw errors::invalid_records(args.dir + ": run.json names node " + std::to_string(i) + " \"" +
                                      dir.records.node_names[i] + "\"; the scenario calls it " +
                                      scenario.cluster.node_name(i));
      }
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_records && e.code() != ErrorCode::invalid_scenario) throw;
    std::cerr << "dagsim judge: " << e.detail() << "\n";
    return kBadInput;
  }
  scenarios::RunResult result;
  try {
    scenarios::ReportOptions report;
    report.full_tensors = args.full_tensors;
    result = scenarios::judge_run(scenario, dir.records, report);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_records) throw;
    std::cerr << "dagsim judge: " << args.dir << ": " << e.detail() << "\n";
    return kBadInput;
  } catch (const nlohmann::json::exception& e) {
    // A workload's record with a missing or mistyped key.
    std::cerr << "dagsim judge: " << args.dir << ": malformed node record: " << e.what() << "\n";
    return kBadInput;
  }
  return print_report(result, dir.records.scenario_file, args.json);
}

}  // namespace dagsim::cli
