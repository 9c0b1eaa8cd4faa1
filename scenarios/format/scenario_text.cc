// Bounded reading and the nesting pre-scan of a scenario's text (scenario_text.h).
#include "scenarios/format/scenario_text.h"


#include <cerrno>
#include <cstring>
#include <vector>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::scenarios::detail {
namespace {

// Closes the descriptor on every path out.
bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '+' || c == ':';  // numbers and times inside a chain ("1e+5", "12:00:00.5") only overcount
}

// The pre-scan: a small lexer that knows strings, comments, table headers and brackets, and
// nothing else of TOML. Depth = the current header's levels + every open bracket (each with the
// dots of the key that opened it) + the dots of the key chain being read.
class DepthScan {
 public:
  DepthScan(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  void run() {
    while (i_ < text_.size()) step();
  }

 private:
  void step() {
    const char c = text_[i_];
    if (c == '\n') {
      ++line_;
      ++i_;
      if (open_.empty()) chain_ = 0;
      line_start_ = true;
      return;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i_;
      return;
    }
    const bool at_line_start = line_start_;
    line_start_ = false;
    if (c == '#') {
      while (i_ < text_.size() && text_[i_] != '\n') ++i_;
      return;
    }
    if (c == '"' || c == '\'') {
      skip_string(c);
      return;
    }
    if (c == '[' && at_line_start && open_.empty()) {
      header();
      return;
    }
    ++i_;
    if (c == '.') {
      ++chain_;
      check();
    } else if (c == '[' || c == '{') {
      open_.push_back(chain_ + 1);
      depth_open_ += chain_ + 1;
      chain_ = 0;
      check();
    } else if (c == ']' || c == '}') {
      if (!open_.empty()) {
        depth_open_ -= open_.back();
        open_.pop_back();
      }
      chain_ = 0;
    } else if (!is_key_char(c) && c != '=') {
      chain_ = 0;  // ',' and anything else ends a key chain; '=' keeps it, counting the key's dots
    }
  }

  // "[a.b.c]" or "[[a.b]]": the levels every key below it starts from.
  void header() {
    int levels = 1;
    ++i_;
    if (i_ < text_.size() && text_[i_] == '[') {
      ++levels;  // an array of tables adds the array
      ++i_;
    }
    while (i_ < text_.size() && text_[i_] != ']' && text_[i_] != '\n') {
      const char c = text_[i_];
      if (c == '"' || c == '\'') {
        skip_string(c);
        continue;
      }
      if (c == '.') {
        ++levels;
        if (levels > kMaxNestingDepth) fail();
      }
      ++i_;
    }
    header_ = levels;
    chain_ = 0;
    check();
  }

  // A basic or literal string, single- or multi-line; lines inside are counted.
  void skip_string(char quote) {
    const bool multi = text_.substr(i_, 3) == std::string(3, quote);
    i_ += multi ? 3 : 1;
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '\\' && quote == '"') {
        if (i_ + 1 < text_.size() && text_[i_ + 1] == '\n') ++line_;
        i_ += 2;
        continue;
      }
      if (c == '\n') {
        if (!multi) return;  // an unterminated string: TOML reports it
        ++line_;
      }
      if (c == quote && (!multi || text_.substr(i_, 3) == std::string(3, quote))) {
        i_ += multi ? 3 : 1;
        return;
      }
      ++i_;
    }
  }

  void check() const {
    if (header_ + depth_open_ + chain_ > kMaxNestingDepth) fail();
  }

  [[noreturn]] void fail() const {
    throw errors::invalid_scenario(printable(source_, kPathMax) + ":" + std::to_string(line_) +
                                   ": invalid TOML: nested more than " + std::to_string(kMaxNestingDepth) +
                                   " levels deep (table headers, dotted keys, arrays and inline tables together)");
  }

  std::string_view text_;
  std::string_view source_;
  size_t i_ = 0;
  int line_ = 1;
  bool line_start_ = true;
  int header_ = 0;
  int chain_ = 0;
  int depth_open_ = 0;
  std::vector<int> open_;
};

}  // namespace

std::string read_bounded_text(const std::string& path) {
  return read_bounded_file(path, kMaxScenarioBytes, ErrorCode::invalid_scenario, "a scenario file");
}

void check_nesting_depth(std::string_view text, std::string_view source_name) { DepthScan(text, source_name).run(); }

}  // namespace dagsim::scenarios::detail
