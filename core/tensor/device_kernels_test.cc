// The host's row paths for take and index_add (run_lines_on_host) against the line functors
// they stand in for, which are what a GPU runs: the same bits for the same arguments, with
// repeated rows, empty destinations and sums whose order shows in the last bit.
#include "core/tensor/device_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/base/prng.h"
#include "core/tensor/line_kernels.h"

namespace dagsim {
namespace {

// `rows` rows of `inner` values whose magnitudes span 2^-20 to 2^20, so a sum of several of them
// rounds differently when added in another order.
template <typename T>
std::vector<T> spread_values(Prng& prng, int64_t rows, int64_t inner) {
  std::vector<T> v(static_cast<size_t>(rows * inner));
  for (T& x : v) x = static_cast<T>(prng.uniform(-1, 1) * std::ldexp(1.0, static_cast<int>(prng.uniform_int(-20, 20))));
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
void check_take_and_index_add(uint64_t seed) {
  Prng prng(seed);
  const int64_t inner = prng.uniform_int(1, 37), sources = prng.uniform_int(1, 50), picks = prng.uniform_int(1, 120);
  const std::vector<T> x = spread_values<T>(prng, sources, inner);

  // take: `picks` rows of x, repeats likely.
  std::vector<int64_t> rows(static_cast<size_t>(picks));
  for (int64_t& r : rows) r = prng.uniform_int(0, sources - 1);
  LineArgs take;
  take.x = x.data();
  take.index = rows.data();
  take.lines = picks * inner;
  take.inner = inner;
  std::vector<T> by_rows(static_cast<size_t>(picks * inner)), by_lines(by_rows.size());
  take.y = by_rows.data();
  run_lines_on_host(LineOp::take, dtype_of<T>(), take);
  take.y = by_lines.data();
  run_lines_host<T>(LineOp::take, take);
  EXPECT_TRUE(same_bits(by_rows, by_lines)) << "take, seed " << seed;

  // index_add: the picked rows of g added back into `sources` rows, grouped by destination as
  // index_ops.cc groups them (sources in order within a destination; some destinations empty).
  const std::vector<T> g = spread_values<T>(prng, picks, inner);
  std::vector<int64_t> starts(static_cast<size_t>(sources) + 1, 0), order;
  for (int64_t d = 0; d < sources; ++d) {
    for (int64_t k = 0; k < picks; ++k) {
      if (rows[static_cast<size_t>(k)] == d) order.push_back(k);
    }
    starts[static_cast<size_t>(d) + 1] = static_cast<int64_t>(order.size());
  }
  LineArgs add;
  add.x = g.data();
  add.index = order.data();
  add.starts = starts.data();
  add.lines = sources * inner;
  add.inner = inner;
  std::vector<T> added_by_rows(static_cast<size_t>(sources * inner), T{7}), added_by_lines(added_by_rows.size(), T{9});
  add.y = added_by_rows.data();
  run_lines_on_host(LineOp::index_add, dtype_of<T>(), add);
  add.y = added_by_lines.data();
  run_lines_host<T>(LineOp::index_add, add);
  EXPECT_TRUE(same_bits(added_by_rows, added_by_lines)) << "index_add, seed " << seed;
}

TEST(LineKernels, TheHostsRowPathsGiveTheBitsOfTheFunctorsAGpuRuns) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    check_take_and_index_add<float>(seed);
    check_take_and_index_add<double>(seed);
  }
}

}  // namespace
}  // namespace dagsim
