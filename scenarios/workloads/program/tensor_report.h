// How the program workload compares and reports tensors: torch.allclose's rule (non-finite values
// included) and the JSON a report gives for a tensor (exact nested lists for small tensors, a
// summary with a digest for large ones unless every value is asked for).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/tensor/tensor.h"

namespace dagsim::scenarios {

// Above this many elements a report gives a tensor's summary, not its values (unless asked for
// them: `--full-tensors`). A nested list of 10^7 numbers costs seconds and hundreds of MB to build
// and print; a person reads neither, and the records keep every value anyway.
inline constexpr int64_t kReportFullTensorMax = 1000;

// torch.allclose(a, b, rtol, atol, equal_nan): same shape and, elementwise, a == b (so an inf
// equals an inf of the same sign), or both NaN when `equal_nan`, or |a − b| ≤ atol + rtol × |b|
// with both finite. `worst` grows to the largest |a − b| over elements that are not equal
// (infinite when one side is non-finite and the other is not the same value).
bool tensors_allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan, double& worst);

// `t` for a report: nested JSON arrays following its shape (a scalar is a number) with numbers as
// records write them (number_record: "inf", "-inf" and "nan" for non-finite ones, since JSON has
// no such numbers and nlohmann would write null, which reads back as nothing), when `full` or when it has at most kReportFullTensorMax elements;
// otherwise {"summary": true, "shape", "numel", "first" (its first 8 values), "min", "max",
// "mean", "nonfinite" (how many are inf or NaN; min, max and mean are over the finite ones),
// "digest" (XXH3-64 of its float64 values in little-endian order, "0x" + 16 hex digits)}.
nlohmann::json tensor_report_json(const Tensor& t, bool full);

}  // namespace dagsim::scenarios
