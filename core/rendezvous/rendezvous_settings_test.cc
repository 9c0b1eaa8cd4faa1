// RendezvousSettings: PyTorch's defaults, and validate() refusing what PyTorch refuses, in its
// words (shared/reference/rendezvous.md §1 "Types and settings", "Validation").
#include "core/rendezvous/rendezvous_test_util.h"
#include "core/rendezvous/rendezvous_settings.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/base/throws_error_test_util.h"

namespace dagsim::rendezvous {
namespace {

using namespace testing;

using std::chrono::nanoseconds;
using std::chrono::seconds;

// Reference §1 "Types and settings": join 600 s, last_call 30 s, close 30 s, heartbeat 5 s,
// keep-alive 5 s x 3, so a node is dead after more than 15 s; re-rendezvous on by default
// (issue 11 item 4).
TEST(RendezvousSettings, DefaultsArePyTorchs) {
  const RendezvousSettings s = settings(1, 1);
  EXPECT_EQ(s.timeout.join, seconds(600));
  EXPECT_EQ(s.timeout.last_call, seconds(30));
  EXPECT_EQ(s.timeout.close, seconds(30));
  EXPECT_EQ(s.timeout.heartbeat, seconds(5));
  EXPECT_EQ(s.keep_alive_interval, seconds(5));
  EXPECT_EQ(s.keep_alive_max_attempt, 3u);
  EXPECT_EQ(s.expiry(), seconds(15));
  EXPECT_EQ(kRollbackPeriod, seconds(5));
  EXPECT_TRUE(s.rerendezvous_on_expiry);
  EXPECT_NO_THROW(validate(s));
}

// Reference §1 "Validation" and RendezvousTimeout: PyTorch's refusals, in PyTorch's words.
TEST(RendezvousSettings, ValidateRefusesWhatPyTorchRefuses) {
  RendezvousSettings s = settings(1, 1);
  s.run_id = "";
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"run id"}));
  s = settings(0, 1);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument,
                           {"The minimum number of nodes (0) must be greater than zero."}));
  s = settings(3, 2);
  EXPECT_TRUE(throws_error(
      [&] { validate(s); }, ErrorCode::invalid_argument,
      {"The maximum number of nodes (2) must be greater than or equal to the minimum number of nodes (3)."}));
  s = settings(1, kMaxRendezvousNodes + 1);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"must be at most 65536"}));
  s = settings(1, 1);
  s.timeout.join = seconds(0);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument,
                           {"The join timeout (0s) must be positive."}));
  s = settings(1, 1);
  s.timeout.last_call = -seconds(1);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"last call timeout (-1s)"}));
  s = settings(1, 1);
  s.timeout.close = seconds(0);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"close timeout"}));
  s = settings(1, 1);
  s.timeout.heartbeat = std::chrono::milliseconds(-250);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"heartbeat timeout (-250ms)"}));
  s = settings(1, 1);
  s.keep_alive_interval = seconds(0);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"keep-alive interval (0s)"}));
  s = settings(1, 1);
  s.keep_alive_max_attempt = 0;
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"max attempt (0)"}));
  s = settings(1, 1);
  s.keep_alive_interval = nanoseconds(std::numeric_limits<int64_t>::max() / 2);
  EXPECT_TRUE(throws_error([&] { validate(s); }, ErrorCode::invalid_argument, {"too long"}));
}

TEST(RendezvousSettings, DescribeIsExact) {
  EXPECT_EQ(describe(seconds(600)), "600s");
  EXPECT_EQ(describe(std::chrono::milliseconds(1500)), "1500ms");
  EXPECT_EQ(describe(nanoseconds(7)), "7ns");
}

}  // namespace
}  // namespace dagsim::rendezvous
