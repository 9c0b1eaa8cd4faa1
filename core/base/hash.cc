// hash.h: XXH3-64 through xxHash's runtime dispatch on x86-64; its plain functions elsewhere (the
// dispatch exists only for x86).
#include "core/base/hash.h"

#include <xxhash.h>
#if defined(__x86_64__)
#define XXH_DISPATCH_DISABLE_REPLACE 1  // call the _dispatch functions by name below
#include <xxh_x86dispatch.h>
#endif

namespace dagsim {

uint64_t xxh3_64(std::span<const uint8_t> bytes) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(bytes.data(), bytes.size());
#else
  return XXH3_64bits(bytes.data(), bytes.size());
#endif
}

uint64_t xxh3_64(std::span<const uint8_t> bytes, uint64_t seed) {
#if defined(__x86_64__)
  return XXH3_64bits_withSeed_dispatch(bytes.data(), bytes.size(), seed);
#else
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
#endif
}

}  // namespace dagsim
