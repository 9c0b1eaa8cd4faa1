// `dagsim help` (scenarios/cli/help_command.h says what it promises).
#include "scenarios/cli/help_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>

#include "scenarios/cli/build_info.h"

namespace dagsim::cli {

namespace {

// One line each, short enough for an 80-column terminal beside the name. CLI11's descriptions
// are longer (they are the first line of `dagsim COMMAND --help`) and stay the reference.
const std::map<std::string, std::string>& summaries() {
  static const std::map<std::string, std::string> lines{
      {"run", "Run one scenario with one seed and report which checks passed"},
      {"judge", "Judge a run from its records, or a rendezvous from a store's record"},
      {"report", "Draw a run's records or a check sweep as one HTML page"},
      {"validate", "Check a scenario file without running it"},
      {"check", "Run many seeds of a scenario, each in its own process"},
      {"merge", "Report the shards of a check sweep as one sweep"},
      {"node", "Run one node of a TCP run on this host (started by dagsim run)"},
      {"store", "Serve the built-in store over PyTorch's TCPStore protocol"},
      {"credentials", "Make a run's CA and its nodes' certificates, for nodes started by hand"},
      {"launch", "torchrun's interface: run a training script's workers in an elastic job"},
      {"help", "List the commands, or show one command's flags"},
  };
  return lines;
}

}  // namespace

std::string command_summary(const std::string& name, const std::string& description) {
  const auto it = summaries().find(name);
  if (it != summaries().end()) return it->second;
  size_t end = description.size();
  for (const char* stop : {" (", "; ", ": ", ". "}) end = std::min(end, description.find(stop));
  return description.substr(0, end);
}

void print_command_list(const CLI::App& app, std::ostream& out) {
  out << version_line() << ": a deterministic simulator and conformance harness for distributed autograd and "
      << "elastic rendezvous\n\n"
      << "Usage: dagsim COMMAND [ARGS...]\n"
      << "       dagsim help COMMAND   (the same as dagsim COMMAND --help: the command's arguments and flags)\n\n"
      << "Commands:\n";
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  size_t width = 0;
  for (const CLI::App* command : commands) width = std::max(width, command->get_name().size());
  for (const CLI::App* command : commands) {
    const std::string& name = command->get_name();
    out << "  " << name << std::string(width + 2 - name.size(), ' ')
        << command_summary(name, command->get_description()) << "\n";
  }
  out << "\nExit codes: 0 passed, 1 a check failed, 2 bad usage or an invalid scenario, 3 an internal error, "
      << "4 a host limit.\n"
      << "docs/cli.md documents every command; docs/scenarios.md every scenario key.\n";
}

}  // namespace dagsim::cli
