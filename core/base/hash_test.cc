// hash.h: the dispatched XXH3-64 gives the plain function's value at every length and alignment
// (each of XXH3's size classes: 0, 1-3, 4-8, 9-16, 17-128, 129-240, then stripes and blocks with a
// partial last one), seeded and not; xxHash's published value for the empty input; and pinned
// values for long inputs. (On a CPU without AVX2 the dispatch runs the plain loop, and the first
// test compares it with itself; the pinned values still hold it.)
#include "core/base/hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <vector>

#include "core/base/prng.h"

namespace dagsim {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  Prng prng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(prng.uniform_int(0, 255));
  return bytes;
}

TEST(Hash, DispatchedXxh3GivesThePlainFunctionsValueAtEveryLengthAndAlignment) {
  const std::vector<uint8_t> bytes = random_bytes((size_t{1} << 20) + 64, 7);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (size_t n = 301; n < 20000; n = n * 5 / 4 + 1) lengths.push_back(n);
  lengths.push_back(size_t{1} << 20);
  int checked = 0;
  for (const size_t n : lengths) {
    for (const size_t offset : {0, 1, 7, 33}) {
      const std::span<const uint8_t> piece(bytes.data() + offset, n);
      ASSERT_EQ(xxh3_64(piece), XXH3_64bits(piece.data(), piece.size())) << n << " bytes at offset " << offset;
      const uint64_t seed = 0x9e3779b97f4a7c15ULL * (n + 1);
      ASSERT_EQ(xxh3_64(piece, seed), XXH3_64bits_withSeed(piece.data(), piece.size(), seed))
          << n << " bytes at offset " << offset << ", seeded";
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(Hash, EmptyInputHashesToXxHashsPublishedValue) {
  EXPECT_EQ(xxh3_64({}), 0x2D06800538D394C2ULL);
  EXPECT_EQ(xxh3_64({}, 0), 0x2D06800538D394C2ULL);
}

// Pinned values for long inputs (stripes, blocks and a partial last block), taken from libxxhash
// 0.8.1's plain functions when this test was written: frame checksums and trace digests must not
// change with the library's build or the CPU's vector unit, or old traces and peers disagree.
TEST(Hash, LongInputsKeepTheirPinnedValues) {
  std::vector<uint8_t> bytes((size_t{1} << 20) + 13);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::span<const uint8_t> all(bytes);
  EXPECT_EQ(xxh3_64(all.first(1000)), 0x571D5CBFEF44331BULL);
  EXPECT_EQ(xxh3_64(all.subspan(13, 1000), 42), 0x0288BCBF08BE5275ULL);
  EXPECT_EQ(xxh3_64(all.first(size_t{1} << 20)), 0x6F7C82505FFBC516ULL);
  EXPECT_EQ(xxh3_64(all.subspan(13, size_t{1} << 20), 42), 0x122CF671D821B770ULL);
}

}  // namespace
}  // namespace dagsim
