// ChunkedSortedMap and ChunkedSortedSet against std::map and std::set: every operation the
// rendezvous state uses, on random keys, with copies taken along the way that must never see a
// later write (the chunks are shared), and assign_sorted()'s sharing with a base.
#include "core/rendezvous/chunked_sorted.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "core/base/prng.h"

namespace dagsim::rendezvous {
namespace {

template <typename Chunks>
void expect_well_formed(const Chunks& chunks) {
  size_t total = 0;
  for (auto it = chunks.begin(); it != chunks.end(); ++it) ++total;
  EXPECT_EQ(total, chunks.size());
  EXPECT_LE(chunks.chunk_count(), chunks.size());  // no empty chunk
}

// Random inserts, overwrites through find() and operator[], and erasures, each checked against
// std::map; every 50 steps a copy is kept with the map it must still equal at the end.
TEST(ChunkedSortedMap, BehavesAsStdMapAndCopiesNeverSeeLaterWrites) {
  Prng rng(7);
  ChunkedSortedMap<uint64_t, uint64_t> ours;
  std::map<uint64_t, uint64_t> model;
  std::vector<std::pair<ChunkedSortedMap<uint64_t, uint64_t>, std::map<uint64_t, uint64_t>>> snapshots;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t key = rng.uniform_u64(3000);
    switch (rng.uniform_u64(5)) {
      case 0:
      case 1: {
        const auto [it, added] = ours.emplace(key, static_cast<uint64_t>(step));
        const auto [mit, madded] = model.emplace(key, static_cast<uint64_t>(step));
        ASSERT_EQ(added, madded);
        ASSERT_EQ(it->first, key);
        ASSERT_EQ(it->second, mit->second);
        break;
      }
      case 2:
        ours[key] = 1000000 + static_cast<uint64_t>(step);
        model[key] = 1000000 + static_cast<uint64_t>(step);
        break;
      case 3:
        ASSERT_EQ(ours.erase(key), model.erase(key));
        break;
      default:
        if (auto it = ours.find(key); it != ours.end()) {
          it->second += 1;
          model.at(key) += 1;
        } else {
          ASSERT_FALSE(model.contains(key));
        }
        break;
    }
    ASSERT_EQ(ours.size(), model.size());
    if (step % 50 == 0) snapshots.emplace_back(ours, model);
  }
  EXPECT_TRUE(ours == model);
  expect_well_formed(ours.chunks());
  for (const auto& [copy, then] : snapshots) {
    ASSERT_TRUE(copy == then) << "a copy saw a write made after it was taken";
    expect_well_formed(copy.chunks());
  }
  // Writing through a non-const iteration changes this map alone.
  ChunkedSortedMap<uint64_t, uint64_t> copy = ours;
  for (auto& [k, v] : ours) v = k;
  for (const auto& [k, v] : ours) ASSERT_EQ(v, k);
  EXPECT_TRUE(copy == model);
}

TEST(ChunkedSortedSet, BehavesAsStdSetAcrossChunkSplitsAndEmptiedChunks) {
  Prng rng(11);
  ChunkedSortedSet<uint64_t> ours;
  std::set<uint64_t> model;
  std::vector<std::pair<ChunkedSortedSet<uint64_t>, std::set<uint64_t>>> snapshots;
  // Grow to well past a chunk's split size, then shrink to nothing: chunks split and empty.
  for (int step = 0; step < 6000; ++step) {
    const uint64_t key = rng.uniform_u64(2000);
    if (step < 3000) {
      ASSERT_EQ(ours.insert(key).second, model.insert(key).second);
    } else {
      ASSERT_EQ(ours.erase(key), model.erase(key));
    }
    ASSERT_EQ(ours.contains(key), model.contains(key));
    if (step % 100 == 0) snapshots.emplace_back(ours, model);
  }
  for (const uint64_t key : std::set<uint64_t>(model)) ASSERT_EQ(ours.erase(key), 1u);
  EXPECT_TRUE(ours.empty());
  EXPECT_EQ(ours.begin(), ours.end());
  EXPECT_EQ(ours.chunks().chunk_count(), 0u);
  for (const auto& [copy, then] : snapshots) ASSERT_TRUE(copy == then);
}

// decode()'s case: the elements of a state one change away from a base share all of the base's
// chunks but the changed one, and equal the elements given, whatever was shared.
TEST(ChunkedSortedMap, AssignSortedSharesTheBaseChunksItRepeats) {
  ChunkedSortedMap<uint64_t, uint64_t> base;
  std::vector<std::pair<uint64_t, uint64_t>> items;
  for (uint64_t k = 0; k < 1000; ++k) items.emplace_back(2 * k, k);
  base.assign_sorted(std::vector(items), nullptr);
  ASSERT_EQ(base.chunks().chunk_count(), 1000 / kChunkTarget);  // cut fresh: 15 chunks, the last of 104
  // One insertion and one changed value.
  items.insert(items.begin() + 301, {601, 7});  // after 600
  items[900].second = 42;
  ChunkedSortedMap<uint64_t, uint64_t> next;
  next.assign_sorted(std::vector(items), &base);
  EXPECT_TRUE((next == std::map<uint64_t, uint64_t>(items.begin(), items.end())));
  EXPECT_EQ(next.chunks().shared_on_assign(), base.chunks().chunk_count() - 2);
  size_t shared = 0;
  for (size_t c = 0; c < next.chunks().chunk_count(); ++c) shared += next.chunks().chunk_shared(c) ? 1 : 0;
  EXPECT_EQ(shared, base.chunks().chunk_count() - 2);
  // A write to the new map leaves the base as it was.
  next.erase(0);
  next[2] = 99;
  EXPECT_EQ(base.size(), 1000u);
  EXPECT_EQ(base.at(2), 1u);
  EXPECT_FALSE(base.contains(601));
  // Nothing in common, and no base: nothing shared, the same elements.
  ChunkedSortedMap<uint64_t, uint64_t> other;
  std::vector<std::pair<uint64_t, uint64_t>> odd;
  for (uint64_t k = 0; k < 500; ++k) odd.emplace_back(2 * k + 1, k);
  other.assign_sorted(std::vector(odd), &base);
  EXPECT_EQ(other.chunks().shared_on_assign(), 0u);
  EXPECT_TRUE((other == std::map<uint64_t, uint64_t>(odd.begin(), odd.end())));
  expect_well_formed(other.chunks());
  // Assigning from itself as the base is a plain assignment.
  other.assign_sorted(std::vector(odd), &other);
  EXPECT_TRUE((other == std::map<uint64_t, uint64_t>(odd.begin(), odd.end())));
}

}  // namespace
}  // namespace dagsim::rendezvous
