#include "scenarios/cli/report.h"

#include <cblas.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "core/base/printable.h"
#include "compute/kernels/vector_math.h"
#include "scenarios/cli/build_info.h"
#include "scenarios/cli/commands.h"

namespace dagsim::cli {

namespace {
std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

// A check's detail or a warning, each line through printable(): records chose parts of them (a
// node's name, a key), and none may put a control character on the terminal. Empty lines stay
// empty; a line is never cut.
std::string printable_lines(const std::string& text) {
  constexpr size_t kNoCut = std::string::npos - 1;
  std::string out;
  for (size_t start = 0;;) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    if (!line.empty()) out += printable(line, kNoCut);
    if (end == text.size()) return out;
    out += '\n';
    start = end + 1;
  }
}
}  // namespace

nlohmann::json provenance() {
  const BuildInfo& build = build_info();
  return {{"dagsim_version", build.version},
          {"git_commit", build.git_commit},
          {"build_type", build.build_type},
          {"compiler", build.compiler},
          {"blas", openblas_get_config()},
          {"blas_core", openblas_get_corename()},
          {"cpu", cpu_model()},
          {"cpu_capability", vec::capability_name(vec::capability())}};
}

std::string replay_command(const std::string& file, uint64_t seed, const std::string& flags) {
  return "dagsim run " + file + " --seed " + std::to_string(seed) + flags;
}

namespace {

// The replay flags a result implies by itself (a run judged from its records): its transport.
std::string flags_of(const scenarios::RunResult& r, const std::optional<std::string>& given) {
  if (given) return *given;
  // A [job] run (transport "job") is started by `dagsim run` itself: no flag replays it.
  return r.transport == "sim" || r.transport == "job" ? "" : " --transport " + r.transport;
}

// One line each: the probes hit, the code-level faults, the swarm's fault mix.
void print_probes_buggify_swarm(std::ostream& out, const scenarios::RunResult& r) {
  if (!r.probes.empty()) {
    uint64_t hits = 0;
    for (const auto& [name, count] : r.probes) hits += count;
    out << "  probes: " << r.probes.size() << " hit, " << hits << " hits\n";
  }
  if (r.buggify.is_object()) {
    out << "  buggify: " << r.buggify.value("enabled", nlohmann::json::array()).size() << " points enabled";
    const nlohmann::json fired = r.buggify.value("fired", nlohmann::json::object());
    if (fired.empty()) out << ", none fired";
    for (const auto& [name, count] : fired.items()) out << "; " << printable(name) << " fired " << count.dump() << "x";
    out << "\n";
  }
  if (r.swarm.is_object() && r.swarm.contains("summary") && r.swarm.at("summary").is_string()) {
    out << "  swarm: " << printable(r.swarm.at("summary").get<std::string>(), 2000) << "\n";
  }
}

}  // namespace

nlohmann::json report_json(const scenarios::RunResult& r, const std::string& file,
                           const std::optional<std::string>& replay_flags) {
  nlohmann::json checks = nlohmann::json::array();
  for (const scenarios::CheckResult& c : r.checks) {
    checks.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
  }
  nlohmann::json j = {{"scenario", r.scenario},
                      {"file", file},
                      {"seed", r.seed},
                      {"transport", r.transport},
                      {"passed", r.passed},
                      {"outcome", r.outcome},
                      {"checks", std::move(checks)},
                      {"trace_hash", scenarios::hash_hex(r.trace_hash)},
                      {"trace_events", r.trace_events},
                      {"virtual_time_ms", r.virtual_time_ms},
                      {"workload_end_ms", r.workload_end_ms ? nlohmann::json(*r.workload_end_ms) : nlohmann::json(nullptr)},
                      {"wall_ms", r.wall_ms},
                      {"messages", r.messages},
                      {"messages_delivered", r.messages_delivered},
                      {"messages_dropped", r.messages_dropped},
                      {"connection_failures", r.connection_failures},
                      {"faults", r.faults},
                      {"replay", replay_command(file, r.seed, flags_of(r, replay_flags))},
                      {"provenance", provenance()}};
  if (!r.stuck_report.empty()) j["stuck_report"] = r.stuck_report;
  j["warnings"] = r.warnings;
  j["probes"] = r.probes;  // the code probes the run hit (core/base/probe.h), by name
  if (!r.buggify.is_null()) j["buggify"] = r.buggify;
  if (!r.swarm.is_null()) j["swarm"] = r.swarm;
  // The workload-result keys of the contract are always present, so consumers see one schema;
  // workloads that produce them (programs, training, rendezvous) fill them in.
  j["gradients"] = nlohmann::json::object();
  j["local_gradients"] = nlohmann::json::object();
  j["params"] = nlohmann::json::object();
  j["rendezvous"] = nlohmann::json::array();
  for (const auto& [key, value] : r.workload.items()) j[key] = value;
  return j;
}

