// The docs cannot drift from the binary. docs/scenarios.md documents every key the loader accepts
// (scenario_keys.h lists them where the loader checks them) in the section for its table, and no
// key the loader refuses; docs/cli.md documents every command and every flag `dagsim --help`
// lists, and no flag that does not exist; every docs/ file a help text names exists.
// A failure names the file, the section and the key or flag, and says which way it drifted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "scenarios/format/scenario_keys.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/workloads/registry.h"

namespace dagsim {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(DAGSIM_CONFORMANCE).parent_path();

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// One Markdown section: its heading's title and level, and its lines up to the next heading of
// the same or a higher level (its subsections included). Headings inside ``` fences are text.
struct Section {
  std::string title;
  int level = 0;
  std::vector<std::string> lines;
};

std::vector<Section> sections_of(const std::string& markdown) {
  const std::vector<std::string> lines = lines_of(markdown);
  std::vector<std::pair<size_t, Section>> headings;
  bool fenced = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || lines[i].empty() || lines[i][0] != '#') continue;
    const size_t level = lines[i].find_first_not_of('#');
    if (level == std::string::npos || lines[i][level] != ' ') continue;
    headings.push_back({i, Section{lines[i].substr(level + 1), static_cast<int>(level), {}}});
  }
  std::vector<Section> out;
  for (size_t h = 0; h < headings.size(); ++h) {
    Section section = headings[h].second;
    size_t end = lines.size();
    for (size_t next = h + 1; next < headings.size(); ++next) {
      if (headings[next].second.level <= section.level) {
        end = headings[next].first;
        break;
      }
    }
    section.lines.assign(lines.begin() + static_cast<long>(headings[h].first) + 1, lines.begin() + static_cast<long>(end));
    out.push_back(std::move(section));
  }
  return out;
}

// The section documenting `name`: its title is the name, or the name and then a space.
const Section* find_section(const std::vector<Section>& sections, std::string_view name) {
  for (const Section& s : sections) {
    if (s.title == name || (s.title.size() > name.size() && s.title.compare(0, name.size(), name) == 0 &&
                            s.title[name.size()] == ' ')) {
      return &s;
    }
  }
  return nullptr;
}

// A backticked span as the key it names: `[cluster]` -> cluster, `[[network.links]]` -> links,
// `min_us = 3` -> min_us, `"uniform"` -> "uniform" (not a key; harmless).
std::string key_of_span(std::string span) {
  while (!span.empty() && span.front() == '[') span.erase(span.begin());
  const size_t end = span.find_first_of("]= ");
  if (end != std::string::npos) span.resize(end);
  const size_t dot = span.rfind('.');
  return dot == std::string::npos ? span : span.substr(dot + 1);
}

// Every key a section names in backticks: a span's own key, and each `key =` of an inline table
// written out in a span (`{ out = N, activation = "tanh" }` names out and activation).
std::set<std::string> keys_mentioned(const Section& section) {
  std::set<std::string> keys;
  static const std::regex span("`([^`]+)`");
  static const std::regex assignment(R"(([A-Za-z_][A-Za-z0-9_]*)\s*=)");
  for (const std::string& line : section.lines) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), span); it != std::sregex_iterator(); ++it) {
      const std::string text = (*it)[1].str();
      keys.insert(key_of_span(text));
      for (auto a = std::sregex_iterator(text.begin(), text.end(), assignment); a != std::sregex_iterator(); ++a) {
        keys.insert((*a)[1].str());
      }
    }
  }
  return keys;
}

// The keys in the first column of the section's own key tables (header `| key | ...`), with the
// line each is on, stopping at its first subsection (whose tables are its own).
std::vector<std::pair<std::string, std::string>> keys_in_tables(const Section& section) {
  std::vector<std::pair<std::string, std::string>> keys;
  static const std::regex row(R"(^\| `([^`]+)`)");
  bool in_key_table = false;
  for (const std::string& line : section.lines) {
    if (!line.empty() && line[0] == '#') break;
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower.rfind("| key |", 0) == 0) {
      in_key_table = true;
      continue;
    }
    if (line.empty() || line[0] != '|') {
      in_key_table = false;
      continue;
    }
    std::smatch m;
    if (in_key_table && std::regex_search(line, m, row)) keys.push_back({key_of_span(m[1].str()), line});
  }
  return keys;
}

