// The docs cannot drift from the binary or the tree. docs/scenarios.md documents every key the
// loader accepts (scenario_keys.h lists them where the loader checks them) in the section for its
// table, and no key the loader refuses; docs/cli.md documents every command and every flag
// `dagsim --help` lists, and no flag that does not exist; every docs/ file a help text names
// exists; `dagsim help` lists the commands docs/cli.md's command table lists, with the same lines,
// and `dagsim help COMMAND` is `dagsim COMMAND --help`; README.md's layout block names only folders
// that exist, and every top-level folder of the tree.
// A failure names the file, the section and the key, flag or folder, and says which way it drifted.
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

// Each flag of `dagsim COMMAND` as its aliases ({"--nproc-per-node", "--nproc_per_node"}). A flag
// line starts with two spaces and a dash; its spellings are joined by ",", ", " (CLI11: "-o,--output",
// torchrun's "-r, --redirects") or "/" (launch's "--log_dir/--log-dir").
std::vector<std::vector<std::string>> flags_of(const std::string& command, std::string* help_text) {
  const Help help = run(command + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.text;
  *help_text = help.text;
  std::vector<std::vector<std::string>> flags;
  for (const std::string& line : lines_of(help.text)) {
    if (line.rfind("  -", 0) != 0) continue;
    std::vector<std::string> aliases;
    size_t at = 2;
    while (at < line.size() && line[at] == '-') {
      const size_t end = std::min(line.find(' ', at), line.size());
      std::string names = line.substr(at, end - at);
      std::replace(names.begin(), names.end(), '/', ',');
      std::istringstream parts(names);
      for (std::string alias; std::getline(parts, alias, ',');) {
        alias = alias.substr(0, alias.find('{'));  // CLI11 shows a negated flag's default: --no-x{false}
        if (alias.rfind("--", 0) == 0 && alias != "--help") aliases.push_back(alias);
      }
      // "-r, --redirects": the next spelling follows one space after a comma.
      if (names.empty() || names.back() != ',' || end + 1 >= line.size() || line[end + 1] != '-') break;
      at = end + 1;
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

// ---- dagsim help ---------------------------------------------------------------------------

// `dagsim help`'s command list: each line under "Commands:" is two spaces, the name, two or more
// spaces and the summary (scenarios/cli/help_command.h).
std::vector<std::pair<std::string, std::string>> help_command_list() {
  const Help help = run("help");
  EXPECT_EQ(help.exit_code, 0) << help.text;
  std::vector<std::pair<std::string, std::string>> out;
  static const std::regex entry(R"(^  ([a-z][a-z0-9-]*)  +(\S.*)$)");
  bool listing = false;
  for (const std::string& line : lines_of(help.text)) {
    if (line == "Commands:") listing = true;
    else if (line.empty()) listing = false;
    std::smatch m;
    if (listing && std::regex_match(line, m, entry)) out.push_back({m[1].str(), m[2].str()});
  }
  return out;
}

TEST(DocsDrift, DagsimHelpListsTheCommandsAsCliMdsCommandTableDoes) {
  const std::vector<std::pair<std::string, std::string>> listed = help_command_list();
  std::vector<std::string> names;
  for (const auto& [name, summary] : listed) names.push_back(name);
  EXPECT_EQ(names, subcommands()) << "`dagsim help` and `dagsim --help` list different commands";

  const std::vector<Section> sections = sections_of(slurp(kRoot / "docs" / "cli.md"));
  const Section* table = find_section(sections, "Commands");
  ASSERT_NE(table, nullptr) << "docs/cli.md has no section \"## Commands\"";
  std::map<std::string, std::string> documented;
  static const std::regex row(R"(^\| `([a-z][a-z0-9-]*)` \| (.*\S) *\|$)");
  for (const std::string& line : table->lines) {
    std::smatch m;
    if (std::regex_match(line, m, row)) documented[m[1].str()] = m[2].str();
  }
  for (const auto& [name, summary] : listed) {
    const auto it = documented.find(name);
    if (it == documented.end()) {
      ADD_FAILURE() << "docs/cli.md's command table leaves out `" << name << "`, which `dagsim help` lists";
      continue;
    }
    EXPECT_EQ(it->second, summary) << "docs/cli.md's command table says of `" << name << "` what `dagsim help` does not";
  }
  for (const auto& [name, summary] : documented) {
    EXPECT_TRUE(std::any_of(listed.begin(), listed.end(), [&](const auto& entry) { return entry.first == name; }))
        << "docs/cli.md's command table lists `" << name << "`, which `dagsim help` does not";
  }
}

TEST(DocsDrift, DagsimHelpCommandIsTheCommandsOwnHelp) {
  const std::vector<std::string> commands = subcommands();
  std::string joined;
  for (const std::string& command : commands) joined += (joined.empty() ? "" : ", ") + command;
  for (const std::string& command : commands) {
    if (command == "help") continue;  // `dagsim help help` is `dagsim help --help`, a different text
    const Help via_help = run("help " + command);
    const Help own = run(command + " --help");
    EXPECT_EQ(via_help.exit_code, 0) << "dagsim help " << command << ":\n" << via_help.text;
    EXPECT_EQ(via_help.text, own.text) << "`dagsim help " << command << "` is not `dagsim " << command << " --help`";
  }
  const Help unknown = run("help frobnicate");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.text;
  EXPECT_EQ(unknown.text, "dagsim help: unknown command \"frobnicate\"; commands: " + joined + "\n");
  const Help version = run("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(std::regex_match(version.text, std::regex(R"(dagsim \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown), .+\)\n)")))
      << "dagsim --version: " << version.text;
}

// ---- README's layout block ----------------------------------------------------------------

// A folder that holds a file somewhere below it (an empty folder left behind is not part of the
// tree git would check out).
bool holds_a_file(const fs::path& folder) {
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (entry.is_regular_file()) return true;
  }
  return false;
}

// The tree's folders as the layout block describes them: the top-level ones (not hidden, not a
// build folder) and each one's subfolders.
std::map<std::string, std::set<std::string>> tree_folders() {
  std::map<std::string, std::set<std::string>> tree;
  for (const auto& top : fs::directory_iterator(kRoot)) {
    const std::string name = top.path().filename().string();
    if (!top.is_directory() || name[0] == '.' || name.rfind("build", 0) == 0 || !holds_a_file(top.path())) continue;
    std::set<std::string>& subs = tree[name];
    for (const auto& sub : fs::directory_iterator(top.path())) {
      if (sub.is_directory() && holds_a_file(sub.path())) subs.insert(sub.path().filename().string());
    }
  }
  return tree;
}

TEST(DocsDrift, ReadmesLayoutBlockIsTheTree) {
  const std::vector<Section> sections = sections_of(slurp(kRoot / "README.md"));
  const Section* layout = find_section(sections, "Layout");
  ASSERT_NE(layout, nullptr) << "README.md has no section \"## Layout\"";
  // The fenced block's folders: "name/" first on a line is a top-level folder, indented by two
  // spaces a subfolder of the top-level folder above it.
  std::map<std::string, std::set<std::string>> named;
  std::string top;
  bool fenced = false;
  static const std::regex folder(R"(^(  )?([A-Za-z0-9_.-]+)/(\s|$))");
  for (const std::string& line : layout->lines) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    std::smatch m;
    if (!fenced || !std::regex_search(line, m, folder)) continue;
    if (!m[1].matched) {
      top = m[2].str();
      named[top];
      EXPECT_TRUE(fs::is_directory(kRoot / top)) << "README.md's layout names " << top << "/, which does not exist";
    } else {
      ASSERT_FALSE(top.empty()) << "README.md's layout block starts with an indented line: " << line;
      named[top].insert(m[2].str());
      EXPECT_TRUE(fs::is_directory(kRoot / top / m[2].str()))
          << "README.md's layout names " << top << "/" << m[2].str() << "/, which does not exist";
    }
  }
  ASSERT_GE(named.size(), 8u) << "README.md's layout block names too few folders: has its format changed?";
  for (const auto& [name, subs] : tree_folders()) {
    const auto it = named.find(name);
    if (it == named.end()) {
      ADD_FAILURE() << "the tree has " << name << "/, which README.md's layout block does not name";
      continue;
    }
    // A folder whose subfolders the block lists must list them all.
    if (it->second.empty()) continue;
    for (const std::string& sub : subs) {
      EXPECT_TRUE(it->second.count(sub)) << "the tree has " << name << "/" << sub
                                         << "/, which README.md's layout block does not name under " << name << "/";
    }
  }
}

}  // namespace
}  // namespace dagsim
