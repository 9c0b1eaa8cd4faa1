// Statement result shapes at load time (program_shapes.h).
#include "scenarios/workloads/program/program_shapes.h"

#include <algorithm>
#include <limits>

namespace dagsim::scenarios {

namespace {

// A dim attribute (negative counts from the end) as an index into a rank-`rank` shape.
std::optional<size_t> dim_index(const std::map<std::string, double>& attributes, const std::string& key, size_t rank,
                                std::optional<double> fallback) {
  auto it = attributes.find(key);
  const std::optional<double> given = it != attributes.end() ? std::optional<double>(it->second) : fallback;
  if (!given) return std::nullopt;
  const double d = *given < 0 ? *given + static_cast<double>(rank) : *given;
  if (d < 0 || d >= static_cast<double>(rank)) return std::nullopt;
  return static_cast<size_t>(d);
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

std::optional<Shape> matmul(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return std::nullopt;
  if (a.size() == 1 && b.size() == 1) return a[0] == b[0] ? std::optional<Shape>(Shape{}) : std::nullopt;
  // As torch.matmul: a vector is a matrix of one row (left) or one column (right), dropped after.
  const Shape x = a.size() == 1 ? Shape{1, a[0]} : a;
  const Shape y = b.size() == 1 ? Shape{b[0], 1} : b;
  if (x[x.size() - 1] != y[y.size() - 2]) return std::nullopt;
  const std::optional<Shape> batch =
      broadcast(Shape(x.begin(), x.end() - 2), Shape(y.begin(), y.end() - 2));
  if (!batch) return std::nullopt;
  Shape out = *batch;
  if (a.size() > 1) out.push_back(x[x.size() - 2]);
  if (b.size() > 1) out.push_back(y[y.size() - 1]);
  return out;
}

// linear(input [..., in], weight [out, in]) -> [..., out]
std::optional<Shape> linear(const std::vector<Shape>& s) {
  if (s.size() < 2 || s[0].empty() || s[1].size() != 2 || s[0].back() != s[1][1]) return std::nullopt;
  Shape out = s[0];
  out.back() = s[1][0];
  return out;
}

}  // namespace

int64_t saturating_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (d < 0) return std::numeric_limits<int64_t>::max();
    n = n > std::numeric_limits<int64_t>::max() / d ? std::numeric_limits<int64_t>::max() : n * d;
  }
  return n;
}

std::optional<Shape> infer_result_shape(const std::string& call, const std::vector<Shape>& s,
                                        const std::map<std::string, double>& attributes) {
  const auto is = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return call == n; });
  };
  if (s.empty()) return std::nullopt;
  if (is({"add", "sub", "mul", "div", "relay_add", "relay_sub", "relay_mul", "relay_div"})) {
    return s.size() == 2 ? broadcast(s[0], s[1]) : std::nullopt;
  }
  if (is({"neg", "exp", "log", "tanh", "sigmoid", "relu", "clone", "pow", "softmax", "log_softmax", "to_here"})) {
    return s.size() == 1 ? std::optional<Shape>(s[0]) : std::nullopt;
  }
  if (call == "matmul") return s.size() == 2 ? matmul(s[0], s[1]) : std::nullopt;
  if (call == "mse_loss") return s.size() == 2 && s[0] == s[1] ? std::optional<Shape>(Shape{}) : std::nullopt;
  if (is({"linear", "mlp_layer"})) return s.size() <= 3 ? linear(s) : std::nullopt;
  if (is({"sum", "mean"})) {
    if (s.size() != 1) return std::nullopt;
    if (attributes.count("dim") == 0) return Shape{};
    const std::optional<size_t> d = dim_index(attributes, "dim", s[0].size(), std::nullopt);
    if (!d) return std::nullopt;
    Shape out = s[0];
    auto keep = attributes.find("keepdim");
    if (keep != attributes.end() && keep->second != 0) {
      out[*d] = 1;
    } else {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(*d));
    }
    return out;
  }
  if (call == "transpose") {
    if (s.size() != 1) return std::nullopt;
    const auto d0 = dim_index(attributes, "dim0", s[0].size(), 0.0), d1 = dim_index(attributes, "dim1", s[0].size(), 1.0);
    if (!d0 || !d1) return std::nullopt;
    Shape out = s[0];
    std::swap(out[*d0], out[*d1]);
    return out;
  }
  if (call == "narrow") {
    if (s.size() != 1 || attributes.count("length") == 0) return std::nullopt;
    const auto d = dim_index(attributes, "dim", s[0].size(), std::nullopt);
    const double length = attributes.at("length");
    if (!d || length < 0 || length > static_cast<double>(s[0][*d])) return std::nullopt;
    Shape out = s[0];
    out[*d] = static_cast<int64_t>(length);
    return out;
  }
  if (call == "cat") {
    const auto d = dim_index(attributes, "dim", s[0].size(), 0.0);
    if (!d) return std::nullopt;
    Shape out = s[0];
    for (size_t i = 1; i < s.size(); ++i) {
      if (s[i].size() != out.size()) return std::nullopt;
      for (size_t k = 0; k < out.size(); ++k) {
        if (k != *d && s[i][k] != out[k]) return std::nullopt;
      }
      // Each part is within the limit, so the sum of at most a few thousand cannot overflow.
      out[*d] += s[i][*d];
    }
    return out;
  }
  return std::nullopt;
}

uint64_t counted_tensor_bytes(const Program& program) {
  // Every shape here is within the element limit, so the sum of a few thousand cannot overflow.
  uint64_t elements = 0;
  for (const ProgramTensor& t : program.tensors) elements += 2 * static_cast<uint64_t>(saturating_numel(t.shape));
  for (const ProgramParameter& p : program.parameters) elements += 2 * static_cast<uint64_t>(saturating_numel(p.shape));
  for (const std::optional<Shape>& s : statement_shapes(program)) {
    if (s) elements += static_cast<uint64_t>(saturating_numel(*s));
  }
  return 2 * sizeof(double) * elements;
}

std::vector<std::optional<Shape>> statement_shapes(const Program& program) {
  std::map<std::string, std::optional<Shape>> known;
  for (const ProgramTensor& t : program.tensors) known[t.name] = t.shape;
  for (const ProgramParameter& p : program.parameters) known[p.name] = p.shape;
  std::vector<std::optional<Shape>> out;
  out.reserve(program.statements.size());
  for (const Statement& st : program.statements) {
    std::vector<Shape> shapes;
    bool all_known = true;
    for (const auto* names : {&st.args, &st.rrefs}) {
      for (const std::string& name : *names) {
        auto it = known.find(name);
        if (it == known.end() || !it->second) {
          all_known = false;
          break;
        }
        shapes.push_back(*it->second);
      }
    }
    std::optional<Shape> shape = all_known ? infer_result_shape(st.call, shapes, st.attributes) : std::nullopt;
    known[st.out] = shape;
    out.push_back(std::move(shape));
  }
  return out;
}

}  // namespace dagsim::scenarios
