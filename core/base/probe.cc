#include "core/base/probe.h"

#include <algorithm>
#include <cstring>

#include "core/base/assert.h"

namespace dagsim::probe {
namespace {

// Binary search in the sorted table; kProbeCount when absent.
std::size_t find(const char* name) {
  std::size_t lo = 0;
  std::size_t hi = detail::kProbeCount;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const int order = std::strcmp(detail::kProbeNames[mid], name);
    if (order == 0) return mid;
    if (order < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return detail::kProbeCount;
}

}  // namespace

std::vector<std::string> all_probe_names() {
  std::vector<std::string> names;
  names.reserve(detail::kProbeCount);
  for (std::size_t i = 0; i < detail::kProbeCount; ++i) names.emplace_back(detail::kProbeNames[i]);
  DAGSIM_ASSERT(std::is_sorted(names.begin(), names.end()));
  return names;
}

void reset() {
  for (std::size_t i = 0; i < detail::kProbeCount; ++i) {
    detail::g_probe_counts[i].store(0, std::memory_order_relaxed);
  }
}

std::map<std::string, uint64_t> snapshot() {
  std::map<std::string, uint64_t> hits;
  for (std::size_t i = 0; i < detail::kProbeCount; ++i) {
    const uint64_t n = detail::g_probe_counts[i].load(std::memory_order_relaxed);
    if (n > 0) hits.emplace(detail::kProbeNames[i], n);
  }
  return hits;
}

uint64_t count(const std::string& name) {
  const std::size_t index = find(name.c_str());
  if (index == detail::kProbeCount) return 0;
  return detail::g_probe_counts[index].load(std::memory_order_relaxed);
}

namespace detail {

std::size_t site_index(const char* name, const char* file, int line) {
  const std::size_t index = find(name);
  DAGSIM_ASSERT_MSG(index < kProbeCount,
                    std::string("probe \"") + name + "\" at " + file + ":" + std::to_string(line) +
                        " is not in the build's probe table (cmake/DagsimProbeTable.cmake scans "
                        "core/ net/ launch/ scenarios/ sim/, tests excepted; rebuild)");
  return index;
}

}  // namespace detail
}  // namespace dagsim::probe
