// The hostile scenario generator (hostile_gen.h). Mutations work on lines: the examples are
// written one key per line, so a `key = scalar` line can be deleted, duplicated, retyped or given
// an extreme value, and its key path ("faults[1].at_ms") is known from the headers above it.
#include "conformance/hostile_gen.h"

// libstdc++ 12's <regex> trips -Wmaybe-uninitialized inside std::function at -O1 (the sanitizer
// tier's level): a false positive in the library's own code, silenced for this file only.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <array>
#include <regex>
#include <sstream>

#include "core/base/prng.h"

namespace dagsim::conformance {
namespace {

using Expect = HostileCase::Expect;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

template <typename T, size_t N>
const T& pick(Prng& random, const std::array<T, N>& options) {
  return options[random.uniform_u64(N)];
}

// A `key = scalar` line and where it sits.
struct KeyLine {
  size_t index;
  std::string key_path;  // "heartbeat.interval_ms", "faults[0].node"
  std::string table;     // "heartbeat", "faults[0]", "" at the top
  char kind;             // 's' string, 'n' number, 'b' boolean
};

std::vector<KeyLine> key_lines(const std::vector<std::string>& lines) {
  static const std::regex kHeader(R"(^\s*(\[\[?)\s*([A-Za-z0-9_.-]+)\s*\]\]?\s*(#.*)?$)");
  static const std::regex kKey(R"(^\s*([A-Za-z0-9_-]+)\s*=\s*(.*?)\s*(#.*)?$)");
  std::vector<KeyLine> out;
  std::string table;
  std::vector<std::pair<std::string, int>> array_counts;
  int open_brackets = 0;  // inside a multi-line array: not a key line
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (open_brackets == 0 && std::regex_match(lines[i], m, kHeader)) {
      table = m[2];
      if (m[1] == "[[") {
        int k = 0;
        for (auto& [name, count] : array_counts) {
          if (name == table) k = ++count;
        }
        if (k == 0) array_counts.emplace_back(table, 0);
        table += "[" + std::to_string(k) + "]";
      }
      continue;
    }
    // Brackets outside comments and strings (approximately: up to the first '#', skipping quotes).
    bool in_string = false;
    for (char c : lines[i]) {
      if (c == '"') in_string = !in_string;
      if (in_string) continue;
      if (c == '#') break;
      open_brackets += (c == '[' || c == '{') - (c == ']' || c == '}');
    }
    if (open_brackets != 0 || !std::regex_match(lines[i], m, kKey)) continue;
    const std::string value = m[2];
    if (value.empty() || value[0] == '[' || value[0] == '{') continue;
    const char kind = value[0] == '"' || value[0] == '\'' ? 's' : (value == "true" || value == "false") ? 'b' : 'n';
    out.push_back({i, table.empty() ? std::string(m[1]) : table + "." + std::string(m[1]), table, kind});
  }
  return out;
}

std::string with_value(const std::string& line, const std::string& value) {
  return line.substr(0, line.find('=') + 1) + " " + value;
}

HostileCase mutate(const std::string& example, const std::string& text, Prng& random, size_t n) {
  std::vector<std::string> lines = lines_of(text);
  std::vector<KeyLine> keys = key_lines(lines);
  if (keys.empty()) keys.push_back({0, "name", "", 's'});  // every example starts with its name
  const KeyLine& at = keys[random.uniform_u64(keys.size())];
  HostileCase c;
  const std::string stem = example.substr(0, example.find('.'));
  auto named = [&](const std::string& kind) { c.name = "mutate_" + kind + "_" + stem + "_" + std::to_string(n); };
  switch (random.uniform_u64(6)) {
    case 0:
      named("delete");
      lines.erase(lines.begin() + static_cast<long>(at.index));
      break;
    case 1:
      named("duplicate");
      lines.insert(lines.begin() + static_cast<long>(at.index), lines[at.index]);
      c.expect = Expect::invalid;  // a key defined twice is invalid TOML
      break;
    case 2: {
      named("retype");
      static constexpr std::array<const char*, 4> kNotString = {"42", "true", "[1, 2]", "1979-05-27T07:32:00Z"};
      static constexpr std::array<const char*, 4> kNotNumber = {"\"12\"", "true", "[1]", "{ a = 1 }"};
      static constexpr std::array<const char*, 3> kNotBoolean = {"1", "\"true\"", "[true]"};
      const char* value = at.kind == 's' ? pick(random, kNotString) : at.kind == 'n' ? pick(random, kNotNumber)
                                                                                       : pick(random, kNotBoolean);
      lines[at.index] = with_value(lines[at.index], value);
      c.expect = Expect::invalid;
      c.key = at.key_path;
      break;
    }
    case 3: {
      named("extreme");
      static constexpr std::array<const char*, 14> kExtremes = {
          "0",    "-1",   "9223372036854775807", "-9223372036854775808", "1e19", "1e300", "-1e300",
          "5e-324", "nan", "inf", "-inf", "0.5", "4294967296", "1e9"};
      lines[at.index] = with_value(lines[at.index], pick(random, kExtremes));
      break;
    }
    case 4: {
      named("control");
      static constexpr std::array<const char*, 4> kHostile = {
          R"("\u001b[2J\u001b[31mred")", R"("two\nlines")", R"("nul\u0000byte\ttab")", R"("key: value")"};
      lines[at.index] = with_value(lines[at.index], pick(random, kHostile));
      c.key = at.key_path;  // when refused, the message names the key
      break;
    }
    default: {
      named("unknown");
      const std::string key = "bogus_" + std::to_string(random.uniform_u64(1000));
      lines.insert(lines.begin() + static_cast<long>(at.index) + 1, key + " = 1");
      c.expect = Expect::invalid;
      c.key = at.table.empty() ? key : at.table + "." + key;
      break;
    }
  }
  c.text = join(lines);
  return c;
}

constexpr std::string_view kSmall = "name = \"h\"\n[heartbeat]\nduration_ms = 500\n";

HostileCase structural(const std::vector<std::pair<std::string, std::string>>& examples, Prng& random, size_t n) {
  HostileCase c;
  c.expect = Expect::invalid;
  const std::string suffix = "_" + std::to_string(n);
  switch (random.uniform_u64(5)) {
    case 0: {  // a syntax error inserted into an example
      static constexpr std::array<const char*, 10> kGarbage = {
          "= 1", "[", "a = \"unterminated", "[[x]", "a = 1 2", "b = [1,", "\x1b[2J = 1", "c = 0x", "d = 1__0",
          "e = \"bad \x01 char\""};
      const auto& [name, text] = examples[random.uniform_u64(examples.size())];
      std::vector<std::string> lines = lines_of(text);
      lines.insert(lines.begin() + static_cast<long>(random.uniform_u64(lines.size() + 1)), pick(random, kGarbage));
      c.name = "syntax" + suffix;
      c.text = join(lines);
      break;
    }
    case 1: {  // deep nesting, past the pre-scan's limit
      const size_t depth = 129 + random.uniform_u64(random.uniform_u64(2) == 0 ? 1000 : 100'000);
      std::string chain = "a";
      for (size_t i = 0; i < depth; ++i) chain += ".a";
      switch (random.uniform_u64(4)) {
        case 0: c.text = std::string(kSmall) + chain + " = 1\n"; break;
        case 1: c.text = std::string(kSmall) + "[" + chain + "]\n"; break;
        case 2: c.text = std::string(kSmall) + "[[" + chain + "]]\n"; break;
        default: {
          std::string nested = "x = ";
          for (size_t i = 0; i < depth / 2; ++i) nested += "{ a.b = ";
          c.text = std::string(kSmall) + nested + "1" + std::string(depth / 2, '}') + "\n";
        }
      }
      c.name = "deep" + suffix;
      break;
    }
    case 2: {  // a key too long to echo
      const std::string key(1000 + random.uniform_u64(1'000'000), 'k');
      c.text = std::string(kSmall) + key + " = 1\n";
      c.name = "long_key" + suffix;
      c.key = "heartbeat.\"kkkkk";
      break;
    }
    case 3: {  // keys that a careless message would print ambiguously or raw
      static constexpr std::array<const char*, 4> kKeys = {R"("a: b")", R"("line\nbreak")", R"("\u001b[2J")",
                                                           R"("dot.ted")"};
      static constexpr std::array<const char*, 4> kShown = {R"("a: b")", R"("line\nbreak")", R"("\u001b[2J")",
                                                            R"("dot.ted")"};
      const size_t i = random.uniform_u64(kKeys.size());
      c.text = std::string(kKeys[i]) + " = 1\n" + std::string(kSmall);
      c.name = "odd_key" + suffix;
      c.key = kShown[i];
      break;
    }
    default: {  // wrong top-level types for every table the format knows
      static constexpr std::array<const char*, 6> kTables = {"cluster", "network", "random_faults", "faults", "checks",
                                                             "heartbeat"};
      const char* table = pick(random, kTables);
      c.text = "name = \"h\"\n" + std::string(table) + " = 7\n" +
               (std::string(table) == "heartbeat" ? "" : "[heartbeat]\nduration_ms = 500\n");
      c.name = "wrong_table_type" + suffix;
      c.key = table;
      break;
    }
  }
  return c;
}

}  // namespace

std::vector<HostileCase> hostile_cases(const std::vector<std::pair<std::string, std::string>>& examples,
                                       uint64_t seed, size_t count) {
  Prng random(seed);
  std::vector<HostileCase> out;
  // One file over the size limit (sparse in spirit: a comment), then the drawn cases.
  HostileCase huge;
  huge.name = "huge_file";
  huge.text = std::string(kSmall) + "# " + std::string((4u << 20) + 1, 'x') + "\n";
  huge.expect = Expect::invalid;
  huge.has_line = false;
  out.push_back(std::move(huge));
  for (size_t n = 0; out.size() < count; ++n) {
    if (n % 3 != 2) {
      const auto& [name, text] = examples[n % examples.size()];
      out.push_back(mutate(name, text, random, n));
    } else {
      out.push_back(structural(examples, random, n));
    }
  }
  return out;
}

}  // namespace dagsim::conformance
