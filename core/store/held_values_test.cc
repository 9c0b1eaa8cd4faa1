// HeldValues: equal values share one copy, unequal ones never do, and nothing outlives its holders.
#include "core/store/held_values.h"

#include <gtest/gtest.h>

#include <vector>

namespace dagsim::store {
namespace {

Versioned value_of(uint8_t fill, uint64_t version) { return {Bytes(4096, fill), version}; }

TEST(HeldValues, EqualValuesShareOneCopy) {
  HeldValues table;
  const auto a = table.intern(value_of(1, 7));
  const auto b = table.intern(value_of(1, 7));
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(table.live(), 1u);
}

TEST(HeldValues, ValuesThatDifferInBytesOrVersionAreNeverShared) {
  HeldValues table;
  const auto a = table.intern(value_of(1, 7));
  const auto other_bytes = table.intern(value_of(2, 7));  // another store's key at the same version
  const auto other_version = table.intern(value_of(1, 8));
  EXPECT_NE(a.get(), other_bytes.get());
  EXPECT_NE(a.get(), other_version.get());
  EXPECT_EQ(other_bytes->value, Bytes(4096, 2));
  EXPECT_EQ(other_version->version, 8u);
  EXPECT_EQ(table.live(), 3u);
}

TEST(HeldValues, AValueLivesOnlyWhileAClientHoldsIt) {
  HeldValues table;
  std::vector<std::shared_ptr<const Versioned>> held;
  for (uint64_t v = 1; v <= 500; ++v) held.push_back(table.intern(value_of(static_cast<uint8_t>(v), v)));
  EXPECT_EQ(table.live(), 500u);
  std::weak_ptr<const Versioned> first = held.front();
  held.clear();
  EXPECT_TRUE(first.expired());
  EXPECT_EQ(table.live(), 0u);
  // A value interned after its equal was released is a fresh copy with the same bytes.
  const auto again = table.intern(value_of(1, 1));
  EXPECT_EQ(again->value, Bytes(4096, 1));
  EXPECT_EQ(table.live(), 1u);
}

}  // namespace
}  // namespace dagsim::store
