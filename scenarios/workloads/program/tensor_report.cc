// Tensor comparison and report JSON for the program workload (tensor_report.h).
#include "scenarios/workloads/program/tensor_report.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/base/hash.h"
#include "scenarios/run/records.h"

namespace dagsim::scenarios {

bool tensors_allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan, double& worst) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  bool ok = true;
  for (size_t i = 0; i < x.size(); ++i) {
    // Equal values are close whatever the tolerances: this is what makes inf == inf (their
    // difference is NaN, which no tolerance admits), as in torch.isclose.
    if (x[i] == y[i]) continue;
    if (std::isnan(x[i]) && std::isnan(y[i]) && equal_nan) continue;
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      ok = false;
      worst = std::numeric_limits<double>::infinity();
      continue;
    }
    const double diff = std::abs(x[i] - y[i]);
    worst = std::max(worst, diff);
    ok = ok && diff <= atol + rtol * std::abs(y[i]);
  }
  return ok;
}

namespace {

nlohmann::json nested(const std::vector<double>& values, const Shape& shape) {
  if (shape.empty()) return values.empty() ? nlohmann::json(nullptr) : number_record(values[0]);
  // Built dimension by dimension from the innermost, iteratively (a rank is at most 8, but an
  // explicit loop states the cost: one pass over the values, then one over each outer level).
  std::vector<nlohmann::json> level;
  level.reserve(values.size());
  for (double v : values) level.push_back(number_record(v));
  for (size_t dim = shape.size(); dim-- > 0;) {
    const size_t width = static_cast<size_t>(shape[dim]);
    std::vector<nlohmann::json> outer;
    size_t groups = 1;  // rows at this level: the product of the outer dimensions
    for (size_t d = 0; d < dim; ++d) groups *= static_cast<size_t>(shape[d]);
    outer.reserve(groups);
    for (size_t g = 0; g < groups; ++g) {
      nlohmann::json row = nlohmann::json::array();
      for (size_t i = 0; i < width; ++i) row.push_back(std::move(level[g * width + i]));
      outer.push_back(std::move(row));
    }
    level = std::move(outer);
  }
  return std::move(level[0]);
}

}  // namespace

nlohmann::json tensor_report_json(const Tensor& t, bool full) {
  const std::vector<double> values = t.to_vector();
  const Shape& shape = t.shape();
  if (full || static_cast<int64_t>(values.size()) <= kReportFullTensorMax) return nested(values, shape);
  nlohmann::json first = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(values.size(), 8); ++i) first.push_back(number_record(values[i]));
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  uint64_t finite = 0;
  // The digest covers the values as float64 little-endian bytes, whatever the host's order.
  uint64_t digest;
  if constexpr (std::endian::native == std::endian::little) {
    digest = xxh3_64(std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(double)));
  } else {
    std::vector<uint8_t> le(values.size() * 8);
    for (size_t i = 0; i < values.size(); ++i) {
      uint64_t bits;
      std::memcpy(&bits, &values[i], sizeof bits);
      for (int b = 0; b < 8; ++b) le[i * 8 + static_cast<size_t>(b)] = static_cast<uint8_t>(bits >> (8 * b));
    }
    digest = xxh3_64(le);
  }
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    ++finite;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  char hex[19];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(digest));
  const auto over_finite = [&](double v) { return finite == 0 ? nlohmann::json(nullptr) : number_record(v); };
  return {{"summary", true},
          {"shape", shape},
          {"numel", values.size()},
          {"first", std::move(first)},
          {"min", over_finite(lo)},
          {"max", over_finite(hi)},
          {"mean", over_finite(finite == 0 ? 0.0 : sum / static_cast<double>(finite))},
          {"nonfinite", values.size() - finite},
          {"digest", hex}};
}

}  // namespace dagsim::scenarios
