// Optimizers: SGD (momentum, dampening, Nesterov, weight decay) and Adam (weight decay), with
// PyTorch's update rules and operation order (torch.optim.SGD / Adam, single-tensor
// implementations), so parameters match PyTorch's to rounding.
//
// step(grads) takes one gradient per parameter (undefined: that parameter is skipped, as a
// parameter whose .grad is None) so the DistributedOptimizer can step with gradients read from a
// distributed autograd context; step() uses the parameters' own .grad. Updates are in place, in
// no-grad mode, and bump the parameters' version counters: a graph that saved a parameter and is
// run backward after a step fails with modified_by_inplace instead of using a stale value.
#pragma once

#include <vector>

#include "core/tensor/tensor.h"

namespace dagsim::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;

  // Throws shape_mismatch / invalid_argument for a gradient that does not fit its parameter.
  void step(const std::vector<Tensor>& grads);
  void step();
  void zero_grad();
  const std::vector<Tensor>& params() const { return params_; }

  // Parameter i's optimizer state, as PyTorch's state_dict()["state"][i] holds it, in tensors (an
  // elastic job checkpoints it with the parameters): empty before the parameter's first update;
  // SGD with momentum {momentum_buffer}; Adam {step (shape [1]), exp_avg, exp_avg_sq}. Copies.
  virtual std::vector<Tensor> state(size_t i) const = 0;
  // Makes parameter i's state what state(i) returned on an optimizer of the same kind and options
  // (copies), so training goes on exactly as it would have. Throws invalid_argument naming the
  // parameter for a state of the wrong form (count, shape or dtype).
  void load_state(size_t i, const std::vector<Tensor>& state);

 protected:
  virtual void set_state(size_t i, const std::vector<Tensor>& state) = 0;
  // The tensors state(i) holds in a non-empty state.
  virtual size_t state_size() const = 0;
  // Updates parameter `i` with `grad` (defined, same shape and dtype).
  virtual void update(size_t i, Tensor& param, const Tensor& grad) = 0;

 private:
  std::vector<Tensor> params_;
};

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<Tensor> params, SgdOptions options);
  std::vector<Tensor> state(size_t i) const override;

 protected:
  void update(size_t i, Tensor& param, const Tensor& grad) override;
  void set_state(size_t i, const std::vector<Tensor>& state) override;
  size_t state_size() const override { return 1; }

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_buffers_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};

class Adam final : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options);
  std::vector<Tensor> state(size_t i) const override;

 protected:
  void update(size_t i, Tensor& param, const Tensor& grad) override;
  void set_state(size_t i, const std::vector<Tensor>& state) override;
  size_t state_size() const override { return 3; }

 private:
  AdamOptions options_;
  std::vector<int64_t> steps_;
  std::vector<Tensor> exp_avg_;
  std::vector<Tensor> exp_avg_sq_;
};

}  // namespace dagsim::optim
