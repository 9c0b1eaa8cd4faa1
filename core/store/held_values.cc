#include "core/store/held_values.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/hash.h"

namespace dagsim::store {

std::shared_ptr<const Versioned> HeldValues::intern(const Versioned& value) {
  const std::pair<uint64_t, uint64_t> key{value.version, xxh3_64(value.value)};
  const auto [begin, end] = entries_.equal_range(key);
  for (auto it = begin; it != end; ++it) {
    std::shared_ptr<const Versioned> held = it->second.lock();
    if (held && held->version == value.version && held->value == value.value) return held;
  }
  auto shared = std::make_shared<const Versioned>(value);
  entries_.emplace(key, shared);
  if (entries_.size() >= purge_at_) {
    drop_expired();
    // Purge again when the table has doubled past what is live: amortised O(1) per intern.
    purge_at_ = std::max<size_t>(64, 2 * entries_.size());
  }
  return shared;
}

void HeldValues::drop_expired() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second.expired() ? entries_.erase(it) : std::next(it);
  }
}

size_t HeldValues::live() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return !e.second.expired(); }));
}

HeldValues& HeldValues::for_this_thread() {
  thread_local HeldValues table;
  return table;
}

}  // namespace dagsim::store
