// Losses, with PyTorch's default reduction ("mean"): mse_loss, nll_loss, cross_entropy.
#include <cmath>

#include "core/autograd/op_backward.h"
#include "core/tensor/op_util.h"
#include "core/tensor/ops.h"

namespace dagsim {

using autograd::BackwardArgs;
using autograd::record_op;
using autograd::variable_list;

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  detail::check_defined("mse_loss", input, "input");
  detail::check_defined("mse_loss", target, "target");
  detail::check_same_dtype("mse_loss", input, target);
  if (input.shape() != target.shape()) {
    throw errors::shape_mismatch("mse_loss: input " + shape_str(input.shape()) + " and target " +
                                 shape_str(target.shape()) + " must have the same shape");
  }
  if (input.numel() == 0) throw errors::invalid_argument("mse_loss: empty input");
  // Composed of differentiable ops, so both input and target get gradients.
  return mean(pow(sub(input, target), 2.0));
}

namespace {
// Class indices from `target`, checked to be integral and in [0, classes).
std::vector<int64_t> class_indices(const char* op, const Tensor& target, int64_t classes) {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(target.numel()));
  for (double v : target.to_vector()) {
    if (v != std::floor(v) || v < 0 || v >= static_cast<double>(classes)) {
      throw errors::index_out_of_range(std::string(op) + ": target " + std::to_string(v) +
                                       " is not a class index in [0, " + std::to_string(classes) + ")");
    }
    indices.push_back(static_cast<int64_t>(v));
  }
  return indices;
}
}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target) {
  detail::check_defined("nll_loss", input, "input");
  detail::check_defined("nll_loss", target, "target");
  if (input.dim() != 2) {
    throw errors::shape_mismatch("nll_loss: expected input of shape [N, C], got " + shape_str(input.shape()));
  }
  const int64_t n = input.shape()[0];
  const int64_t classes = input.shape()[1];
  if (target.dim() != 1 || target.shape()[0] != n) {
    throw errors::shape_mismatch("nll_loss: expected target of shape [" + std::to_string(n) + "] for input " +
                                 shape_str(input.shape()) + ", got " + shape_str(target.shape()));
  }
  if (n == 0) throw errors::invalid_argument("nll_loss: empty batch");
  std::vector<int64_t> indices = class_indices("nll_loss", target, classes);
  Tensor out = Tensor::empty({}, input.dtype());
  dispatch_dtype(input.dtype(), [&]<typename T>() {
    const T* x = input.data<T>();
    T acc{0};
    for (int64_t i = 0; i < n; ++i) acc -= x[i * classes + indices[static_cast<size_t>(i)]];
    out.data<T>()[0] = static_cast<T>(acc / static_cast<T>(n));
  });
  record_op("NllLossBackward", {input}, {out},
            [shape = input.shape(), indices = std::move(indices)](const BackwardArgs& args) {
              const Tensor& g = args.grads[0];
              Tensor grad = zeros(shape, g.dtype());
              dispatch_dtype(g.dtype(), [&]<typename T>() {
                const T scale = -g.data<T>()[0] / static_cast<T>(shape[0]);
                T* p = grad.data<T>();
                for (int64_t i = 0; i < shape[0]; ++i) p[i * shape[1] + indices[static_cast<size_t>(i)]] = scale;
              });
              return variable_list{grad};
            });
  return out;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target) {
  detail::check_defined("cross_entropy", input, "input");
  if (input.dim() != 2) {
    throw errors::shape_mismatch("cross_entropy: expected input of shape [N, C], got " + shape_str(input.shape()));
  }
  return nll_loss(log_softmax(input, 1), target);
}

}  // namespace dagsim
