// The integer rule of add() (store_integer.h) against the answers of PyTorch 1.13.1's own server,
// measured with conformance/interop/tcpstore_diff.py: the stored text as std::stoll reads it, and
// the sum wrapping at 2^63.
#include "core/store/store_integer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/base/throws_error_test_util.h"

namespace dagsim::store {
namespace {

int64_t read(const std::string& text) {
  return stored_integer("k", {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

TEST(StoredInteger, ReadsTheLeadingNumberAsStollDoes) {
  EXPECT_EQ(read("42"), 42);
  EXPECT_EQ(read("-42"), -42);
  EXPECT_EQ(read("3abc"), 3);
  EXPECT_EQ(read(" 5"), 5);
  EXPECT_EQ(read("+5"), 5);
  EXPECT_EQ(read("0x10"), 0);
  EXPECT_EQ(read("5\n"), 5);
  EXPECT_EQ(read(" -7x"), -7);
  EXPECT_EQ(read("\t\n\v\f\r 8"), 8);
  EXPECT_EQ(read("007"), 7);
  EXPECT_EQ(read("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(read("-9223372036854775808"), std::numeric_limits<int64_t>::min());
}

TEST(StoredInteger, TextWithoutALeadingNumberOrPastInt64IsRefusedNamingTheKey) {
  const std::vector<std::string> no_integer = {"", "abc", "-", "+", "- 5", "+-5", " ", "\x01" "5", std::string("\0" "5", 2)};
  for (const std::string& text : no_integer) {
    EXPECT_TRUE(throws_error([&] { read(text); }, ErrorCode::invalid_argument, {"key k", "does not hold an integer"}))
        << "text of " << text.size() << " bytes";
  }
  for (const char* text : {"9223372036854775808", "-9223372036854775809", "99999999999999999999"}) {
    EXPECT_TRUE(throws_error([&] { read(text); }, ErrorCode::invalid_argument, {"key k", "outside int64"})) << text;
  }
}

TEST(WrappingAdd, WrapsAt2To63AsPyTorchsSumDoes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(wrapping_add(2, 3), 5);
  EXPECT_EQ(wrapping_add(kMax, 1), kMin);
  EXPECT_EQ(wrapping_add(kMin, -1), kMax);
  EXPECT_EQ(wrapping_add(kMax, kMax), -2);
  EXPECT_EQ(wrapping_add(kMin, kMin), 0);
}

}  // namespace
}  // namespace dagsim::store
