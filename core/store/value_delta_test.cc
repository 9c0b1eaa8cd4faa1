// Tests of value deltas (value_delta.h): applying make_delta(base, target) to base gives target
// for any two values (generated: records inserted, removed and rewritten, as a rendezvous state
// changes, and unrelated random bytes); the edits a join or a heartbeat makes cost bytes in
// proportion to the edit, not to the value; and a delta that does not fit its base, or states a
// length it does not build, is refused with protocol_error naming the field.
#include "core/store/value_delta.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/base/prng.h"
#include "core/base/throws_error_test_util.h"
#include "core/rpc/wire.h"

namespace dagsim::store {
namespace {

using runtime::Bytes;

constexpr size_t kLimit = size_t{16} << 20;

// A state-like value: `n` records (a name, two numbers), sorted by name.
Bytes records(const std::vector<uint32_t>& ids, uint64_t stamp = 7) {
  Bytes out;
  rpc::WireWriter w(out);
  w.u32(static_cast<uint32_t>(ids.size()));
  for (const uint32_t id : ids) {
    w.string("node" + std::to_string(id));
    w.u64(id);
    w.u64(stamp);
  }
  return out;
}

Bytes round_trip(const Bytes& base, const Bytes& target) { return apply_delta(base, *make_delta(base, target), kLimit); }

TEST(ValueDelta, RoundTripsTheEdgeCases) {
  const Bytes some = records({1, 2, 3});
  for (const auto& [base, target] : std::vector<std::pair<Bytes, Bytes>>{
           {{}, {}}, {{}, some}, {some, {}}, {some, some}, {Bytes(3, 1), Bytes(5, 1)}, {Bytes(40, 9), Bytes(17, 9)}}) {
    EXPECT_EQ(round_trip(base, target), target) << base.size() << " -> " << target.size();
  }
  // Nothing changed: a length and one copy (op, offset 0, length), a byte each.
  EXPECT_EQ(make_delta(some, some)->size(), 4u);
}

TEST(ValueDelta, AJoinOrAHeartbeatCostsTheEditNotTheValue) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 1000; i += 2) ids.push_back(i);
  const Bytes before = records(ids);
  ASSERT_GT(before.size(), 13000u);

  std::vector<uint32_t> joined = ids;
  joined.insert(joined.begin() + 250, 501);  // one record in the middle
  const Bytes after_join = records(joined);
  const Bytes join = *make_delta(before, after_join);
  EXPECT_EQ(apply_delta(before, join, kLimit), after_join);
  EXPECT_LT(join.size(), 60u);

  std::vector<uint32_t> left = ids;
  left.erase(left.begin() + 100);
  const Bytes leave = *make_delta(before, records(left));
  EXPECT_EQ(apply_delta(before, leave, kLimit), records(left));
  EXPECT_LT(leave.size(), 20u);

  // Every record's stamp rewritten (completion assigning every rank): a few bytes per record.
  const Bytes stamped = records(ids, 8);
  const Bytes all = *make_delta(before, stamped);
  EXPECT_EQ(apply_delta(before, all, kLimit), stamped);
  EXPECT_LT(all.size(), ids.size() * 8);
}

TEST(ValueDelta, GeneratedEditsAlwaysRoundTrip) {
  Prng prng(25);
  for (int c = 0; c < 300; ++c) {
    std::vector<uint32_t> ids;
    const uint64_t n = prng.uniform_u64(200);
    for (uint32_t i = 0; i < n; ++i) ids.push_back(static_cast<uint32_t>(prng.uniform_u64(100000)));
    std::sort(ids.begin(), ids.end());
    Bytes base = records(ids);
    Bytes target = base;
    const uint64_t edits = prng.uniform_u64(12);
    for (uint64_t e = 0; e < edits; ++e) {
      const size_t at = static_cast<size_t>(prng.uniform_u64(target.size() + 1));
      const size_t len = static_cast<size_t>(prng.uniform_u64(c % 3 == 0 ? 600 : 40));
      switch (prng.uniform_u64(3)) {
        case 0:  // insert
          for (size_t k = 0; k < len; ++k) target.insert(target.begin() + static_cast<ptrdiff_t>(at), static_cast<uint8_t>(prng.next_u64()));
          break;
        case 1:  // erase
          target.erase(target.begin() + static_cast<ptrdiff_t>(at),
                       target.begin() + static_cast<ptrdiff_t>(std::min(target.size(), at + len)));
          break;
        default:  // overwrite
          for (size_t k = at; k < std::min(target.size(), at + len); ++k) target[k] = static_cast<uint8_t>(prng.next_u64());
      }
    }
    if (c % 10 == 0) std::swap(base, target);
    ASSERT_EQ(round_trip(base, target), target) << "case " << c;
    // Never much longer than the value itself: a length and literal bytes at worst, plus the ops
    // of the parts that did line up.
    EXPECT_LE(make_delta(base, target)->size(), target.size() + 8 + 16 * (2 * edits + 1)) << "case " << c;
  }
  // Unrelated bytes: all literal.
  Bytes a(5000);
  Bytes b(5000);
  for (auto& x : a) x = static_cast<uint8_t>(prng.next_u64());
  for (auto& x : b) x = static_cast<uint8_t>(prng.next_u64());
  EXPECT_EQ(round_trip(a, b), b);
  EXPECT_EQ(make_delta(a, b)->size(), 2u + 3u + b.size());
  // Under a limit it stops: unrelated bytes never fit half their size.
  EXPECT_FALSE(make_delta(a, b, b.size() / 2).has_value());
  EXPECT_TRUE(make_delta(a, a, 8).has_value());
}

TEST(ValueDelta, ADeltaThatDoesNotFitItsBaseIsRefusedNamingTheField) {
  const Bytes base = records({1, 2, 3});  // 79 bytes
  ASSERT_EQ(base.size(), 79u);
  // Every number below is under 128: one varint byte each. Ops: 1 copy (offset as zigzag), 2 add.
  auto refused = [&](const Bytes& delta, const std::string& fragment, size_t limit = kLimit) {
    return throws_error([&] { apply_delta(base, delta, limit); }, ErrorCode::protocol_error, {fragment});
  };
  EXPECT_TRUE(refused({}, "store delta.length"));
  EXPECT_TRUE(refused({10, 1, 0, 11}, "store delta.copy.length: 11 bytes past the stated 10"));
  EXPECT_TRUE(refused({100, 1, 80, 60}, "store delta.copy: bytes 40+60 of a base of 79"));
  EXPECT_TRUE(refused({10, 1, 1, 4}, "store delta.copy: bytes -1+4 of a base of 79"));
  EXPECT_TRUE(refused({10, 2, 10, 1, 2}, "store delta.add.bytes"));
  EXPECT_TRUE(refused({10, 7}, "store delta.op: 7"));
  EXPECT_TRUE(refused({10, 1, 0, 4}, "build 4 bytes, 10 stated"));
  EXPECT_TRUE(refused({10}, "store delta.length: 10 bytes exceeds the limit of 9", 9));
  EXPECT_TRUE(refused({10, 1, 0}, "store delta.copy.length"));
  EXPECT_TRUE(refused(Bytes(11, 0xff), "longer than ten bytes"));
  // Well formed, the same shapes are accepted: 10 bytes from 0, then 2 literal bytes.
  Bytes expected(12, 5);
  std::copy(base.begin(), base.begin() + 10, expected.begin());
  expected[11] = 6;
  EXPECT_EQ(apply_delta(base, Bytes{12, 1, 0, 10, 2, 2, 5, 6}, kLimit), expected);
}

}  // namespace
}  // namespace dagsim::store