// What the loader accepts, by docs section: every registered key set, and at the top level also
// each workload's own tables.
std::map<std::string, std::set<std::string>> accepted_by_section() {
  std::map<std::string, std::set<std::string>> accepted;
  for (const scenarios::KeySet& set : scenarios::scenario_key_sets()) {
    accepted[std::string(set.section)].insert(set.keys.begin(), set.keys.end());
  }
  for (const scenarios::WorkloadType* type : scenarios::workload_types()) {
    accepted["Top level"].insert(type->keys.begin(), type->keys.end());
  }
  return accepted;
}

// The registry is the loader's own list: the loader's "allowed keys" for an unknown key in
// [cluster] and in [[faults]] of kind "pause" are the registered sets, in order. (This also links
// the loader's files in, whose registrations the other tests read.)
TEST(DocsDrift, TheRegisteredKeysAreTheListsTheLoaderChecks) {
  auto allowed = [](const std::string& text) {
    try {
      scenarios::parse_scenario(text, "probe.toml");
    } catch (const Error& e) {
      const std::string detail = e.detail();
      const size_t colon = detail.rfind(": ");
      return detail.substr(colon + 2);
    }
    return std::string("(no error)");
  };
  auto joined = [](std::string_view section, std::string_view variant) {
    for (const scenarios::KeySet& set : scenarios::scenario_key_sets()) {
      if (set.section != section || set.variant != variant || !set.table.empty()) continue;
      std::string out;
      for (std::string_view key : set.keys) out += (out.empty() ? "" : ", ") + std::string(key);
      return out;
    }
    return std::string("(not registered)");
  };
  const std::string base = "name = \"probe\"\n[heartbeat]\nduration_ms = 100\n";
  EXPECT_EQ(allowed(base + "[cluster]\nzz_probe = 1\n"), joined("[cluster]", ""));
  EXPECT_EQ(allowed(base + "[[faults]]\nat_ms = 1\nkind = \"pause\"\nnode = \"worker1\"\nzz_probe = 1\n"),
            joined("[[faults]]", "kind \"pause\""));
}

TEST(DocsDrift, EveryKeyTheLoaderAcceptsIsDocumentedInItsSection) {
  const std::vector<Section> sections = sections_of(slurp(kRoot / "docs" / "scenarios.md"));
  ASSERT_GT(sections.size(), 10u) << "docs/scenarios.md is missing or has no sections";
  const std::vector<scenarios::KeySet> sets = scenarios::scenario_key_sets();
  ASSERT_GE(sets.size(), 20u) << "the loader registered too few key sets: a loader file lost its registration";
  for (const scenarios::KeySet& set : sets) {
    const Section* section = find_section(sections, set.section);
    ASSERT_NE(section, nullptr) << "docs/scenarios.md has no section \"" << set.section << "\"";
    const std::set<std::string> mentioned = keys_mentioned(*section);
    for (std::string_view key : set.keys) {
      EXPECT_TRUE(mentioned.count(std::string(key)))
          << "docs/scenarios.md, section \"" << set.section << "\": the loader accepts `" << key << "`"
          << (set.table.empty() ? "" : " in " + std::string(set.table))
          << (set.variant.empty() ? "" : " for " + std::string(set.variant)) << ", and the section never names it";
    }
  }
  const std::map<std::string, std::set<std::string>> accepted = accepted_by_section();
  const Section* top = find_section(sections, "Top level");
  ASSERT_NE(top, nullptr);
  const std::set<std::string> mentioned = keys_mentioned(*top);
  for (const std::string& key : accepted.at("Top level")) {
    EXPECT_TRUE(mentioned.count(key)) << "docs/scenarios.md, section \"Top level\": the loader accepts `" << key
                                      << "` at the top level, and the section never names it";
  }
}

