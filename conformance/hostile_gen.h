// Hostile scenario files for the hostile-input suite (hostile_test.cc): syntax errors, wrong
// types, extreme numbers, unknown and duplicated keys, control characters, deep nesting, huge
// sizes, and mutations of every example in scenarios/examples. Generation is a pure function of
// (examples, seed, count), so a failing case replays from its name alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dagsim::conformance {

struct HostileCase {
  enum class Expect { invalid, valid, either };
  std::string name;  // unique, file-name safe: "mutate_retype_heartbeat_basic_17"
  std::string text;
  Expect expect = Expect::either;
  // When the file is refused, the message must contain this (a key path), if not empty.
  std::string key;
  // Whether the message carries a line ("FILE:LINE: ..."); false only for whole-file refusals.
  bool has_line = true;
};

// `count` cases: mutations of `examples` (file name, text) first, then the structural kinds in
// turn, each drawn from `seed`.
std::vector<HostileCase> hostile_cases(const std::vector<std::pair<std::string, std::string>>& examples,
                                       uint64_t seed, size_t count);

}  // namespace dagsim::conformance
