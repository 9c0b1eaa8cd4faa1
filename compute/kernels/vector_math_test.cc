// vector_math.h's promises: every capability this CPU runs gives the same bits as every other (the
// determinism the trace relies on), each transcendental is within SLEEF's 1-ULP bound of a
// higher-precision libm, the arithmetic kernels equal the plain expression, and a capability this
// CPU lacks or an unknown name is refused by name.
#include "compute/kernels/vector_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/prng.h"
#include "core/tensor/ops.h"

namespace dagsim::vec {
namespace {

// Restores the process's capability after a test switches it.
struct CapabilityGuard {
  Capability saved = capability();
  ~CapabilityGuard() { set_capability(saved); }
};

// Inputs across the whole range: the special values, subnormals, then random bit patterns (every
// exponent) and random values in [-lo, hi]. An odd count, so every path runs its tail.
template <typename T>
std::vector<T> inputs(T lo, T hi, size_t count = 100'003) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> out = {T{0},  -T{0}, T{1},  -T{1}, inf, -inf, std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min(),
                        std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), lo, hi};
  Prng prng(25);
  while (out.size() < count / 2) out.push_back(std::bit_cast<T>(static_cast<Bits>(prng.next_u64())));
  while (out.size() < count) out.push_back(static_cast<T>(prng.uniform(static_cast<double>(lo), static_cast<double>(hi))));
  return out;
}

template <typename T>
bool same_bits(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>(a) ==
                                                 std::bit_cast<std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>(b);
}

constexpr Unary kAllUnary[] = {Unary::tanh, Unary::exp, Unary::log, Unary::sigmoid};
constexpr Binary kAllBinary[] = {Binary::add, Binary::sub, Binary::mul, Binary::div, Binary::tanh_backward,
                                 Binary::sigmoid_backward};

template <typename T>
void expect_paths_agree() {
  CapabilityGuard guard;
  const std::vector<T> x = inputs<T>(T{-100}, T{100});
  std::vector<T> b = inputs<T>(T{-3}, T{3});
  std::reverse(b.begin(), b.end());
  for (const Unary op : kAllUnary) {
    std::vector<std::vector<T>> results;
    for (const Capability path : supported_capabilities()) {
      set_capability(path);
      std::vector<T> y(x.size());
      unary(op, x.data(), y.data(), static_cast<int64_t>(x.size()));
      results.push_back(std::move(y));
    }
    for (size_t p = 1; p < results.size(); ++p) {
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(same_bits(results[p][i], results[0][i]))
            << "unary op " << static_cast<int>(op) << " on " << capability_name(supported_capabilities()[p]) << " at x="
            << x[i] << ": " << results[p][i] << " vs scalar " << results[0][i];
      }
    }
  }
  for (const Binary op : kAllBinary) {
    std::vector<std::vector<T>> results;
    for (const Capability path : supported_capabilities()) {
      set_capability(path);
      std::vector<T> y(x.size());
      binary(op, x.data(), b.data(), y.data(), static_cast<int64_t>(x.size()));
      results.push_back(std::move(y));
    }
    for (size_t p = 1; p < results.size(); ++p) {
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_TRUE(same_bits(results[p][i], results[0][i])) << "binary op " << static_cast<int>(op) << " at " << i;
      }
    }
  }
}

TEST(VectorMath, EveryPathGivesTheSameBitsFloat32) { expect_paths_agree<float>(); }
TEST(VectorMath, EveryPathGivesTheSameBitsFloat64) { expect_paths_agree<double>(); }

// ULPs between `got` and the exact `want`, in units of T's spacing in want's binade (subnormal
// spacing below T's smallest normal).
template <typename T>
long double ulps(T got, long double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(want) || std::fabs(want) > std::numeric_limits<T>::max()) {
    return got == static_cast<T>(want) ? 0 : INFINITY;
  }
  int exponent = 0;
  (void)std::frexp(want, &exponent);  // want = m * 2^exponent, m in [0.5, 1)
  exponent = std::max(exponent, std::numeric_limits<T>::min_exponent);
  const long double spacing = std::ldexp(1.0L, exponent - std::numeric_limits<T>::digits);
  return std::fabs(static_cast<long double>(got) - want) / spacing;
}

long double reference(Unary op, long double x) {
  switch (op) {
    case Unary::tanh: return std::tanh(x);
    case Unary::exp: return std::exp(x);
    case Unary::log: return std::log(x);
    case Unary::sigmoid: return 1.0L / (1.0L + std::exp(-x));
  }
  return NAN;
}

