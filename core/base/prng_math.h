// prng_math: the elementary functions behind Prng's continuous draws (natural log, and sine and
// cosine of a fraction of a turn), written with IEEE-754 basic operations only.
//
// Promise: every result is a fixed function of the argument's bits, the same on any machine,
// compiler and C library. libm's log, sin and cos are not (glibc, musl, macOS and MSVC round
// differently, and glibc's results changed between releases), so a seed whose normal draws went
// through libm could replay differently elsewhere. What makes the promise hold:
//  - only + - * / and sqrt, which IEEE-754 requires to be correctly rounded, exact exponent
//    manipulation through bit casts, and constants written as hex-float literals (a decimal
//    literal's rounding is implementation-defined in C++);
//  - a fixed order of evaluation (Horner's scheme as written), and prng_math.cc and prng.cc
//    compiled with -ffp-contract=off: GCC contracts a*b+c into a fused multiply-add by default
//    even with -std=c++20 (it ignores #pragma STDC FP_CONTRACT in C++), and Clang does within an
//    expression, which would change the last bits on FMA hardware (x86-64-v3, every AArch64);
//    and with -fno-math-errno, so prng.cc's sqrt is the instruction with no call into libm;
//  - double arithmetic without excess precision (FLT_EVAL_METHOD 0: SSE2, AArch64; not x87).
// Accuracy: within a few units in the last place of the true value (prng_math_test.cc measures
// it against long double), which is all a random draw needs; bit-for-bit replay is the point.
#pragma once

#include <cfloat>

namespace dagsim::prng_math {

static_assert(FLT_EVAL_METHOD == 0, "double arithmetic with excess precision would change the draws");

// Natural logarithm. REQUIRES: x > 0 and finite (subnormals included).
double log(double x);

struct SinCos {
  double sin;
  double cos;
};

// sin(2*pi*turns) and cos(2*pi*turns), with the reduction done on `turns` (exactly) rather than on
// a rounded angle. REQUIRES: 0 <= turns < 1.
SinCos sin_cos_turns(double turns);

}  // namespace dagsim::prng_math
