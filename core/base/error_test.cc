// Tests of the error table, Error's text, and the id layout.
#include <gtest/gtest.h>

#include <set>

#include "core/base/error.h"
#include "core/base/ids.h"

namespace dagsim {
namespace {

TEST(Error, CarriesCodeDescriptionAndDetail) {
  Error e = errors::timed_out("rpc to worker1");
  EXPECT_EQ(e.code(), ErrorCode::timed_out);
  EXPECT_EQ(e.detail(), "rpc to worker1");
  EXPECT_STREQ(e.what(), "Operation timed out: rpc to worker1");
  EXPECT_STREQ(errors::node_killed().what(), "Node was killed");
}

TEST(Error, TableRoundTripsThroughIntegers) {
  EXPECT_EQ(error_name(ErrorCode::modified_by_inplace), "modified_by_inplace");
  EXPECT_EQ(error_code_from_int(1101), ErrorCode::node_killed);
  EXPECT_EQ(error_code_from_int(424242), std::nullopt);
  EXPECT_EQ(error_name(static_cast<ErrorCode>(424242)), "unknown_error");
}

TEST(Error, CodesAreUnique) {
  std::set<int> codes;
  size_t rows = 0;
#define DAGSIM_ERROR(name, code, description) \
  codes.insert(code);                         \
  ++rows;
#include "core/base/errors.def"
#undef DAGSIM_ERROR
  EXPECT_EQ(codes.size(), rows);
}

TEST(Error, IsErrorMatchesOnlyThatCode) {
  std::exception_ptr e = std::make_exception_ptr(errors::channel_closed());
  EXPECT_TRUE(is_error(e, ErrorCode::channel_closed));
  EXPECT_FALSE(is_error(e, ErrorCode::timed_out));
  EXPECT_FALSE(is_error(std::make_exception_ptr(std::runtime_error("x")), ErrorCode::timed_out));
  EXPECT_FALSE(is_error(nullptr, ErrorCode::timed_out));
}

TEST(Ids, LayoutIsWorkerIncarnationSequence) {
  IdGenerator gen(/*worker=*/3, /*incarnation=*/2);
  const uint64_t id = gen.next();
  EXPECT_EQ(worker_of(id), 3);
  EXPECT_EQ(incarnation_of(id), 2);
  EXPECT_EQ(sequence_of(id), 1u);
  EXPECT_EQ(id, (uint64_t{3} << 48) | (uint64_t{2} << 32) | 1);
  EXPECT_NE(id, 0u);
}

TEST(Ids, RestartedWorkerNeverReusesAnId) {
  std::set<uint64_t> seen;
  for (uint16_t incarnation = 0; incarnation < 3; ++incarnation) {
    IdGenerator gen(7, incarnation);  // each restart counts from 1 again, as PyTorch's would
    for (int i = 0; i < 100; ++i) EXPECT_TRUE(seen.insert(gen.next()).second);
  }
  IdGenerator other(8, 0);
  EXPECT_TRUE(seen.insert(other.next()).second);
}

TEST(AssertDeathTest, AssertEqPrintsBothSides) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(DAGSIM_ASSERT_EQ(1 + 1, 3), "left: 2, right: 3");
  EXPECT_DEATH(DAGSIM_UNREACHABLE(), "unreachable");
}

}  // namespace
}  // namespace dagsim