// SLEEF's u10 functions: at most 1.0 ULP; tanh near zero (where tanh(x) rounds to x's neighbours)
// measures 1.0005, so it gets 1.001. Sigmoid is 1/(1+exp(-x)) in T: exp's ULP plus two roundings,
// under 3 ULPs.
template <typename T>
void expect_accurate(Unary op, T lo, T hi, long double bound) {
  CapabilityGuard guard;
  const std::vector<T> x = inputs<T>(lo, hi);
  for (const Capability path : supported_capabilities()) {
    set_capability(path);
    std::vector<T> y(x.size());
    unary(op, x.data(), y.data(), static_cast<int64_t>(x.size()));
    long double worst = 0;
    T worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i]) || x[i] < lo || x[i] > hi) continue;  // the bit patterns outside the domain
      const long double e = ulps(y[i], reference(op, x[i]));
      if (e > worst) worst = e, worst_x = x[i];
    }
    EXPECT_LE(worst, bound) << "op " << static_cast<int>(op) << " on " << capability_name(path) << " at x=" << worst_x;
  }
}

TEST(VectorMath, WithinSleefsBoundOfLongDoubleLibm) {
  expect_accurate<float>(Unary::tanh, -20.0f, 20.0f, 1.001L);
  expect_accurate<float>(Unary::exp, -100.0f, 88.0f, 1.0L);
  expect_accurate<float>(Unary::log, 0.0f, std::numeric_limits<float>::max(), 1.0L);
  expect_accurate<float>(Unary::sigmoid, -80.0f, 80.0f, 3.0L);
  expect_accurate<double>(Unary::tanh, -40.0, 40.0, 1.001L);
  expect_accurate<double>(Unary::exp, -700.0, 700.0, 1.0L);
  expect_accurate<double>(Unary::log, 0.0, std::numeric_limits<double>::max(), 1.0L);
  expect_accurate<double>(Unary::sigmoid, -700.0, 700.0, 3.0L);
}

TEST(VectorMath, ArithmeticKernelsEqualThePlainExpression) {
  const std::vector<double> a = inputs<double>(-5, 5, 1001), b = inputs<double>(-2, 2, 1001);
  for (const Capability path : supported_capabilities()) {
    CapabilityGuard guard;
    set_capability(path);
    std::vector<double> out(a.size()), acc = a;
    binary(Binary::tanh_backward, a.data(), b.data(), out.data(), 1001);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits(out[i], a[i] * (1 - b[i] * b[i])));
    binary(Binary::sigmoid_backward, a.data(), b.data(), out.data(), 1001);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits(out[i], a[i] * b[i] * (1 - b[i])));
    axpy(0.5, b.data(), acc.data(), 1001);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits(acc[i], a[i] + 0.5 * b[i]));
  }
  // float32's axpy sums in double and rounds once, as add_ always did.
  std::vector<float> x = {1.0f, 3.0f}, y = {0x1p-30f, 0x1p-25f};
  axpy(1.0, y.data(), x.data(), 2);
  EXPECT_EQ(x[0], static_cast<float>(1.0 + 0x1p-30));
  EXPECT_EQ(x[1], static_cast<float>(3.0 + 0x1p-25));
}

TEST(VectorMath, TensorOpsUseTheActivePathAndAgreeAcrossPaths) {
  CapabilityGuard guard;
  Prng prng(3);
  const Tensor x = randn({7, 13}, prng, 0.0, 4.0, Dtype::float32);
  std::vector<std::vector<double>> results;
  for (const Capability path : supported_capabilities()) {
    set_capability(path);
    results.push_back(tanh(x).to_vector());
  }
  for (const auto& r : results) EXPECT_EQ(r, results.front());
  // And it is SLEEF's tanh, within a ULP of libm's (not some other function).
  for (size_t i = 0; i < results.front().size(); ++i) {
    EXPECT_NEAR(results.front()[i], std::tanh(x.to_vector()[i]), 2e-7);
  }
}

TEST(VectorMath, NamesParseAndUnknownOrUnsupportedOnesAreRefused) {
  for (int i = 0; i < kCapabilityCount; ++i) {
    const auto c = static_cast<Capability>(i);
    EXPECT_EQ(parse_capability(capability_name(c)), c);
  }
  try {
    (void)parse_capability("sse9");
    FAIL() << "sse9 parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"sse9\""), std::string::npos) << e.what();
  }
  EXPECT_TRUE(capability_supported(Capability::scalar));
  EXPECT_EQ(supported_capabilities().front(), Capability::scalar);
  for (int i = 0; i < kCapabilityCount; ++i) {
    const auto c = static_cast<Capability>(i);
    if (!capability_supported(c)) {
      EXPECT_THROW(set_capability(c), Error);
    }
  }
}

}  // namespace
}  // namespace dagsim::vec