TEST(DocsDrift, NoKeyTableDocumentsAKeyTheLoaderRefuses) {
  const std::vector<Section> sections = sections_of(slurp(kRoot / "docs" / "scenarios.md"));
  const std::map<std::string, std::set<std::string>> accepted = accepted_by_section();
  size_t rows = 0;
  for (const Section& section : sections) {
    const auto documented = keys_in_tables(section);
    if (documented.empty()) continue;
    const std::set<std::string>* keys = nullptr;
    for (const auto& [name, set] : accepted) {
      if (find_section(sections, name) == &section) keys = &set;
    }
    ASSERT_NE(keys, nullptr) << "docs/scenarios.md, section \"" << section.title
                             << "\" has a key table, but the loader registers no keys for it";
    for (const auto& [key, line] : documented) {
      ++rows;
      EXPECT_TRUE(keys->count(key)) << "docs/scenarios.md, section \"" << section.title << "\" documents `" << key
                                    << "`, which the loader does not accept there:\n  " << line;
    }
  }
  EXPECT_GT(rows, 50u) << "too few documented keys found: has the tables' format changed?";
}

// ---- The command line ---------------------------------------------------------------------

struct Help {
  int exit_code = -1;
  std::string text;
};

Help run(const std::string& args) {
  Help out;
  FILE* pipe = popen((std::string(DAGSIM_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.text.append(buffer, n);
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::vector<std::string> subcommands() {
  const Help help = run("--help");
  EXPECT_EQ(help.exit_code, 0) << help.text;
  std::vector<std::string> names;
  bool listing = false;
  for (const std::string& line : lines_of(help.text)) {
    if (line == "Subcommands:") {
      listing = true;
      continue;
    }
    if (listing && line.size() > 2 && line[0] == ' ' && line[2] != ' ') names.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  return names;
}

// Each flag of `dagsim COMMAND` as its aliases ({"--nproc-per-node", "--nproc_per_node"}).
std::vector<std::vector<std::string>> flags_of(const std::string& command, std::string* help_text) {
  const Help help = run(command + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.text;
  *help_text = help.text;
  std::vector<std::vector<std::string>> flags;
  for (const std::string& line : lines_of(help.text)) {
    if (line.rfind("  -", 0) != 0) continue;
    std::string names = line.substr(2, line.find(' ', 2) - 2);
    std::vector<std::string> aliases;
    std::istringstream parts(names);
    for (std::string alias; std::getline(parts, alias, ',');) {
      alias = alias.substr(0, alias.find('{'));  // CLI11 shows a negated flag's default: --no-x{false}
      if (alias.rfind("--", 0) == 0 && alias != "--help") aliases.push_back(alias);
    }
    if (!aliases.empty()) flags.push_back(aliases);
  }
  return flags;
}

std::set<std::string> long_flags_in(const std::vector<std::string>& lines) {
  std::set<std::string> flags;
  static const std::regex flag(R"((^|[^-\w])(--[a-z][a-z0-9_-]*[a-z0-9]))");
  for (const std::string& line : lines) {
    for (auto it = std::sregex_iterator(line.begin(), line.end(), flag); it != std::sregex_iterator(); ++it) {
      flags.insert((*it)[2].str());
    }
  }
  return flags;
}

// The synopsis block's lines for `command`: its `dagsim COMMAND ...` line and the indented
// continuation lines under it.
std::vector<std::string> synopsis_of(const std::vector<std::string>& cli_md, const std::string& command) {
  std::vector<std::string> out;
  bool fenced = false, mine = false;
  for (const std::string& line : cli_md) {
    if (line.rfind("```", 0) == 0) {
      if (fenced && !out.empty()) break;  // the first block that has it is the synopsis
      fenced = !fenced;
      continue;
    }
    if (!fenced) continue;
    if (line.rfind("dagsim ", 0) == 0) mine = line.rfind("dagsim " + command + " ", 0) == 0 || line == "dagsim " + command;
    else if (line.empty() || line[0] != ' ') mine = false;
    if (mine) out.push_back(line);
  }
  return out;
}

TEST(DocsDrift, EveryCommandAndFlagIsInCliMdAndNothingElse) {
  const std::string cli_text = slurp(kRoot / "docs" / "cli.md");
  ASSERT_FALSE(cli_text.empty()) << "docs/cli.md is missing";
  const std::vector<std::string> cli_md = lines_of(cli_text);
  const std::vector<Section> sections = sections_of(cli_text);
  const std::vector<std::string> commands = subcommands();
  ASSERT_GE(commands.size(), 7u);
  std::set<std::string> every_flag;
  std::map<std::string, std::vector<std::vector<std::string>>> flags;
  std::string all_help;
  for (const std::string& command : commands) {
    std::string help;
    flags[command] = flags_of(command, &help);
    all_help += help;
    for (const auto& aliases : flags[command]) every_flag.insert(aliases.begin(), aliases.end());
  }
  for (const std::string& command : commands) {
    SCOPED_TRACE("dagsim " + command);
    const std::vector<std::string> synopsis = synopsis_of(cli_md, command);
    EXPECT_FALSE(synopsis.empty()) << "docs/cli.md: the synopsis at the top has no `dagsim " << command << "` line";
    const Section* section = find_section(sections, "`dagsim " + command + "`");
    EXPECT_NE(section, nullptr) << "docs/cli.md has no section \"## `dagsim " << command << "`\"";
    std::vector<std::string> documented_lines = synopsis;
    if (section != nullptr) documented_lines.insert(documented_lines.end(), section->lines.begin(), section->lines.end());
    const std::set<std::string> documented = long_flags_in(documented_lines);
    for (const auto& aliases : flags[command]) {
      const bool found = std::any_of(aliases.begin(), aliases.end(), [&](const std::string& a) { return documented.count(a) > 0; });
      EXPECT_TRUE(found) << "docs/cli.md: `dagsim " << command << "` takes " << aliases.front()
                         << ", and neither its synopsis line nor its section names it";
    }
    // The synopsis line is the command's own: each flag on it must be one the command takes.
    for (const std::string& flag : long_flags_in(synopsis)) {
      const bool exists = std::any_of(flags[command].begin(), flags[command].end(), [&](const auto& aliases) {
        return std::find(aliases.begin(), aliases.end(), flag) != aliases.end();
      });
      EXPECT_TRUE(exists) << "docs/cli.md's synopsis shows `dagsim " << command << " " << flag
                          << "`, which `dagsim " << command << " --help` does not list";
    }
  }
  // Anywhere in cli.md, a flag must exist on some command, except in a paragraph that says what
  // is "Not yet" supported (torchrun's flags dagsim launch does not take, named as such).
  std::vector<std::string> outside_not_yet;
  bool not_yet = false;
  for (const std::string& line : cli_md) {
    if (line.rfind("Not yet:", 0) == 0) not_yet = true;
    if (line.empty()) not_yet = false;
    if (!not_yet) outside_not_yet.push_back(line);
  }
  for (const std::string& flag : long_flags_in(outside_not_yet)) {
    if (flag == "--help" || flag == "--version") continue;
    EXPECT_TRUE(every_flag.count(flag)) << "docs/cli.md names " << flag << ", which no dagsim command takes";
  }
  // Every docs/ file a help text points at exists.
  static const std::regex doc(R"(docs/[A-Za-z0-9_.-]+\.md)");
  for (auto it = std::sregex_iterator(all_help.begin(), all_help.end(), doc); it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(fs::exists(kRoot / it->str())) << "a help text points at " << it->str() << ", which does not exist";
  }
}

}  // namespace
}  // namespace dagsim
