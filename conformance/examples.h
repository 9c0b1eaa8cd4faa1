// The text of an example scenario (scenarios/examples/NAME), for suites that run or vary the
// examples. REQUIRES: the test target defines DAGSIM_EXAMPLES (the examples' folder).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace dagsim::testing {

inline std::string example_text(const std::string& name) {
  std::ifstream in(std::string(DAGSIM_EXAMPLES) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

}  // namespace dagsim::testing
