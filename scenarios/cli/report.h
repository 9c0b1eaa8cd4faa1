// Report: a RunResult as the CLI prints it: a short text summary for people, or one JSON object
// (`--json`) with the fields of DESIGN.md's CLI contract, workload results and provenance.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "scenarios/run/runner.h"

namespace dagsim::cli {

// Where this binary came from: version, git commit, build type, compiler, BLAS, CPU model.
nlohmann::json provenance();

// The command that replays a run.
std::string replay_command(const std::string& file, uint64_t seed);

// The run's wall time is the one it recorded, so `dagsim judge` prints what `dagsim run` did.
nlohmann::json report_json(const scenarios::RunResult& result, const std::string& file);
void print_report_text(std::ostream& out, const scenarios::RunResult& result, const std::string& file);

// Prints `result` on stdout (JSON or text) and returns the exit code for its verdict.
int print_report(const scenarios::RunResult& result, const std::string& file, bool json);

}  // namespace dagsim::cli
