#include "core/optim/optimizer.h"

#include <algorithm>
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
  DAGSIM_ASSERT(std::all_of(params_.begin(), params_.end(), [](const Tensor& p) { return p.defined(); }));
}

void Optimizer::step(const std::vector<Tensor>& grads) {
  if (grads.size() != params_.size()) {
    throw errors::invalid_argument("optimizer step: " + std::to_string(grads.size()) + " gradients for " +
                                   std::to_string(params_.size()) + " parameters");
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Shape before = params_[i].shape();
    const uint32_t version = params_[i].version();
    if (grads[i].shape() != params_[i].shape()) {
      throw errors::shape_mismatch("optimizer step: gradient " + shape_str(grads[i].shape()) + " for parameter " +
                                   std::to_string(i) + " of shape " + shape_str(params_[i].shape()));
    }
    if (grads[i].dtype() != params_[i].dtype()) {
      throw errors::dtype_mismatch("optimizer step: gradient dtype differs from parameter " + std::to_string(i));
    }
    update(i, params_[i], grads[i]);
    // Updates are in place: the same tensor (the caller's handles see it), its shape kept, and
    // its version bumped so a graph that saved it fails its backward (modified_by_inplace).
    DAGSIM_ASSERT(params_[i].shape() == before);
    DAGSIM_ASSERT(params_[i].version() != version);  // bumped (a 32-bit count: != survives its wrap)
  }
}

void Optimizer::step() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  DAGSIM_ASSERT_EQ(grads.size(), params_.size());
  step(grads);
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
  DAGSIM_ASSERT(std::none_of(params_.begin(), params_.end(), [](const Tensor& p) { return p.grad().defined(); }));
}

void Optimizer::load_state(size_t i, const std::vector<Tensor>& state) {
  if (i >= params_.size()) {
    throw errors::invalid_argument("optimizer state: no parameter " + std::to_string(i) + " (there are " +
                                   std::to_string(params_.size()) + ")");
  }
  const std::string what = "optimizer state of parameter " + std::to_string(i);
  if (!state.empty() && state.size() != state_size()) {
    throw errors::invalid_argument(what + ": " + std::to_string(state.size()) + " tensors, expected 0 or " +
                                   std::to_string(state_size()));
  }
  for (size_t k = 0; k < state.size(); ++k) {
    const Tensor& t = state[k];
    // Every state tensor has the parameter's shape but Adam's step count.
    const bool is_step = state_size() == 3 && k == 0;
    if (!t.defined() || t.dtype() != params_[i].dtype() || t.shape() != (is_step ? Shape{1} : params_[i].shape())) {
      throw errors::invalid_argument(what + ": tensor " + std::to_string(k) + " has the wrong form" +
                                     (t.defined() ? " " + shape_str(t.shape()) : std::string(" (undefined)")));
    }
  }
  set_state(i, state);
}

Sgd::Sgd(std::vector<Tensor> params, SgdOptions options)
    : Optimizer(std::move(params)), options_(options), momentum_buffers_(this->params().size()) {
  // Written so that NaN fails them too: options can come off the wire (dagsim.optim.create).
  if (!(options.lr >= 0)) throw errors::invalid_argument("SGD: invalid learning rate " + std::to_string(options.lr));
  if (!(options.momentum >= 0)) throw errors::invalid_argument("SGD: invalid momentum " + std::to_string(options.momentum));
  if (!std::isfinite(options.dampening) || !std::isfinite(options.weight_decay)) {
    throw errors::invalid_argument("SGD: dampening and weight decay must be finite numbers");
  }
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    throw errors::invalid_argument("SGD: Nesterov momentum requires a momentum and zero dampening");
  }
  DAGSIM_ASSERT_EQ(momentum_buffers_.size(), this->params().size());  // one buffer per parameter
}

void Sgd::update(size_t i, Tensor& param, const Tensor& grad) {
  DAGSIM_ASSERT(i < momentum_buffers_.size() && grad.shape() == param.shape());  // step() checked the shape
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
    DAGSIM_ASSERT(buf.shape() == param.shape());
  }
  DAGSIM_ASSERT(d_p.shape() == param.shape());  // add_ in place never broadcasts the parameter
  add_(param, d_p, -options_.lr);
}

