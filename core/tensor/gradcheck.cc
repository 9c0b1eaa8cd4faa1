// gradcheck: numerical versus analytic Jacobians (see gradcheck.h for the contract).
#include "core/tensor/gradcheck.h"

#include <cmath>
#include <sstream>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

namespace dagsim::detail {

namespace {

// Grad mode on for a scope: the analytic pass must record a graph even when the caller runs
// under NoGradGuard, as torch.autograd.gradcheck runs under enable_grad.
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(autograd::GradMode::is_enabled()) {
    autograd::GradMode::set_enabled(true);
  }
  ~EnableGradGuard() { autograd::GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// "[1, 0]": the multi-index of row-major element `flat` of `shape`.
std::string index_str(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return shape_str(index);
}

// The flattened outputs, concatenated: the column index space of a Jacobian.
struct OutputLayout {
  std::vector<Shape> shapes;
  std::vector<int64_t> offsets;  // where output k starts
  int64_t total = 0;

  explicit OutputLayout(const std::vector<Tensor>& outputs) {
    for (const Tensor& out : outputs) {
      shapes.push_back(out.shape());
      offsets.push_back(total);
      total += out.numel();
    }
  }
  // Which output a column belongs to.
  size_t output_of(int64_t column) const {
    size_t k = 0;
    while (k + 1 < offsets.size() && offsets[k + 1] <= column) ++k;
    return k;
  }
};

void check_outputs(const std::vector<Tensor>& outputs) {
  if (outputs.empty()) throw errors::invalid_argument("gradcheck: fn returned no outputs");
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!outputs[k].defined()) {
      throw errors::invalid_argument("gradcheck: output " + std::to_string(k) + " is undefined");
    }
    if (outputs[k].dtype() != Dtype::float64) {
      throw errors::dtype_mismatch("gradcheck: output " + std::to_string(k) + " is " +
                                   describe(outputs[k]) + "; gradcheck needs float64");
    }
  }
}

// fn(inputs) flattened into one row-major vector. The values are copied out at once because an
// output may be a view of an input that the caller perturbs next.
std::vector<double> evaluate_flat(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                  const OutputLayout& layout) {
  const std::vector<Tensor> outputs = fn(inputs);
  check_outputs(outputs);
  if (outputs.size() != layout.shapes.size()) {
    throw errors::invalid_argument("gradcheck: fn returned " + std::to_string(outputs.size()) +
                                   " outputs on a perturbed input, " +
                                   std::to_string(layout.shapes.size()) + " on the original");
  }
  std::vector<double> flat;
  flat.reserve(static_cast<size_t>(layout.total));
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].shape() != layout.shapes[k]) {
      throw errors::shape_mismatch("gradcheck: output " + std::to_string(k) + " has shape " +
                                   shape_str(outputs[k].shape()) + " on a perturbed input, " +
                                   shape_str(layout.shapes[k]) + " on the original");
    }
    const std::vector<double> values = outputs[k].to_vector();
    flat.insert(flat.end(), values.begin(), values.end());
  }
  return flat;
}

// jacobian[e][c]: d(output column c) / d(element e of the input).
using Jacobian = std::vector<std::vector<double>>;

Jacobian numerical_jacobian(const GradcheckFn& fn, const std::vector<Tensor>& inputs, size_t which,
                            const OutputLayout& layout, double eps) {
  autograd::NoGradGuard no_grad;
  // Private copies: the caller's tensors (and the graph the analytic pass saved) stay untouched.
  std::vector<Tensor> work = inputs;
  for (Tensor& t : work) {
    if (t.defined() && t.requires_grad()) t = detach(t);
  }
  work[which] = clone(inputs[which]);
  double* x = work[which].data<double>();
  const int64_t n = work[which].numel();
  Jacobian jacobian(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    const double original = x[e];
    x[e] = original + eps;
    const std::vector<double> plus = evaluate_flat(fn, work, layout);
    x[e] = original - eps;
    const std::vector<double> minus = evaluate_flat(fn, work, layout);
    x[e] = original;
    std::vector<double>& column = jacobian[static_cast<size_t>(e)];
    column.resize(static_cast<size_t>(layout.total));
    for (size_t c = 0; c < column.size(); ++c) column[c] = (plus[c] - minus[c]) / (2.0 * eps);
  }
  return jacobian;
}

