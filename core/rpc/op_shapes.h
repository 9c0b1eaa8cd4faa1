// Shape arithmetic for the op table's shape functions (op_table.cc): what a result's shape is,
// given argument shapes, before anything is allocated. Each returns nullopt where the shapes do
// not fit the op (the op itself then fails with its own message when it runs).
#pragma once

#include <optional>
#include <string>

#include "core/rpc/op_table.h"

namespace dagsim::rpc::op_shapes {

// A dim attribute (negative counts from the end) as an index into a rank-`rank` shape; nullopt
// when absent without a fallback, or out of range.
std::optional<size_t> dim_index(const Attributes& attributes, const std::string& key, size_t rank,
                                std::optional<double> fallback);
// torch.broadcast_shapes of two shapes.
std::optional<Shape> broadcast(const Shape& a, const Shape& b);
// torch.matmul's result shape.
std::optional<Shape> matmul(const Shape& a, const Shape& b);
// linear(input [..., in], weight [out, in][, bias]) -> [..., out]
std::optional<Shape> linear(const std::vector<Shape>& s);
// sum/mean/max/min over `dim` (all elements without it), keepdim or not.
std::optional<Shape> reduce(const Shape& s, const Attributes& attributes);
// cat (along `dim`) or stack (a new `dim`) of shapes.
std::optional<Shape> cat(const std::vector<Shape>& s, const Attributes& attributes);
std::optional<Shape> stack(const std::vector<Shape>& s, const Attributes& attributes);
// The pieces of split (by split_size) or chunk (into chunks) along `dim`; past kMaxSplitPieces
// only the first kMaxSplitPieces + 1 (a reply carries at most CodecLimits::max_tensors = 65536).
inline constexpr size_t kMaxSplitPieces = 65536;
OpShapes split(const Shape& s, const Attributes& attributes, bool by_chunks);

// One result of shape `s` (or none).
inline OpShapes one(std::optional<Shape> s) {
  if (!s) return std::nullopt;
  return std::vector<Shape>{std::move(*s)};
}

}  // namespace dagsim::rpc::op_shapes