std::vector<Tensor> Sgd::state(size_t i) const {
  DAGSIM_ASSERT(i < momentum_buffers_.size());
  if (!momentum_buffers_[i].defined()) return {};
  return {clone(momentum_buffers_[i])};
}

void Sgd::set_state(size_t i, const std::vector<Tensor>& state) {
  DAGSIM_ASSERT(i < momentum_buffers_.size() && state.size() <= 1);
  momentum_buffers_[i] = state.empty() ? Tensor() : clone(state[0]);
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Optimizer(std::move(params)), options_(options), steps_(this->params().size(), 0),
      exp_avg_(this->params().size()), exp_avg_sq_(this->params().size()) {
  // Written so that NaN fails them too: options can come off the wire (dagsim.optim.create).
  if (!(options.lr >= 0)) throw errors::invalid_argument("Adam: invalid learning rate " + std::to_string(options.lr));
  if (!(options.eps >= 0)) throw errors::invalid_argument("Adam: invalid epsilon " + std::to_string(options.eps));
  if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1)) {
    throw errors::invalid_argument("Adam: betas must be in [0, 1)");
  }
  if (!std::isfinite(options.weight_decay)) throw errors::invalid_argument("Adam: weight decay must be a finite number");
  DAGSIM_ASSERT(steps_.size() == this->params().size() && exp_avg_.size() == steps_.size() &&
                exp_avg_sq_.size() == steps_.size());
}

namespace {
// A tensor of `like`'s shape, dtype and device filled with `value` (a GPU parameter's constants
// live on its GPU).
Tensor full_like(const Tensor& like, double value) {
  Tensor t = zeros_like(like);
  fill_(t, value);
  return t;
}
}  // namespace

void Adam::update(size_t i, Tensor& param, const Tensor& g) {
  DAGSIM_ASSERT(i < steps_.size() && g.shape() == param.shape());
  Tensor grad = g;
  if (options_.weight_decay != 0) grad = add(grad, mul(param, options_.weight_decay));
  if (!exp_avg_[i].defined()) {
    exp_avg_[i] = zeros_like(param);
    exp_avg_sq_[i] = zeros_like(param);
  }
  DAGSIM_ASSERT(exp_avg_[i].defined() == exp_avg_sq_[i].defined());  // made together
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
  // beta < 1 and step >= 1: both corrections are positive, so the divisions below are safe.
  DAGSIM_ASSERT(bias_correction1 > 0 && bias_correction2 > 0);
  const double step_size = options_.lr / bias_correction1;
  // denom = sqrt(v) / sqrt(bias_correction2) + eps; param -= step_size * m / denom.
  Tensor denom = clone(v);
  sqrt_(denom);
  denom = div(denom, full_like(param, std::sqrt(bias_correction2)));
  add_(denom, full_like(param, options_.eps));
  add_(param, div(m, denom), -step_size);
}

std::vector<Tensor> Adam::state(size_t i) const {
  DAGSIM_ASSERT(i < steps_.size());
  if (steps_[i] == 0) return {};
  DAGSIM_ASSERT(exp_avg_[i].defined() && exp_avg_sq_[i].defined());
  return {from_values({1}, {static_cast<double>(steps_[i])}, params()[i].dtype()), clone(exp_avg_[i]), clone(exp_avg_sq_[i])};
}

void Adam::set_state(size_t i, const std::vector<Tensor>& state) {
  DAGSIM_ASSERT(i < steps_.size() && (state.empty() || state.size() == 3));
  if (state.empty()) {
    steps_[i] = 0;
    exp_avg_[i] = Tensor();
    exp_avg_sq_[i] = Tensor();
    return;
  }
  const double step = state[0].item();
  if (!(step >= 1 && step <= 1e15 && step == std::floor(step))) {
    throw errors::invalid_argument("optimizer state of parameter " + std::to_string(i) + ": Adam step " +
                                   std::to_string(step) + " is not a count");
  }
  steps_[i] = static_cast<int64_t>(step);
  exp_avg_[i] = clone(state[1]);
  exp_avg_sq_[i] = clone(state[2]);
}

}  // namespace dagsim::optim
