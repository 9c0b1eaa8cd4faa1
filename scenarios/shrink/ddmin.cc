// Delta debugging (ddmin.h).
#include "scenarios/shrink/ddmin.h"

#include <algorithm>
#include <set>

#include "core/base/assert.h"

namespace dagsim::shrink {
namespace {

// `keep` cut into `parts` chunks as even as they can be, in order.
std::vector<std::vector<size_t>> split(const std::vector<size_t>& keep, size_t parts) {
  DAGSIM_ASSERT(parts >= 1);
  DAGSIM_ASSERT(parts <= keep.size());
  std::vector<std::vector<size_t>> chunks(parts);
  for (size_t i = 0; i < keep.size(); ++i) chunks[i * parts / keep.size()].push_back(keep[i]);
  return chunks;
}

std::vector<size_t> without(const std::vector<size_t>& keep, const std::vector<size_t>& chunk) {
  std::vector<size_t> out;
  std::set_difference(keep.begin(), keep.end(), chunk.begin(), chunk.end(), std::back_inserter(out));
  return out;
}

}  // namespace

std::vector<size_t> ddmin(size_t n, const SubsetTest& test, const std::function<bool()>& stop) {
  std::vector<size_t> keep(n);
  for (size_t i = 0; i < n; ++i) keep[i] = i;
  if (n == 0) return keep;
  std::set<std::vector<size_t>> tried = {keep};
  // Tests a subset once; false for one tried before (it failed then, or it would be `keep`).
  auto holds = [&](const std::vector<size_t>& subset) {
    if (!tried.insert(subset).second) return false;
    return test(subset);
  };
  if (stop()) return keep;
  if (holds({})) return {};
  size_t granularity = 2;
  while (keep.size() >= 2 && !stop()) {
    granularity = std::min(granularity, keep.size());
    const std::vector<std::vector<size_t>> chunks = split(keep, granularity);
    bool reduced = false;
    for (const std::vector<size_t>& chunk : chunks) {
      if (stop()) return keep;
      if (holds(chunk)) {
        keep = chunk;
        granularity = 2;
        reduced = true;
        break;
      }
    }
    if (!reduced && granularity > 2) {
      for (const std::vector<size_t>& chunk : chunks) {
        if (stop()) return keep;
        std::vector<size_t> rest = without(keep, chunk);
        if (holds(rest)) {
          keep = std::move(rest);
          granularity = std::max<size_t>(granularity - 1, 2);
          reduced = true;
          break;
        }
      }
    }
    if (reduced) continue;
    if (granularity >= keep.size()) break;
    granularity = std::min(keep.size(), granularity * 2);
  }
  DAGSIM_ASSERT(keep.size() <= n);
  return keep;
}

}  // namespace dagsim::shrink
