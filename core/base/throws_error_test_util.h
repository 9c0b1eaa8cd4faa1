// throws_error: a GoogleTest predicate for the error contract (tests only; not installed).
// Passes when `f` throws a dagsim::Error with `code` whose what() contains every fragment, so a
// test pins both the code a caller reacts to and the words a person reads.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/error.h"

namespace dagsim {

template <typename F>
::testing::AssertionResult throws_error(F&& f, ErrorCode code,
                                        const std::vector<std::string>& fragments = {}) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() != code) {
      return ::testing::AssertionFailure() << "code " << error_name(e.code()) << ", expected "
                                           << error_name(code) << ": " << e.what();
    }
    for (const std::string& fragment : fragments) {
      if (std::string(e.what()).find(fragment) == std::string::npos) {
        return ::testing::AssertionFailure() << "'" << fragment << "' not in: " << e.what();
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no dagsim::Error thrown";
}

}  // namespace dagsim
