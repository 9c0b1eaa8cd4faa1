// Neural-network functions, as torch.nn.functional: the losses with PyTorch's default reduction
// ("mean": mse_loss, nll_loss, cross_entropy), and the layers layer_norm and dropout.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/autograd/op_backward.h"
#include "core/tensor/device_guard.h"
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
  std::vector<double> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* y = out.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * cols;
      double m = 0, v = 0;
      for (int64_t j = 0; j < cols; ++j) m += row[j];
      m /= static_cast<double>(cols);
      for (int64_t j = 0; j < cols; ++j) v += (row[j] - m) * (row[j] - m);
      v /= static_cast<double>(cols);
      const double s = 1.0 / std::sqrt(v + eps);
      mean[static_cast<size_t>(r)] = m;
      rstd[static_cast<size_t>(r)] = s;
      for (int64_t j = 0; j < cols; ++j) {
        double h = (row[j] - m) * s;
        if (pw) h *= pw[j];
        if (pb) h += pb[j];
        y[r * cols + j] = static_cast<T>(h);
      }
    }
  });
  variable_list inputs{x};
  variable_list saved{x};
  if (weight.defined()) {
    inputs.push_back(weight);
    saved.push_back(weight);
  }
  if (bias.defined()) inputs.push_back(bias);
  record_op("LayerNormBackward", inputs, {out},
            [normalized_shape, rows, cols, has_weight = weight.defined(), has_bias = bias.defined(),
             mean = std::move(mean), rstd = std::move(rstd)](const BackwardArgs& args) {
              const Tensor& g = args.grads[0];
              const Tensor& xs = args.saved[0];
              const size_t bias_at = has_weight ? 2 : 1;
              Tensor gx = args.needs(0) ? Tensor::empty(xs.shape(), xs.dtype()) : Tensor();
              Tensor gw = has_weight && args.needs(1) ? zeros(normalized_shape, xs.dtype()) : Tensor();
              Tensor gb = has_bias && args.needs(bias_at) ? sum_to(g, normalized_shape) : Tensor();
              if (gx.defined() || gw.defined()) dispatch_dtype(xs.dtype(), [&]<typename T>() {
                const T* pg = g.data<T>();
                const T* px = xs.data<T>();
                const T* pw = has_weight ? args.saved[1].data<T>() : nullptr;
                T* pgw = gw.defined() ? gw.data<T>() : nullptr;
                T* pgx = gx.defined() ? gx.data<T>() : nullptr;
                for (int64_t r = 0; r < rows; ++r) {
                  const double m = mean[static_cast<size_t>(r)], s = rstd[static_cast<size_t>(r)];
                  const T* gr = pg + r * cols;
                  const T* xr = px + r * cols;
                  // With h = g * weight (the gradient reaching x_hat):
                  // dx = rstd * (h - mean(h) - x_hat * mean(h * x_hat)), means over the row.
                  double mean_h = 0, mean_hx = 0;
                  for (int64_t j = 0; j < cols; ++j) {
                    const double xhat = (xr[j] - m) * s;
                    const double h = pw ? gr[j] * pw[j] : gr[j];
                    mean_h += h;
                    mean_hx += h * xhat;
                    if (pgw) pgw[j] = static_cast<T>(pgw[j] + gr[j] * xhat);
                  }
                  if (!pgx) continue;
                  mean_h /= static_cast<double>(cols);
                  mean_hx /= static_cast<double>(cols);
                  for (int64_t j = 0; j < cols; ++j) {
                    const double xhat = (xr[j] - m) * s;
                    const double h = pw ? gr[j] * pw[j] : gr[j];
                    pgx[r * cols + j] = static_cast<T>(s * (h - mean_h - xhat * mean_hx));
                  }
                }
              });
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
  Tensor noise = zeros(a.shape(), a.dtype());
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    T* pn = noise.data<T>();
    if (p < 1.0) {
      const T scale = static_cast<T>(1.0 / (1.0 - p));
      for (int64_t i = 0; i < a.numel(); ++i) {
        if (prng.bernoulli(1.0 - p)) pn[i] = scale;
      }
    }
    const T* x = a.data<T>();
    T* y = out.data<T>();
    for (int64_t i = 0; i < a.numel(); ++i) y[i] = x[i] * pn[i];
  });
  record_op("DropoutBackward", {a}, {out}, [noise](const BackwardArgs& args) {
    return variable_list{mul(args.grads[0], noise)};
  });
  return out;
}

}  // namespace dagsim
