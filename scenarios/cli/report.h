// Report: a RunResult as the CLI prints it: a short text summary for people, or one JSON object
// (`--json`) with the fields of DESIGN.md's CLI contract, workload results and provenance.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "scenarios/run/runner.h"

namespace dagsim::cli {

// Where this binary came from: version, git commit, build type, compiler, BLAS, CPU model.
nlohmann::json provenance();

// The command that replays a run: its file and seed, then `flags`, the options that made it what
// it was beyond the seed (" --transport tcp --max-wall-time 3": see replay_flags in commands.h).
std::string replay_command(const std::string& file, uint64_t seed, const std::string& flags = "");

// The run's wall time is the one it recorded, so `dagsim judge` prints what `dagsim run` did.
// `replay_flags` as for replay_command; nullopt: those the result itself implies (its transport).
nlohmann::json report_json(const scenarios::RunResult& result, const std::string& file,
                           const std::optional<std::string>& replay_flags = std::nullopt);
void print_report_text(std::ostream& out, const scenarios::RunResult& result, const std::string& file,
                       const std::optional<std::string>& replay_flags = std::nullopt);

// Prints `result` on stdout (JSON or text) and returns the exit code for its verdict.
int print_report(const scenarios::RunResult& result, const std::string& file, bool json,
                 const std::optional<std::string>& replay_flags = std::nullopt);

}  // namespace dagsim::cli
