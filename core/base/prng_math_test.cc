// Tests of prng_math: accuracy of log and of sine/cosine of a turn against long double libm (a few
// units in the last place over many points, the awkward ones included), and their exact values.
// Their bits are pinned by prng_test.cc's golden values; here we check that they are also right.
#include "core/base/prng_math.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include "core/base/prng.h"

namespace dagsim::prng_math {
namespace {

// Where long double is no wider than double, the reference carries its own rounding too.
constexpr double kReferenceUlps = LDBL_MANT_DIG > DBL_MANT_DIG ? 0.0 : 1.0;

// |value - reference| in units in the last place of the reference, rounded to double.
double ulps(double value, long double reference) {
  const double ref = static_cast<double>(reference);
  const double ulp = std::nextafter(std::fabs(ref), INFINITY) - std::fabs(ref);
  return static_cast<double>(std::fabs(static_cast<long double>(value) - reference) / ulp);
}

std::vector<double> log_arguments() {
  std::vector<double> xs = {1.0, 2.0, 0.5, 0x1p-53, 0x1.fffffffffffffp-1, 0x1.0000000000001p+0, DBL_MAX,
                            DBL_MIN, DBL_TRUE_MIN, 0x1.6a09e667f3bccp+0, 0x1.6a09e667f3bcdp+0,
                            0x1.6a09e667f3bcep+0, 3.0, 10.0, 1e-300, 1e300};
  for (int k = 1; k <= 64; ++k) {  // next to 1, where ln x is tiny and cancellation bites
    xs.push_back(1.0 + k * DBL_EPSILON);
    xs.push_back(1.0 - k * DBL_EPSILON / 2);
  }
  Prng p(77);
  for (int i = 0; i < 200000; ++i) xs.push_back(p.uniform_double() + 0x1p-60);  // the draws' domain
  for (int i = 0; i < 200000; ++i) {  // every binade, subnormals included
    xs.push_back(std::ldexp(1.0 + p.uniform_double(), static_cast<int>(p.uniform_int(-1074, 1023))));
  }
  return xs;
}

TEST(PrngMath, LogIsWithinOneUlpOfLongDoubleLibm) {
  double worst = 0;
  double worst_at = 0;
  for (double x : log_arguments()) {
    if (x == 0.0 || std::isinf(x)) continue;
    const double error = ulps(log(x), std::log(static_cast<long double>(x)));
    if (error > worst) {
      worst = error;
      worst_at = x;
    }
  }
  // The reduction is exact and only the small correction to f is rounded: measured 0.77 ulp.
  EXPECT_LE(worst, 1.0 + kReferenceUlps) << "at " << std::hexfloat << worst_at;
}

TEST(PrngMath, LogIsExactWhereItCanBe) {
  EXPECT_EQ(log(1.0), 0.0);
  EXPECT_FALSE(std::signbit(log(1.0)));
  EXPECT_EQ(log(2.0), 0x1.62e42fefa39efp-1);  // ln 2 rounded to nearest
  EXPECT_LT(log(0x1p-53), 0.0);
}

TEST(PrngMath, SineAndCosineOfATurnAreWithinTwoUlps) {
  constexpr long double kTwoPi = 6.283185307179586476925286766559005768L;
  std::vector<double> turns = {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 0x1p-53, 0x1.fffffffffffffp-1,
                               0.125 - 0x1p-53, 0.125 + 0x1p-53, 0.5 - 0x1p-54, 0.5 + 0x1p-53};
  Prng p(78);
  for (int i = 0; i < 400000; ++i) turns.push_back(p.uniform_double());
  double worst_absolute = 0;
  double worst_relative = 0;
  for (double t : turns) {
    const SinCos got = sin_cos_turns(t);
    const long double angle = kTwoPi * static_cast<long double>(t);
    const long double want[2] = {std::sin(angle), std::cos(angle)};
    const double have[2] = {got.sin, got.cos};
    for (int i = 0; i < 2; ++i) {
      // Absolute error everywhere (what a normal draw sees, scaled by its radius); relative error
      // where the long double reference itself is good to a small fraction of an ulp.
      worst_absolute = std::max(worst_absolute, static_cast<double>(std::fabs(have[i] - want[i])) / DBL_EPSILON);
      if (std::fabs(want[i]) >= 0.0625L) worst_relative = std::max(worst_relative, ulps(have[i], want[i]));
    }
  }
  // The reduction is exact; the rounding of the angle (rest * 2pi) and of the sums remain:
  // measured 0.78 * 2^-52 absolute and 1.74 ulp relative.
  EXPECT_LE(worst_absolute, 1.0 + kReferenceUlps) << "in units of 2^-52";
  EXPECT_LE(worst_relative, 2.0 + kReferenceUlps);
}

TEST(PrngMath, SineAndCosineAreExactAtTheQuarters) {
  const double expected[4][2] = {{0, 1}, {1, 0}, {0, -1}, {-1, 0}};
  for (int q = 0; q < 4; ++q) {
    const SinCos got = sin_cos_turns(q * 0.25);
    EXPECT_EQ(got.sin, expected[q][0]) << q;
    EXPECT_EQ(got.cos, expected[q][1]) << q;
  }
}

TEST(PrngMathDeathTest, ArgumentsOutsideTheDomainAreAssertions) {
  EXPECT_DEATH(log(0.0), "positive finite");
  EXPECT_DEATH(log(-1.0), "positive finite");
  EXPECT_DEATH(log(NAN), "positive finite");
  EXPECT_DEATH(log(INFINITY), "positive finite");
  EXPECT_DEATH(sin_cos_turns(1.0), "fraction of a turn");
  EXPECT_DEATH(sin_cos_turns(-0x1p-60), "fraction of a turn");
}

}  // namespace
}  // namespace dagsim::prng_math