void print_report_text(std::ostream& out, const scenarios::RunResult& r, const std::string& file,
                       const std::optional<std::string>& replay_flags) {
  out << "scenario " << printable(r.scenario) << " (" << printable(file, kPathMax) << "), seed " << r.seed << ", transport " << printable(r.transport) << "\n";
  const bool sim = r.transport == "sim";
  if (r.transport == "job") {
    // A real job: wall time since its start; its own processes are not the seed's (the story's
    // first line says so), and it sent no simulated messages.
    out << std::fixed << std::setprecision(3) << "  " << printable(r.outcome) << " at " << r.virtual_time_ms
        << " ms since the job's start (wall time)\n";
  } else {
  // Over TCP the scenario's clock is real time since the run began, and there is no trace.
  out << std::fixed << std::setprecision(3) << "  " << printable(r.outcome) << " at " << r.virtual_time_ms
      << (sim ? " ms virtual" : " ms scenario time");
  // The workload's own end apart from the drain that follows it (traffic it left settles then).
  if (r.workload_end_ms && *r.workload_end_ms < r.virtual_time_ms) {
    out << " (the workload ended at " << *r.workload_end_ms << " ms, then " << (r.virtual_time_ms - *r.workload_end_ms)
        << " ms of drain)";
  }
  out << " in " << std::setprecision(1) << r.wall_ms << " ms wall; "
      << r.messages << " messages (" << r.messages_delivered << " delivered, " << r.messages_dropped << " dropped), "
      << r.connection_failures << " connection failures";
  if (sim) out << "; trace " << scenarios::hash_hex(r.trace_hash) << " (" << r.trace_events << " events)";
  out << "\n";
  }
  // A workload's story of the run, when it tells one (elastic training: round by round).
  if (r.workload.contains("timeline") && r.workload.at("timeline").is_array()) {
    for (const nlohmann::json& line : r.workload.at("timeline")) {
      if (line.is_string()) out << "  " << printable(line.get<std::string>(), 2000) << "\n";
    }
  }
  for (const std::string& w : r.warnings) out << "  WARNING " << printable_lines(w) << "\n";
  print_probes_buggify_swarm(out, r);
  for (const scenarios::CheckResult& c : r.checks) {
    out << "  " << (c.passed ? "PASS " : "FAIL ") << c.name << ": " << printable_lines(c.detail);
    if (c.detail.empty() || c.detail.back() != '\n') out << "\n";
  }
  if (r.passed) {
    out << "passed\n";
  } else {
    out << "FAILED; replay with: " << printable(replay_command(file, r.seed, flags_of(r, replay_flags)), kPathMax) << "\n";
  }
}

int print_report(const scenarios::RunResult& result, const std::string& file, bool json,
                 const std::optional<std::string>& replay_flags) {
  if (json) {
    std::cout << report_json(result, file, replay_flags).dump(2) << "\n";
  } else {
    print_report_text(std::cout, result, file, replay_flags);
  }
  return result.passed ? kPassed : kCheckFailed;
}

}  // namespace dagsim::cli
