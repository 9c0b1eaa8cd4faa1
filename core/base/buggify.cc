#include "core/base/buggify.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "core/base/assert.h"
#include "core/base/hash.h"

namespace dagsim::buggify {
namespace {

// Mixed into the run's seed so no point's stream is ever one of the simulator's (Prng::fork of the
// seed with small stream numbers) or the fault schedule's.
constexpr uint64_t kBuggifyDomain = 0xb0991f7a5eedULL;

thread_local Context* t_context = nullptr;

}  // namespace

std::vector<std::string> all_point_names() {
  std::vector<std::string> names;
  names.reserve(detail::kPointCount);
  for (std::size_t i = 0; i < detail::kPointCount; ++i) names.emplace_back(detail::kPointNames[i]);
  DAGSIM_ASSERT(std::is_sorted(names.begin(), names.end()));
  return names;
}

Prng point_stream(uint64_t seed, const std::string& name) {
  const uint64_t name_hash =
      xxh3_64(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(name.data()), name.size()));
  uint64_t mixed = seed ^ kBuggifyDomain;
  const uint64_t base = splitmix64(mixed);
  return Prng(base).fork(name_hash);
}

Context::Context(uint64_t seed, const Settings& settings) : fire_probability_(settings.fire_probability) {
  DAGSIM_ASSERT(settings.enable_probability >= 0 && settings.enable_probability <= 1);
  DAGSIM_ASSERT(settings.fire_probability >= 0 && settings.fire_probability <= 1);
  points_.resize(detail::kPointCount);
  std::vector<bool> candidate(detail::kPointCount, settings.points.empty());
  for (const std::string& name : settings.points) {
    const std::size_t index = detail::find(name);
    DAGSIM_ASSERT_MSG(index < detail::kPointCount, "buggify point \"" + name + "\" is not in the build");
    candidate[index] = true;
  }
  std::vector<bool> chosen(detail::kPointCount, false);
  if (settings.enabled) {
    for (const std::string& name : *settings.enabled) {
      const std::size_t index = detail::find(name);
      DAGSIM_ASSERT_MSG(index < detail::kPointCount && candidate[index],
                        "buggify point \"" + name + "\" is enabled but not a candidate");
      chosen[index] = true;
    }
  }
  for (std::size_t i = 0; i < detail::kPointCount; ++i) {
    Point& point = points_[i];
    point.stream = point_stream(seed, detail::kPointNames[i]);
    // The enable draw is taken whether or not it is used, so a point's fire draws are the same
    // stream positions with and without the swarm.
    const bool drawn = point.stream.bernoulli(settings.enable_probability);
    point.enabled = candidate[i] && (settings.enabled ? chosen[i] : drawn);
  }
}

bool Context::fire(std::size_t index) {
  DAGSIM_ASSERT(index < points_.size());
  Point& point = points_[index];
  if (!point.enabled) return false;
  if (!point.stream.bernoulli(fire_probability_)) return false;
  ++point.fired;
  return true;
}

std::vector<std::string> Context::enabled_points() const {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    if (points_[i].enabled) names.emplace_back(detail::kPointNames[i]);
  }
  return names;
}

std::map<std::string, uint64_t> Context::fired() const {
  std::map<std::string, uint64_t> out;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    if (points_[i].fired > 0) out.emplace(detail::kPointNames[i], points_[i].fired);
  }
  return out;
}

uint64_t Context::fired(const std::string& name) const {
  const std::size_t index = detail::find(name);
  return index < points_.size() ? points_[index].fired : 0;
}

ScopedContext::ScopedContext(Context& context) : previous_(t_context) { t_context = &context; }

ScopedContext::~ScopedContext() { t_context = previous_; }

namespace detail {

Context* current() { return t_context; }

std::size_t find(const std::string& name) {
  const char* const* begin = kPointNames;
  const char* const* end = kPointNames + kPointCount;
  const char* const* it =
      std::lower_bound(begin, end, name, [](const char* a, const std::string& b) { return std::strcmp(a, b.c_str()) < 0; });
  if (it == end || name != *it) return kPointCount;
  return static_cast<std::size_t>(it - begin);
}

std::size_t site_index(const char* name, const char* file, int line) {
  const std::size_t index = find(name);
  DAGSIM_ASSERT_MSG(index < kPointCount,
                    std::string("buggify point \"") + name + "\" at " + file + ":" + std::to_string(line) +
                        " is not in the build's table (cmake/DagsimProbeTable.cmake; rebuild)");
  return index;
}

}  // namespace detail
}  // namespace dagsim::buggify
