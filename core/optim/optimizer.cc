#include "core/optim/optimizer.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/tensor/ops.h"

namespace dagsim::optim {

using autograd::NoGradGuard;

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined()) throw errors::invalid_argument("optimizer: parameter " + std::to_string(i) + " is undefined");
  }
}

void Optimizer::step(const std::vector<Tensor>& grads) {
  if (grads.size() != params_.size()) {
    throw errors::invalid_argument("optimizer step: " + std::to_string(grads.size()) + " gradients for " +
                                   std::to_string(params_.size()) + " parameters");
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    if (grads[i].shape() != params_[i].shape()) {
      throw errors::shape_mismatch("optimizer step: gradient " + shape_str(grads[i].shape()) + " for parameter " +
                                   std::to_string(i) + " of shape " + shape_str(params_[i].shape()));
    }
    if (grads[i].dtype() != params_[i].dtype()) {
      throw errors::dtype_mismatch("optimizer step: gradient dtype differs from parameter " + std::to_string(i));
    }
    update(i, params_[i], grads[i]);
  }
}

void Optimizer::step() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  step(grads);
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

Sgd::Sgd(std::vector<Tensor> params, SgdOptions options)
    : Optimizer(std::move(params)), options_(options), momentum_buffers_(this->params().size()) {
  if (options.lr < 0) throw errors::invalid_argument("SGD: invalid learning rate " + std::to_string(options.lr));
  if (options.momentum < 0) throw errors::invalid_argument("SGD: invalid momentum " + std::to_string(options.momentum));
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    throw errors::invalid_argument("SGD: Nesterov momentum requires a momentum and zero dampening");
  }
}

void Sgd::update(size_t i, Tensor& param, const Tensor& grad) {
  Tensor d_p = grad;
  if (options_.weight_decay != 0) d_p = add(d_p, mul(param, options_.weight_decay));
  if (options_.momentum != 0) {
    Tensor& buf = momentum_buffers_[i];
    if (!buf.defined()) {
      buf = clone(d_p);
    } else {
      mul_(buf, options_.momentum);
      add_(buf, d_p, 1.0 - options_.dampening);
    }
    d_p = options_.nesterov ? add(d_p, mul(buf, options_.momentum)) : buf;
  }
  add_(param, d_p, -options_.lr);
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params)), options_(options), steps_(this->params().size(), 0),
      exp_avg_(this->params().size()), exp_avg_sq_(this->params().size()) {
  if (options.lr < 0) throw errors::invalid_argument("Adam: invalid learning rate " + std::to_string(options.lr));
  if (options.eps < 0) throw errors::invalid_argument("Adam: invalid epsilon " + std::to_string(options.eps));
  if (options.beta1 < 0 || options.beta1 >= 1 || options.beta2 < 0 || options.beta2 >= 1) {
    throw errors::invalid_argument("Adam: betas must be in [0, 1)");
  }
}

void Adam::update(size_t i, Tensor& param, const Tensor& g) {
  Tensor grad = g;
  if (options_.weight_decay != 0) grad = add(grad, mul(param, options_.weight_decay));
  if (!exp_avg_[i].defined()) {
    exp_avg_[i] = zeros_like(param);
    exp_avg_sq_[i] = zeros_like(param);
  }
  const int64_t step = ++steps_[i];
  Tensor& m = exp_avg_[i];
  Tensor& v = exp_avg_sq_[i];
  // PyTorch 1.13's order: m.mul_(beta1).add_(grad, 1 - beta1); v.mul_(beta2).addcmul_(grad, grad, 1 - beta2).
  mul_(m, options_.beta1);
  add_(m, grad, 1.0 - options_.beta1);
  mul_(v, options_.beta2);
  addcmul_(v, grad, grad, 1.0 - options_.beta2);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step));
  const double step_size = options_.lr / bias_correction1;
  // denom = sqrt(v) / sqrt(bias_correction2) + eps; param -= step_size * m / denom.
  Tensor denom = clone(v);
  sqrt_(denom);
  denom = div(denom, full(param.shape(), std::sqrt(bias_correction2), param.dtype()));
  add_(denom, full(param.shape(), options_.eps, param.dtype()));
  add_(param, div(m, denom), -step_size);
}

}  // namespace dagsim::optim