// One analytic Jacobian per differentiated input, one backward per output element.
std::vector<Jacobian> analytic_jacobians(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& diff_inputs,
                                         const OutputLayout& layout) {
  std::vector<Jacobian> jacobians;
  for (const Tensor& input : diff_inputs) {
    jacobians.emplace_back(static_cast<size_t>(input.numel()),
                           std::vector<double>(static_cast<size_t>(layout.total), 0.0));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    // An output with no history does not depend on any input: its rows stay zero.
    if (!outputs[k].requires_grad()) continue;
    for (int64_t e = 0; e < outputs[k].numel(); ++e) {
      Tensor one_hot = zeros(outputs[k].shape(), Dtype::float64);
      one_hot.data<double>()[e] = 1.0;
      const autograd::variable_list grads = autograd::Engine::grad(
          {outputs[k]}, diff_inputs, {one_hot}, /*retain_graph=*/true, /*allow_unused=*/true);
      const size_t column = static_cast<size_t>(layout.offsets[k] + e);
      for (size_t d = 0; d < diff_inputs.size(); ++d) {
        if (!grads[d].defined()) continue;  // unused input: a zero row
        DAGSIM_ASSERT(grads[d].shape() == diff_inputs[d].shape());
        const std::vector<double> values = grads[d].to_vector();
        for (size_t i = 0; i < values.size(); ++i) jacobians[d][i][column] = values[i];
      }
    }
  }
  return jacobians;
}

}  // namespace

GradcheckResult gradcheck_outputs(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                  const GradcheckOptions& opts) {
  std::vector<size_t> diff;  // indices of the inputs to differentiate
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    if (inputs[i].dtype() != Dtype::float64) {
      throw errors::dtype_mismatch("gradcheck: input " + std::to_string(i) + " is " +
                                   describe(inputs[i]) + "; gradcheck needs float64");
    }
    diff.push_back(i);
  }
  if (diff.empty()) {
    throw errors::invalid_argument("gradcheck: expected at least one input that requires grad");
  }

  std::vector<Tensor> outputs;
  {
    EnableGradGuard enable_grad;
    outputs = fn(inputs);
  }
  check_outputs(outputs);
  const OutputLayout layout(outputs);
  std::vector<Tensor> diff_inputs;
  for (size_t i : diff) diff_inputs.push_back(inputs[i]);
  const std::vector<Jacobian> analytic = analytic_jacobians(outputs, diff_inputs, layout);

  GradcheckResult result;
  int64_t mismatches = 0;
  int64_t entries = 0;
  double largest = 0.0;
  for (size_t d = 0; d < diff.size(); ++d) {
    const Jacobian numerical = numerical_jacobian(fn, inputs, diff[d], layout, opts.eps);
    for (size_t e = 0; e < numerical.size(); ++e) {
      for (size_t c = 0; c < numerical[e].size(); ++c) {
        const double num = numerical[e][c];
        const double ana = analytic[d][e][c];
        const double difference = std::abs(ana - num);
        ++entries;
        // Written so that a NaN on either side counts as a mismatch.
        if (difference <= opts.atol + opts.rtol * std::abs(num)) continue;
        ++mismatches;
        if (std::isnan(difference) || difference > largest) largest = difference;
        if (!result.passed) continue;
        result.passed = false;
        const size_t k = layout.output_of(static_cast<int64_t>(c));
        const int64_t out_element = static_cast<int64_t>(c) - layout.offsets[k];
        std::ostringstream out;
        out.precision(10);
        out << "gradcheck: Jacobian mismatch for output " << k << " with respect to input "
            << diff[d] << " (shape " << shape_str(inputs[diff[d]].shape()) << "), input element "
            << e << " " << index_str(static_cast<int64_t>(e), inputs[diff[d]].shape())
            << ", output element " << out_element << " " << index_str(out_element, layout.shapes[k])
            << ": numerical " << num << ", analytic " << ana << " (|difference| " << difference
            << " > atol " << opts.atol << " + rtol " << opts.rtol << " * |numerical|)";
        result.message = out.str();
      }
    }
  }
  if (!result.passed) {
    std::ostringstream out;
    out.precision(6);
    out << "; " << mismatches << " of " << entries << " Jacobian entries differ, largest |difference| "
        << largest;
    result.message += out.str();
  }
  return result;
}

}  // namespace dagsim::detail
