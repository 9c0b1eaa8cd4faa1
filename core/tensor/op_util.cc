#include "core/tensor/op_util.h"

namespace dagsim::detail {

void check_defined(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) {
    throw errors::invalid_argument(std::string(op) + ": expected a defined tensor for " + what);
  }
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw errors::dtype_mismatch(std::string(op) + ": expected both operands to have the same dtype, got " +
                                 describe(a) + " and " + describe(b));
  }
}

int64_t wrap_dim(const char* op, int64_t dim, const Shape& shape, bool inserting) {
  const int64_t ndim = static_cast<int64_t>(shape.size()) + (inserting ? 1 : 0);
  const int64_t wrapped = dim < 0 ? dim + ndim : dim;
  if (wrapped < 0 || wrapped >= ndim) {
    throw errors::index_out_of_range(std::string(op) + ": dimension " + std::to_string(dim) +
                                     " out of range (expected to be in [" +
                                     std::to_string(-ndim) + ", " + std::to_string(ndim - 1) +
                                     "]) for a tensor of shape " + shape_str(shape));
  }
  return wrapped;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& target) {
  DAGSIM_ASSERT(shape.size() <= target.size());
  std::vector<int64_t> own = contiguous_strides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    DAGSIM_ASSERT(shape[d] == target[lead + d] || shape[d] == 1);
    strides[lead + d] = shape[d] == 1 ? 0 : own[d];
  }
  return strides;
}

}  // namespace dagsim::detail
