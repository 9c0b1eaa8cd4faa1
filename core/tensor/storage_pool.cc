// storage_pool.h: per-thread free lists keyed by exact size.
#include "core/tensor/storage_pool.h"

#include <map>
#include <new>
#include <vector>

#include "core/base/sanitizers.h"

namespace dagsim::storage_pool {

namespace {

constexpr std::align_val_t kAlignment{64};

struct Cache {
  std::map<size_t, std::vector<void*>> free;  // by exact size: a step asks for the same sizes
  Stats stats;

  ~Cache() { clear(); }
  void clear() {
    for (auto& [nbytes, blocks] : free) {
      for (void* block : blocks) ::operator delete(block, kAlignment);
    }
    free.clear();
    stats.cached_bytes = 0;
  }
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

}  // namespace

void* allocate(size_t nbytes) {
  Cache& c = cache();
  const auto it = c.free.find(nbytes);
  if (it != c.free.end() && !it->second.empty()) {
    void* block = it->second.back();
    it->second.pop_back();
    c.stats.cached_bytes -= nbytes;
    ++c.stats.hits;
    return block;
  }
  ++c.stats.misses;
  return ::operator new(nbytes, kAlignment);
}

void release(void* block, size_t nbytes) {
  Cache& c = cache();
  if (kAddressSanitizer || c.stats.cached_bytes + nbytes > kMaxCachedBytes) {
    ::operator delete(block, kAlignment);
    return;
  }
  c.free[nbytes].push_back(block);
  c.stats.cached_bytes += nbytes;
}

Stats stats() { return cache().stats; }

void trim() { cache().clear(); }

}  // namespace dagsim::storage_pool
