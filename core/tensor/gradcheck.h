// gradcheck: checks an op's backward against central finite differences, after
// torch.autograd.gradcheck.
//
// For every input that requires grad and every element of it, the numerical Jacobian column is
// (f(x + eps) - f(x - eps)) / (2 eps), computed under NoGradGuard on private copies of the inputs;
// the analytic Jacobian row for every output element comes from autograd::Engine::grad with a
// one-hot grad_output (retain_graph = true, so one forward serves every row). The two agree when
// |analytic - numerical| <= atol + rtol * |numerical| for every entry, as torch.allclose.
//
// Contract: float64 only, because eps = 1e-6 in float32 is below the rounding error; an input
// that requires grad, or an output, of another dtype throws dtype_mismatch. Inputs that do not
// require grad (a loss target, say) are passed through untouched and not differentiated; at least
// one input must require grad (invalid_argument otherwise). `fn` must be deterministic and must
// not modify its inputs. The caller's inputs are never modified, nor are their .grad fields.
//
// Determinism: no clocks and no randomness; the same fn and inputs give the same result.
#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor/tensor.h"

namespace dagsim {

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool passed = true;
  // Empty when passed. Otherwise names the output, the input index, the elements (flat and as a
  // multi-index) and the numerical and analytic values of the first mismatching Jacobian entry,
  // plus how many entries differ and the largest difference, so a test can print it as is.
  std::string message;

  explicit operator bool() const { return passed; }
};

// The form every fn is normalised to: all outputs as a list.
using GradcheckFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

namespace detail {
GradcheckResult gradcheck_outputs(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                  const GradcheckOptions& opts);
}  // namespace detail

// `fn` takes the inputs as `const std::vector<Tensor>&` and returns either one Tensor or a
// std::vector<Tensor>. Throws dtype_mismatch / invalid_argument as described above; a wrong
// gradient is not an exception but a failed result.
template <typename F>
GradcheckResult gradcheck(F&& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opts = {}) {
  using Result = std::decay_t<std::invoke_result_t<F&, const std::vector<Tensor>&>>;
  static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::vector<Tensor>>,
                "gradcheck: fn must return Tensor or std::vector<Tensor>");
  if constexpr (std::is_same_v<Result, Tensor>) {
    return detail::gradcheck_outputs(
        [&fn](const std::vector<Tensor>& xs) { return std::vector<Tensor>{fn(xs)}; }, inputs, opts);
  } else {
    return detail::gradcheck_outputs(
        [&fn](const std::vector<Tensor>& xs) { return fn(xs); }, inputs, opts);
  }
}

}  // namespace dagsim
