// `dagsim judge DIR`: a run judged from its records alone (scenarios/run/records.h), with the
// same code and the same report as `dagsim run`. Records gathered from several hosts are judged
// the same way. A directory holding a store's record (`dagsim store --record`, with the job's
// job.json) is a rendezvous judged from the store's side: PyTorch's own agents or dagsim's
// (scenarios/workloads/rendezvous/store_records.h).
//
// Everything a record chose (a run id, a node's name, a path) is printed through printable(), so
// no control character a store client or a file wrote reaches the terminal; the JSON report
// escapes them itself, and text that is not UTF-8 is printed with U+FFFD in its place.
#include <iostream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/report.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/records.h"
#include "scenarios/run/runner.h"
#include "scenarios/workloads/rendezvous/store_records.h"

namespace dagsim::cli {

namespace {

// A violation's text is printed whole, however many node names it holds.
constexpr size_t kLineMax = 4000;

int judge_store(const JudgeArgs& args) {
  scenarios::StoreRecordsJudgement j;
  try {
    j = scenarios::judge_store_records(args.dir);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_records) throw;
    std::cerr << "dagsim judge: " << e.detail() << "\n";
    return kBadInput;
  }
  const bool passed = j.violations.empty();
  if (args.json) {
    nlohmann::json report = j.report;
    report["passed"] = passed;
    std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    const nlohmann::json& r = j.report;
    std::cout << "dagsim judge: rendezvous " << printable(r["run_id"].get<std::string>()) << " from its store's record ("
              << j.format << " state), " << r["commits"] << " commits, " << r["agents"].size() << " agents, "
              << r["rounds"].size() << " rounds completed\n";
    if (!r["record_cut"].is_null()) {
      std::cout << "  the record was cut at the store's cap (" << r["record_cut"]["max_bytes"] << " bytes, --record-max-bytes) at "
                << r["record_cut"]["at_ms"].get<double>() << " ms: judged up to there\n";
    }
    for (const nlohmann::json& round : r["rounds"]) {
      std::cout << "  round " << round["round"] << " completed at " << round["completed_ms"].get<double>() << " ms, world "
                << round["world_size"];
      for (const nlohmann::json& removed : round["removed"]) {
        std::cout << "; " << printable(removed["node"].get<std::string>()) << "_" << removed["pid"] << " left at "
                  << removed["at_ms"].get<double>() << " ms (" << removed["why"].get<std::string>()
                  << (removed["process_alive"].get<bool>() ? ", its process alive" : "") << ")";
      }
      std::cout << "\n";
    }
    std::cout << "  not judged: " << r["not_judged"].get<std::string>() << "\n";
    if (passed) std::cout << "invariants: PASS (S1-S7, S10, L1, L2, L5, L6 hold)\n";
    for (const scenarios::Violation& v : j.violations) {
      std::cout << "  violation " << printable(scenarios::to_string(v), kLineMax) << "\n";
    }
    if (!passed) std::cout << "invariants: FAIL (" << j.violations.size() << " violations)\n";
  }
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "dagsim judge: cannot write the report to standard output\n";
    return kBadInput;
  }
  return passed ? kPassed : kCheckFailed;
}

}  // namespace

std::optional<JudgedRun> judge_records_dir(const std::string& path, const scenarios::ReportOptions& report,
                                           const std::string& who) {
  JudgedRun run;
  scenarios::RecordsDir dir;
  try {
    dir = scenarios::read_records_dir(path);
    // Messages name the scenario as the run did; the text is the one it ran.
    const std::string& file = dir.records.scenario_file;
    run.scenario = scenarios::parse_scenario(dir.scenario_text, file.empty() ? path + "/scenario.toml" : file);
    if (run.scenario.cluster.nodes != dir.records.node_names.size()) {
      throw errors::invalid_records(printable(path, kPathMax) + ": run.json names " + std::to_string(dir.records.node_names.size()) +
                                    " nodes; the scenario has " + std::to_string(run.scenario.cluster.nodes));
    }
    // Records find their node by name: the names must be the scenario's, in its order.
    for (uint32_t i = 0; i < run.scenario.cluster.nodes; ++i) {
      if (dir.records.node_names[i] != run.scenario.cluster.node_name(i)) {
        throw errors::invalid_records(printable(path, kPathMax) + ": run.json names node " + std::to_string(i) + " " +
                                      quote(dir.records.node_names[i]) + "; the scenario calls it " +
                                      printable(run.scenario.cluster.node_name(i)));
      }
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_records && e.code() != ErrorCode::invalid_scenario) throw;
    std::cerr << who << ": " << e.detail() << "\n";
    return std::nullopt;
  }
  run.file = dir.records.scenario_file;
  try {
    run.result = scenarios::judge_run(run.scenario, dir.records, report);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_records) throw;
    std::cerr << who << ": " << printable(path, kPathMax) << ": " << e.detail() << "\n";
    return std::nullopt;
  } catch (const nlohmann::json::exception& e) {
    // A workload's record with a missing or mistyped key.
    std::cerr << who << ": " << printable(path, kPathMax) << ": malformed node record: " << printable(e.what(), 400) << "\n";
    return std::nullopt;
  }
  return run;
}

int judge_command(const JudgeArgs& args) {
  if (scenarios::is_store_records_dir(args.dir)) return judge_store(args);
  scenarios::ReportOptions report;
  report.full_tensors = args.full_tensors;
  const std::optional<JudgedRun> run = judge_records_dir(args.dir, report, "dagsim judge");
  if (!run) return kBadInput;
  return print_report(run->result, run->file, args.json);
}

}  // namespace dagsim::cli
