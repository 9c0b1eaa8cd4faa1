// Compiled with -ffp-contract=off (core/CMakeLists.txt): every a * b + c below is two roundings,
// on every machine. See prng_math.h for the rest of the promise.
#include "core/base/prng_math.h"

#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/base/assert.h"

namespace dagsim::prng_math {

namespace {

constexpr uint64_t kFractionMask = (uint64_t{1} << 52) - 1;
constexpr uint64_t kExponentOne = uint64_t{1023} << 52;  // the bits of 1.0's exponent
constexpr int kExponentBias = 1023;

// ln 2 split so that e * kLn2Hi is exact for every exponent a double can have (|e| < 2^11):
// kLn2Hi keeps the first 42 bits of ln 2, kLn2Lo is the rest, rounded.
constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;
constexpr double kTwoPi = 0x1.921fb54442d18p+2;  // 2*pi rounded to nearest

// ln(1+f) = 2 atanh(s) with s = f / (2 + f): 2s + s * R(s^2), R(z) = sum over k >= 1 of
// 2 z^k / (2k + 1). The Taylor coefficients of R(z)/z (each 2/(2k+1) rounded to nearest); with
// |s| <= 3 - 2 sqrt(2) < 0.1716 (z < 0.0295) the first omitted term, s * 2 z^11 / 23, is below
// 2^-60 of the result, far under its rounding.
constexpr double kLogC[] = {
    0x1.5555555555555p-1,  // 2/3
    0x1.999999999999ap-2,  // 2/5
    0x1.2492492492492p-2,  // 2/7
    0x1.c71c71c71c71cp-3,  // 2/9
    0x1.745d1745d1746p-3,  // 2/11
    0x1.3b13b13b13b14p-3,  // 2/13
    0x1.1111111111111p-3,  // 2/15
    0x1.e1e1e1e1e1e1ep-4,  // 2/17
    0x1.af286bca1af28p-4,  // 2/19
    0x1.8618618618618p-4,  // 2/21
};

// Taylor coefficients of sin and cos, (-1)^k / (2k+1)! and (-1)^k / (2k)! for k >= 1, rounded to
// nearest. On |theta| <= pi/4 the first omitted terms (theta^19/19!, theta^20/20!) are below 2^-63.
constexpr double kSinC[] = {
    -0x1.5555555555555p-3, 0x1.1111111111111p-7,  -0x1.a01a01a01a01ap-13, 0x1.71de3a556c734p-19,
    -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33, -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49,
};
constexpr double kCosC[] = {
    -0x1.0000000000000p-1,  0x1.5555555555555p-5,  -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
    -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-45,
    -0x1.6827863b97d97p-53,
};

// c[0] + z * (c[1] + z * (... + z * c[N-1])): Horner's scheme, innermost first, one rounding per
// operation (no contraction in this file), so the order of operations is the one written here.
template <size_t N>
double horner(double z, const double (&c)[N]) {
  double sum = c[N - 1];
  for (size_t i = N - 1; i-- > 0;) sum = c[i] + z * sum;
  return sum;
}

}  // namespace

double log(double x) {
  DAGSIM_ASSERT_MSG(x > 0.0 && x <= DBL_MAX, "prng_math::log needs a positive finite argument");
  uint64_t bits = std::bit_cast<uint64_t>(x);
  int exponent = -kExponentBias;
  if ((bits >> 52) == 0) {
    // Subnormal: scaling by a power of two is exact and makes it normal.
    bits = std::bit_cast<uint64_t>(x * 0x1p54);
    exponent -= 54;
  }
  exponent += static_cast<int>(bits >> 52);
  // x = 2^exponent * m with m in [1, 2), then m brought into [sqrt(1/2), sqrt(2)] so that
  // |ln m| <= ln(2)/2 and the series below converges fast. Both steps are exact.
  double m = std::bit_cast<double>((bits & kFractionMask) | kExponentOne);
  if (m > kSqrt2) {
    m *= 0.5;
    ++exponent;
  }
  const double f = m - 1.0;  // exact (Sterbenz: m is within a factor 2 of 1)
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double r = z * horner(z, kLogC);
  // ln(1+f) = f - s*f + s*R, and s*f = hfsq - s*hfsq with hfsq = f^2/2: f is exact, so only the
  // small correction carries rounding error (this keeps the result within about one ulp).
  const double hfsq = 0.5 * f * f;
  const double e = static_cast<double>(exponent);
  return e * kLn2Hi - ((hfsq - (s * (hfsq + r) + e * kLn2Lo)) - f);
}

SinCos sin_cos_turns(double turns) {
  DAGSIM_ASSERT_MSG(turns >= 0.0 && turns < 1.0, "prng_math::sin_cos_turns needs a fraction of a turn in [0, 1)");
  // The nearest quarter turn, and what is left of it. turns * 4 is exact; where adding 0.5
  // rounds, the quarter picked may be the other neighbour of a halfway point, which only moves
  // the remainder to the other end of [-1/8, 1/8]. The remainder is exact either way (Sterbenz:
  // turns is within a factor 2 of quarter/4 when quarter > 0).
  const int quarter = static_cast<int>(turns * 4.0 + 0.5);
  const double rest = turns - static_cast<double>(quarter) * 0.25;  // in [-1/8, 1/8]
  const double theta = rest * kTwoPi;                                // in [-pi/4, pi/4]
  const double z = theta * theta;
  const double sin_theta = theta + theta * (z * horner(z, kSinC));
  const double cos_theta = 1.0 + z * horner(z, kCosC);
  switch (quarter & 3) {
    case 0:
      return {sin_theta, cos_theta};
    case 1:
      return {cos_theta, -sin_theta};
    case 2:
      return {-sin_theta, -cos_theta};
    default:
      return {-cos_theta, sin_theta};
  }
}

}  // namespace dagsim::prng_math
