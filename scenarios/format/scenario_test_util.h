// Test helper shared by the loader's tests: the message a malformed scenario is rejected with.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "core/base/error.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/workloads/heartbeat/heartbeat_spec.h"
#include "scenarios/workloads/program/model_spec.h"
#include "scenarios/workloads/program/program_workload.h"

namespace dagsim::scenarios {

// The detail of the invalid_scenario error that parsing `text` as "bad.toml" throws.
inline std::string error_of(std::string_view text) {
  try {
    parse_scenario(text, "bad.toml");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_scenario) << e.what();
    return e.detail();
  }
  return "no error";
}

}  // namespace dagsim::scenarios
