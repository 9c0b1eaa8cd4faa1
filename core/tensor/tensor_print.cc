// Printing a Tensor (tensor_print.h).
#include "core/tensor/tensor_print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

namespace dagsim {
namespace {

constexpr int64_t kEllipsis = -1;
constexpr std::string_view kOpen = "tensor(";

// The entries of a dimension of `size` that are shown: all, or the first and last `edgeitems`
// around kEllipsis.
std::vector<int64_t> shown_indices(int64_t size, bool summarise, int64_t edgeitems) {
  std::vector<int64_t> out;
  if (!summarise || size <= 2 * edgeitems) {
    for (int64_t i = 0; i < size; ++i) out.push_back(i);
    return out;
  }
  for (int64_t i = 0; i < edgeitems; ++i) out.push_back(i);
  out.push_back(kEllipsis);
  for (int64_t i = size - edgeitems; i < size; ++i) out.push_back(i);
  return out;
}

// One format for every shown value, as PyTorch's _Formatter picks it.
class ValueFormat {
 public:
  ValueFormat(const std::vector<double>& values, int precision) : precision_(precision) {
    double max_abs = 0;
    double min_abs = INFINITY;
    bool any_finite = false;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      any_finite = true;
      integral_ = integral_ && v == std::nearbyint(v);
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    }
    if (!any_finite) return;
    if (integral_) {
      scientific_ = max_abs > 1e8;
    } else if (std::isfinite(min_abs)) {
      scientific_ = max_abs / min_abs > 1000 || max_abs > 1e8 || min_abs < 1e-4;
    }
    for (double v : values) width_ = std::max(width_, text(v).size());
  }

  // The value right-aligned to the common width.
  std::string padded(double v) const {
    std::string t = text(v);
    return std::string(width_ - std::min(width_, t.size()), ' ') + t;
  }

 private:
  std::string text(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buffer[64];
    if (scientific_) {
      std::snprintf(buffer, sizeof buffer, "%.*e", precision_, v);
    } else if (integral_) {
      std::snprintf(buffer, sizeof buffer, "%.0f.", v);
    } else {
      std::snprintf(buffer, sizeof buffer, "%.*f", precision_, v);
    }
    return buffer;
  }

  int precision_;
  bool integral_ = true;
  bool scientific_ = false;
  size_t width_ = 0;
};

class Printer {
 public:
  Printer(const Tensor& t, const TensorPrintOptions& options)
      : shape_(t.shape()), summarise_(t.numel() > options.threshold), edgeitems_(std::max<int64_t>(options.edgeitems, 1)) {
    strides_.assign(shape_.size(), 1);
    for (size_t d = shape_.size(); d-- > 1;) strides_[d - 1] = strides_[d] * shape_[d];
    if (t.device().is_cpu()) {
      // Read in place: a summarised tensor's unshown values are never touched.
      value_ = [&t](int64_t i) { return dispatch_dtype(t.dtype(), [&]<typename T>() { return static_cast<double>(t.data<T>()[i]); }); };
    } else {
      host_ = t.to_vector();
      value_ = [this](int64_t i) { return host_[static_cast<size_t>(i)]; };
    }
    std::vector<double> shown;
    visit(0, 0, [&](int64_t offset) { shown.push_back(value_(offset)); });
    format_.emplace(shown, options.precision);
  }

  void body(std::string& out) { emit(out, 0, 0); }

 private:
  // Calls `f` with the flat offset of every shown element, in order.
  void visit(size_t d, int64_t offset, const std::function<void(int64_t)>& f) const {
    if (d == shape_.size()) return f(offset);
    for (int64_t i : shown_indices(shape_[d], summarise_, edgeitems_)) {
      if (i != kEllipsis) visit(d + 1, offset + i * strides_[d], f);
    }
  }

  void emit(std::string& out, size_t d, int64_t offset) const {
    if (d == shape_.size()) {
      out += format_->padded(value_(offset));
      return;
    }
    out += "[";
    const std::vector<int64_t> indices = shown_indices(shape_[d], summarise_, edgeitems_);
    for (size_t k = 0; k < indices.size(); ++k) {
      if (k > 0) {
        // The innermost dimension on one line; an outer one a line per entry (a blank line more
        // per level above), indented under its bracket, as PyTorch prints.
        out += d + 1 == shape_.size() ? ", " : "," + std::string(shape_.size() - d - 1, '\n') + std::string(kOpen.size() + d + 1, ' ');
      }
      if (indices[k] == kEllipsis) {
        out += "...";
        continue;
      }
      emit(out, d + 1, offset + indices[k] * strides_[d]);
    }
    out += "]";
  }

  const Shape& shape_;
  std::vector<int64_t> strides_;
  bool summarise_;
  int64_t edgeitems_;
  std::vector<double> host_;
  std::function<double(int64_t)> value_;
  std::optional<ValueFormat> format_;
};

}  // namespace

std::string format_tensor(const Tensor& t, const TensorPrintOptions& options) {
  if (!t.defined()) return "tensor(undefined)";
  std::string out(kOpen);
  if (t.numel() == 0) {
    out += "[]";
  } else {
    Printer(t, options).body(out);
  }
  out += ", shape=" + shape_str(t.shape());
  if (!t.device().is_cpu()) out += ", device='" + t.device().str() + "'";
  out += ", dtype=" + std::string(dtype_name(t.dtype()));
  if (t.requires_grad()) out += ", requires_grad=True";
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << format_tensor(t); }

}  // namespace dagsim
