// The continuous draws of Prng. Compiled with -ffp-contract=off (core/CMakeLists.txt): defined in
// the header, `lo + (hi - lo) * u` could become a fused multiply-add in one includer and not in
// another, and a seed would no longer replay across machines.
#include "core/base/prng.h"

#include <cmath>

#include "core/base/prng_math.h"

namespace dagsim {

double Prng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform_double(); }

double Prng::normal(double mean, double stddev) {
  if (has_spare_) {
    has_spare_ = false;
    return mean + stddev * spare_;
  }
  double u1 = uniform_double();
  while (u1 <= 0.0) u1 = uniform_double();
  const double u2 = uniform_double();
  // std::sqrt is IEEE-754's square root, correctly rounded on every conforming machine (the
  // compiler emits the instruction); log, sin and cos are not, hence prng_math.
  const double radius = std::sqrt(-2.0 * prng_math::log(u1));
  const prng_math::SinCos angle = prng_math::sin_cos_turns(u2);
  spare_ = radius * angle.sin;
  has_spare_ = true;
  return mean + stddev * radius * angle.cos;
}

double Prng::exponential(double mean) {
  double u = uniform_double();
  while (u <= 0.0) u = uniform_double();
  return -mean * prng_math::log(u);
}

}  // namespace dagsim
