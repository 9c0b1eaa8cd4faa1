// What the tensor op tests share: shorthand for a tensor from values, and a leaf that requires
// grad. Tests only.
#pragma once

#include <vector>

#include "core/tensor/ops.h"

namespace dagsim::testing {

using V = std::vector<double>;

inline Tensor t(const Shape& shape, const V& values) { return from_values(shape, values); }

inline Tensor leaf(Tensor x) {
  x.set_requires_grad(true);
  return x;
}

}  // namespace dagsim::testing
