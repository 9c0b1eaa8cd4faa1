// Shape arithmetic for the op table (op_shapes.h).
#include "core/rpc/op_shapes.h"

#include <algorithm>

namespace dagsim::rpc::op_shapes {

std::optional<size_t> dim_index(const Attributes& attributes, const std::string& key, size_t rank,
                                std::optional<double> fallback) {
  auto it = attributes.find(key);
  const std::optional<double> given = it != attributes.end() ? std::optional<double>(it->second) : fallback;
  if (!given) return std::nullopt;
  const double d = *given < 0 ? *given + static_cast<double>(rank) : *given;
  // Written so that NaN fails it before the cast (a NaN cast to an integer is undefined).
  if (!(d >= 0 && d < static_cast<double>(rank)) || d != static_cast<double>(static_cast<int64_t>(d))) return std::nullopt;
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
  const std::optional<Shape> batch = broadcast(Shape(x.begin(), x.end() - 2), Shape(y.begin(), y.end() - 2));
  if (!batch) return std::nullopt;
  Shape out = *batch;
  if (a.size() > 1) out.push_back(x[x.size() - 2]);
  if (b.size() > 1) out.push_back(y[y.size() - 1]);
  return out;
}

std::optional<Shape> linear(const std::vector<Shape>& s) {
  if (s.size() < 2 || s[0].empty() || s[1].size() != 2 || s[0].back() != s[1][1]) return std::nullopt;
  Shape out = s[0];
  out.back() = s[1][0];
  return out;
}

std::optional<Shape> reduce(const Shape& s, const Attributes& attributes) {
  if (attributes.count("dim") == 0) return Shape{};
  const std::optional<size_t> d = dim_index(attributes, "dim", s.size(), std::nullopt);
  if (!d) return std::nullopt;
  Shape out = s;
  auto keep = attributes.find("keepdim");
  if (keep != attributes.end() && keep->second != 0) {
    out[*d] = 1;
  } else {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(*d));
  }
  return out;
}

std::optional<Shape> cat(const std::vector<Shape>& s, const Attributes& attributes) {
  if (s.empty()) return std::nullopt;
  const auto d = dim_index(attributes, "dim", s[0].size(), 0.0);
  if (!d) return std::nullopt;
  Shape out = s[0];
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i].size() != out.size()) return std::nullopt;
    for (size_t k = 0; k < out.size(); ++k) {
      if (k != *d && s[i][k] != out[k]) return std::nullopt;
    }
    // Each part is within the element limit, so a sum of a few thousand cannot overflow.
    out[*d] += s[i][*d];
  }
  return out;
}

std::optional<Shape> stack(const std::vector<Shape>& s, const Attributes& attributes) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [&](const Shape& x) { return x == s[0]; })) return std::nullopt;
  const auto d = dim_index(attributes, "dim", s[0].size() + 1, 0.0);
  if (!d) return std::nullopt;
  Shape out = s[0];
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(*d), static_cast<int64_t>(s.size()));
  return out;
}

OpShapes split(const Shape& s, const Attributes& attributes, bool by_chunks) {
  const auto d = dim_index(attributes, "dim", s.size(), 0.0);
  const char* key = by_chunks ? "chunks" : "split_size";
  auto it = attributes.find(key);
  // The op's own bound on an integer attribute (integer_attribute: |v| <= 9e15), not a tighter one:
  // a count the op accepts must have shapes here, or its results escape the registry's check
  // (the execute fuzzer: chunk into 2 * 10^7 pieces of [2^20] gave 2^20 results). Counting pieces
  // stops past kMaxSplitPieces, so a large count costs nothing.
  if (!d || it == attributes.end() || !(it->second >= 1 && it->second <= 9.0e15)) return std::nullopt;
  const int64_t size = s[*d];
  const auto n = static_cast<int64_t>(it->second);
  // torch.chunk: pieces of ceil(size / chunks); torch.split: pieces of split_size, the last smaller.
  const int64_t piece = by_chunks ? size / n + (size % n != 0 ? 1 : 0) : n;  // ceil, without overflow
  std::vector<Shape> out;
  for (int64_t start = 0; start < size || (size == 0 && out.empty()); start += piece) {
    Shape p = s;
    p[*d] = std::min(piece, size - start);
    out.push_back(p);
    if (piece == 0) break;
    // A zero-element [2^40, 0] split by 1 would be 2^40 pieces: counting stops once there are
    // more than any reply carries (kMaxSplitPieces), which is all a caller needs to refuse it.
    if (out.size() > kMaxSplitPieces) break;
  }
  return out;
}

}  // namespace dagsim::rpc::op_shapes
