// Prng: the one pseudo-random generator of dagsim (xoshiro256**, seeded through splitmix64).
// Every range mapping is written here, never taken from <random>'s distributions, whose output is
// implementation-defined: the same seed gives the same numbers with any compiler, standard
// library and C library, which is what lets a failing seed replay anywhere. The continuous draws
// (uniform, normal, exponential) are defined out of line in prng.cc, which is compiled without
// floating-point contraction, and take their log, sin and cos from prng_math.h rather than libm.
#pragma once

#include <cstdint>

#include "core/base/assert.h"

namespace dagsim {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Prng {
 public:
  explicit Prng(uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t& word : state_) word = splitmix64(s);
  }

  // An independent stream derived from this generator's seed material and `stream`, without
  // advancing this one: node 3's stream does not change when node 2 draws more numbers.
  Prng fork(uint64_t stream) const {
    uint64_t s = state_[0] ^ (stream * 0xd1342543de82ef95ULL) ^ state_[3];
    return Prng(splitmix64(s));
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, bound), without modulo bias (Lemire's multiply-and-reject).
  // REQUIRES: bound > 0.
  uint64_t uniform_u64(uint64_t bound) {
    DAGSIM_ASSERT(bound > 0);
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform in [lo, hi]. REQUIRES: lo <= hi.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    DAGSIM_ASSERT(lo <= hi);
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (span == UINT64_MAX) return static_cast<int64_t>(next_u64());
    return lo + static_cast<int64_t>(uniform_u64(span + 1));
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform in [lo, hi).
  double uniform(double lo, double hi);

  // True with probability p.
  bool bernoulli(double p) { return uniform_double() < p; }

  // Normal by Box-Muller; both values of a pair are used.
  double normal(double mean = 0.0, double stddev = 1.0);

  // Exponential with the given mean.
  double exponential(double mean);

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace dagsim
