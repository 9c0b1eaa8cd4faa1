// What `dagsim shrink` writes and prints (shrink_header.h).
#include "scenarios/shrink/shrink_header.h"

#include <cmath>
#include <sstream>

namespace dagsim::shrink {
namespace {

std::string ms_text(const std::optional<double>& ms) {
  if (!ms) return "?";
  std::ostringstream out;
  out << std::round(*ms * 1000) / 1000;
  return out.str();
}

std::string how(const FailureSignature& s) {
  if (s.kind == FailureSignature::Kind::crash) return "still fails the same way: " + s.describe();
  return "still fails " + s.describe() + " the same way";
}

std::string stop_text(const ShrinkReport& r) {
  if (r.result.stopped_by == "max_runs") {
    return "The search stopped at its budget (--max-runs " + std::to_string(r.max_runs) + ") before a fixpoint.";
  }
  if (r.result.stopped_by == "max_wall_time") return "The search stopped at its budget (--max-wall-time) before a fixpoint.";
  return "The search reached a fixpoint: no pass made it smaller.";
}

nlohmann::json sizes_json(const Sizes& s) {
  return {{"faults", s.faults},
          {"virtual_time_ms", s.virtual_time_ms ? nlohmann::json(*s.virtual_time_ms) : nlohmann::json(nullptr)},
          {"nodes", s.nodes},
          {"lines", s.lines},
          {"statements", s.statements}};
}

}  // namespace

namespace {

// `text` on one comment line: a line break would end the comment and start TOML.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

std::string shrunk_file_text(const ShrinkReport& r) {
  const Sizes& b = r.result.before;
  const Sizes& a = r.result.after;
  std::ostringstream out;
  out << "# Shrunk by `dagsim shrink " << r.original << " --seed " << r.seed << "` (deterministic): " << how(r.signature)
      << ".\n# Faults " << b.faults << " -> " << a.faults << ", virtual time " << ms_text(b.virtual_time_ms) << " -> "
      << ms_text(a.virtual_time_ms) << " ms, nodes " << b.nodes << " -> " << a.nodes << ", lines " << b.lines << " -> "
      << a.lines << ", runs " << r.result.runs << ".\n# " << stop_text(r) << "\n";
  if (!r.swarm_mix.empty()) out << "# The failing run's swarm mix (seed " << r.seed << "): " << one_line(r.swarm_mix) << "\n";
  out << "# Replay: dagsim run " << r.output << " --seed " << r.seed << "\n\n";
  out << r.result.text;
  return out.str();
}

std::string summary_text(const ShrinkReport& r) {
  const Sizes& b = r.result.before;
  const Sizes& a = r.result.after;
  std::ostringstream out;
  out << "shrunk " << r.original << " seed " << r.seed << ": " << how(r.signature) << "\n"
      << "  faults        " << b.faults << " -> " << a.faults << "\n"
      << "  virtual time  " << ms_text(b.virtual_time_ms) << " -> " << ms_text(a.virtual_time_ms) << " ms\n"
      << "  nodes         " << b.nodes << " -> " << a.nodes << "\n"
      << "  lines         " << b.lines << " -> " << a.lines << "\n"
      << "  statements    " << b.statements << " -> " << a.statements << "\n"
      << "  runs          " << r.result.runs << " (" << r.result.stopped_by << ")\n"
      << stop_text(r) << "\n"
      << "wrote " << r.output << "; replay: dagsim run " << r.output << " --seed " << r.seed << "\n";
  return out.str();
}

nlohmann::json summary_json(const ShrinkReport& r) {
  return {{"before", sizes_json(r.result.before)},
          {"after", sizes_json(r.result.after)},
          {"runs", r.result.runs},
          {"stopped_by", r.result.stopped_by},
          {"output", r.output},
          {"check", r.signature.check},
          {"failure", r.signature.describe()},
          {"seed", r.seed},
          {"replay", "dagsim run " + r.output + " --seed " + std::to_string(r.seed)}};
}

}  // namespace dagsim::shrink
