// Neural-network functions, as torch.nn.functional: the losses with PyTorch's default reduction
// ("mean": mse_loss, nll_loss, cross_entropy), and the layers layer_norm and dropout.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/autograd/op_backward.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/op_util.h"
#include "core/tensor/ops.h"

namespace dagsim {

using autograd::BackwardArgs;
using autograd::record_op;
using autograd::variable_list;

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  DeviceGuard device_guard("mse_loss", {&input, &target});
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
  DeviceGuard device_guard("nll_loss", {&input, &target});
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
  // The offsets of the picked log-probabilities, checked on the host, where the kernels read them.
  std::vector<int64_t> picked = class_indices("nll_loss", target, classes);
  for (int64_t i = 0; i < n; ++i) picked[static_cast<size_t>(i)] += i * classes;
  const Tensor offsets = index_array(picked);
  Tensor out = Tensor::empty({}, input.dtype());
  LineArgs args;
  args.x = kernel_input(input);
  args.y = detail::bytes(out);
  args.index = index_data(offsets);
  args.lines = 1;
  args.size = n;
  run_lines(LineOp::nll_loss, input.dtype(), args);
  record_op("NllLossBackward", {input}, {out}, [shape = input.shape(), picked = std::move(picked)](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    Tensor grad = zeros(shape, g.dtype());
    const Tensor offsets = index_array(picked);
    LineArgs scatter;
    scatter.g = kernel_input(g);
    scatter.y = detail::bytes(grad);
    scatter.index = index_data(offsets);
    scatter.lines = shape[0];
    scatter.size = shape[0];
    run_lines(LineOp::nll_loss_backward, g.dtype(), scatter);
    return variable_list{grad};
  });
  return out;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target) {
  DeviceGuard device_guard("cross_entropy", {&input, &target});
  detail::check_defined("cross_entropy", input, "input");
  if (input.dim() != 2) {
    throw errors::shape_mismatch("cross_entropy: expected input of shape [N, C], got " + shape_str(input.shape()));
  }
  return nll_loss(log_softmax(input, 1), target);
}

