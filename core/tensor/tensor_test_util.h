// What the tensor op tests share: shorthand for a tensor from values and a leaf that requires
// grad, and gtest predicates for values and gradcheck that print both sides on failure. Tests only.
#pragma once

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/tensor/gradcheck.h"
#include "core/tensor/ops.h"

namespace dagsim::testing {

using V = std::vector<double>;

inline Tensor t(const Shape& shape, const V& values) { return from_values(shape, values); }

inline Tensor leaf(Tensor x) {
  x.set_requires_grad(true);
  return x;
}

// Same shape and values within `tol`, with both tensors printed on failure.
inline ::testing::AssertionResult equals(const Tensor& actual, const Shape& shape, const V& values, double tol = 1e-12) {
  const Tensor expected = from_values(shape, values, actual.dtype());
  if (actual.shape() == shape && allclose(actual, expected, 0.0, tol)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << actual.to_string() << " " << shape_str(actual.shape())
                                       << ", expected " << expected.to_string() << " " << shape_str(shape);
}

template <typename F>
::testing::AssertionResult passes_gradcheck(F&& fn, const std::vector<Tensor>& inputs) {
  const GradcheckResult result = gradcheck(std::forward<F>(fn), inputs);
  if (result.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << result.message;
}

}  // namespace dagsim::testing
