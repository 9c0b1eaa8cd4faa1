// `dagsim help`: every command with one line on what it does, in the order `dagsim --help` lists
// them. `dagsim help COMMAND` is `dagsim COMMAND --help` (main.cc turns the one into the other
// before parsing, so a command with a parser of its own, such as launch, answers both the same).
//
// The list's shape is a contract with three readers: the docs-drift test (it must equal
// docs/cli.md's command table) and the bash and zsh completions (scripts/completion/), which read
// the names from it. Each command is one line: two spaces, the name, spaces, the summary.
#pragma once

#include <ostream>
#include <string>

namespace CLI {
class App;
}

namespace dagsim::cli {

// The summary `dagsim help` prints for a command: its own short line, or else the first clause
// of CLI11's description (a command added without a summary still shows, with the start of its
// description).
std::string command_summary(const std::string& name, const std::string& description);

void print_command_list(const CLI::App& app, std::ostream& out);

}  // namespace dagsim::cli