// Layers ------------------------------------------------------------------------------------------

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  DeviceGuard device_guard("layer_norm", {&x, &weight, &bias});
  detail::check_defined("layer_norm", x, "input");
  if (normalized_shape.empty()) {
    throw errors::invalid_argument("layer_norm: expected normalized_shape to be at least 1-dimensional, got []");
  }
  const size_t k = normalized_shape.size();
  if (x.shape().size() < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - k)) {
    throw errors::shape_mismatch("layer_norm: given normalized_shape=" + shape_str(normalized_shape) +
                                 ", expected input with shape [*, " + shape_str(normalized_shape).substr(1) +
                                 ", but got input of shape " + shape_str(x.shape()));
  }
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined()) continue;
    detail::check_same_dtype("layer_norm", x, *t);
    if (t->shape() != normalized_shape) {
      throw errors::shape_mismatch(std::string("layer_norm: expected ") + what + " of shape " +
                                   shape_str(normalized_shape) + " (normalized_shape), got " +
                                   shape_str(t->shape()));
    }
  }
  // Each of the `rows` rows of `cols` trailing elements is normalised on its own: biased variance,
  // as PyTorch; the statistics are kept in double for both dtypes.
  const int64_t cols = shape_numel(normalized_shape);
  int64_t rows = 1;
  for (size_t d = 0; d + k < x.shape().size(); ++d) rows *= x.shape()[d];
  // No elements, no rows: [2^61, 0] normalised over its last dim would loop (and allocate) 2^61 times.
  if (x.numel() == 0) rows = 0;
  // mean and rstd per row, kept for the backward on the op's device.
  Tensor mean = Tensor::empty({rows}, Dtype::float64);
  Tensor rstd = Tensor::empty({rows}, Dtype::float64);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  LineArgs args;
  args.x = kernel_input(x);
  args.w = weight.defined() ? kernel_input(weight) : nullptr;
  args.b = bias.defined() ? kernel_input(bias) : nullptr;
  args.y = detail::bytes(out);
  args.stat0 = static_cast<double*>(mean.raw_data());
  args.stat1 = static_cast<double*>(rstd.raw_data());
  args.lines = rows;
  args.size = cols;
  args.scalar = eps;
  run_lines(LineOp::layer_norm, x.dtype(), args);
  variable_list inputs{x};
  variable_list saved{x};
  if (weight.defined()) {
    inputs.push_back(weight);
    saved.push_back(weight);
  }
  if (bias.defined()) inputs.push_back(bias);
  record_op("LayerNormBackward", inputs, {out},
            [normalized_shape, rows, cols, has_weight = weight.defined(), has_bias = bias.defined(), mean,
             rstd](const BackwardArgs& args) {
              const Tensor& g = args.grads[0];
              const Tensor& xs = args.saved[0];
              const size_t bias_at = has_weight ? 2 : 1;
              LineArgs back;
              back.x = kernel_input(xs);
              back.g = kernel_input(g);
              back.w = has_weight ? kernel_input(args.saved[1]) : nullptr;
              back.stat0 = static_cast<double*>(const_cast<void*>(mean.raw_data()));
              back.stat1 = static_cast<double*>(const_cast<void*>(rstd.raw_data()));
              Tensor gx, gw;
              // gx is allocated before gw, as before they shared a call: the sim GPU draws a racing
              // launch's poison in the order of its outputs' allocation.
              if (args.needs(0)) gx = Tensor::empty(xs.shape(), xs.dtype());
              if (has_weight && args.needs(1)) gw = Tensor::empty(normalized_shape, xs.dtype());
              // dw, when wanted, in the same call as dx: the host computes both in one pass. (Not
              // with no rows: a call of no lines runs nothing, and dw must still be zeros.)
              const bool both = args.needs(0) && gw.defined() && rows > 0;
              if (args.needs(0)) {
                back.y = detail::bytes(gx);
                back.y2 = both ? detail::bytes(gw) : nullptr;
                back.lines = rows;
                back.size = cols;
                run_lines(LineOp::layer_norm_backward, xs.dtype(), back);
              }
              if (gw.defined() && !both) {
                back.y = detail::bytes(gw);
                back.lines = cols;  // one line per column, down the rows
                back.size = rows;
                back.inner = cols;
                run_lines(LineOp::layer_norm_weight, xs.dtype(), back);
              }
              Tensor gb = has_bias && args.needs(bias_at) ? sum_to(g, normalized_shape) : Tensor();
              variable_list grads{gx};
              if (has_weight) grads.push_back(gw);
              if (has_bias) grads.push_back(gb);
              return grads;
            },
            saved);
  return out;
}

Tensor dropout(const Tensor& a, double p, bool training, Prng& prng) {
  DeviceGuard device_guard("dropout", {&a});
  detail::check_defined("dropout", a);
  if (!(p >= 0.0 && p <= 1.0)) {  // NaN fails too
    throw errors::invalid_argument("dropout: probability has to be between 0 and 1, but got " + std::to_string(p));
  }
  // The input itself, drawing nothing, as torch's dropout: the generator only advances when a
  // mask is drawn.
  if (!training || p == 0.0 || a.numel() == 0) return a;
  // noise[i] is 1/(1-p) where element i is kept (probability 1-p) and 0 where it is dropped; one
  // draw per element in row-major order, so a seed fixes the mask. p == 1 drops everything
  // without drawing (the scale would be infinite), as PyTorch multiplies by zero.
  Tensor noise;
  {
    DeviceGuard::Suspend on_host;  // drawn on the host, so a seed gives one mask on every device
    noise = zeros(a.shape(), a.dtype());
    dispatch_dtype(a.dtype(), [&]<typename T>() {
      T* pn = noise.data<T>();
      if (p < 1.0) {
        const T scale = static_cast<T>(1.0 / (1.0 - p));
        for (int64_t i = 0; i < a.numel(); ++i) {
          if (prng.bernoulli(1.0 - p)) pn[i] = scale;
        }
      }
    });
  }
  noise = to_device(noise, a.device());
  Tensor out;
  {
    autograd::NoGradGuard no_grad;  // one DropoutBackward below, not mul's
    out = mul(a, noise);
  }
  record_op("DropoutBackward", {a}, {out}, [noise](const BackwardArgs& args) {
    return variable_list{mul(args.grads[0], noise)};
  });
  return out;
}

}  // namespace dagsim
