// Indexing ops: gather, index_select and embedding, whose backwards scatter-add the gradient back
// to the positions that were read (a position read twice gets both gradients).
//
// dagsim has no integer dtype, so an index tensor is a float tensor (either dtype) holding
// integral values; each op checks every value is an integer in range before reading anything.
#include <cmath>

#include "core/autograd/op_backward.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/op_util.h"
#include "core/tensor/ops.h"

namespace dagsim {

using autograd::BackwardArgs;
using autograd::record_op;
using autograd::variable_list;

namespace {

// "5" for an integral value, "0.500000" otherwise, so messages show the index as given.
std::string index_str(double v) {
  if (v == std::floor(v) && std::fabs(v) < 0x1.0p53) return std::to_string(static_cast<int64_t>(v));
  return std::to_string(v);
}

// The values of `index` as positions in [0, size), row-major. Negative indices are out of range,
// as in torch.gather and torch.index_select.
std::vector<int64_t> read_indices(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(index.numel()));
  for (double v : index.to_vector()) {
    if (v != std::floor(v)) {  // also NaN and infinities
      throw errors::invalid_argument(std::string(op) + ": index " + index_str(v) +
                                     " is not an integer (index tensors hold integral values)");
    }
    if (v < 0 || v >= static_cast<double>(size)) {
      throw errors::index_out_of_range(std::string(op) + ": index " + index_str(v) +
                                       " is out of bounds for dimension " + std::to_string(dim) +
                                       " with size " + std::to_string(size));
    }
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

// Row-major (outer, inner) extents around `dim`.
void extents(const Shape& shape, int64_t dim, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) *outer *= shape[d];
    if (d > dim) *inner *= shape[d];
  }
}

// Sources grouped by destination, each group in source order (a counting sort): what
// LineOp::index_add reads, so every destination adds its sources in the order the CPU's loop
// over the sources did, on any device and without atomics.
struct Groups {
  std::vector<int64_t> order;   // source numbers, destination by destination
  std::vector<int64_t> starts;  // destination r's sources are order[starts[r] .. starts[r + 1])
};
Groups group_by_destination(const std::vector<int64_t>& destination, int64_t destinations) {
  Groups g;
  g.starts.assign(static_cast<size_t>(destinations) + 1, 0);
  for (int64_t d : destination) ++g.starts[static_cast<size_t>(d) + 1];
  for (size_t r = 0; r < static_cast<size_t>(destinations); ++r) g.starts[r + 1] += g.starts[r];
  g.order.resize(destination.size());
  std::vector<int64_t> next(g.starts.begin(), g.starts.end() - 1);
  for (size_t j = 0; j < destination.size(); ++j) {
    g.order[static_cast<size_t>(next[static_cast<size_t>(destination[j])]++)] = static_cast<int64_t>(j);
  }
  return g;
}

// A tensor of `shape` whose row r (of `inner` elements) is row source_row[r] of `a`.
Tensor take_rows(const Tensor& a, const Shape& shape, const std::vector<int64_t>& source_row, int64_t inner) {
  Tensor out = Tensor::empty(shape, a.dtype());
  if (out.numel() == 0) return out;
  const Tensor rows = index_array(source_row);
  LineArgs args;
  args.x = kernel_input(a);
  args.y = detail::bytes(out);
  args.index = index_data(rows);
  args.lines = out.numel();
  args.inner = inner;
  run_lines(LineOp::take, a.dtype(), args);
  return out;
}

// take_rows's backward: a tensor of `shape` (rows of `inner` elements) where each row is the sum
// of the rows of `g` taken from it (0 where none was), added in g's order: index_add, scatter_add.
Tensor add_rows_back(const Tensor& g, const Shape& shape, const std::vector<int64_t>& source_row, int64_t inner) {
  Tensor grad = Tensor::empty(shape, g.dtype());
  if (grad.numel() == 0) return grad;
  const Groups groups = group_by_destination(source_row, grad.numel() / inner);
  const Tensor order = index_array(groups.order);
  const Tensor starts = index_array(groups.starts);
  LineArgs args;
  args.x = kernel_input(g);
  args.y = detail::bytes(grad);
  args.index = index_data(order);
  args.starts = index_data(starts);
  args.lines = grad.numel();
  args.inner = inner;
  run_lines(LineOp::index_add, g.dtype(), args);
  return grad;
}

// The rows index_select(a, dim, idx) reads: row (o, k) of the output is row o * size + idx[k] of
// `a` seen as [outer * size, inner]. Empty when the output is (however large `outer` is).
std::vector<int64_t> selected_rows(const Shape& shape, int64_t dim, const std::vector<int64_t>& idx, int64_t* inner) {
  int64_t outer = 0;
  extents(shape, dim, &outer, inner);
  std::vector<int64_t> rows;
  if (idx.empty() || *inner == 0) return rows;
  rows.reserve(static_cast<size_t>(outer) * idx.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k : idx) rows.push_back(o * shape[static_cast<size_t>(dim)] + k);
  }
  return rows;
}

}  // namespace

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  DeviceGuard device_guard("gather", {&a, &index});
  detail::check_defined("gather", a);
  detail::check_defined("gather", index, "index");
  const int64_t d = detail::wrap_dim("gather", dim, a.shape());
  if (index.dim() != a.dim()) {
    throw errors::shape_mismatch("gather: index tensor must have the same number of dimensions as input; "
                                 "input has shape " + shape_str(a.shape()) + " and index " +
                                 shape_str(index.shape()));
  }
  for (int64_t k = 0; k < a.dim(); ++k) {
    if (k != d && index.shape()[k] > a.shape()[k]) {
      throw errors::shape_mismatch("gather: index of shape " + shape_str(index.shape()) +
                                   " is larger than input of shape " + shape_str(a.shape()) + " at dimension " +
                                   std::to_string(k) + " (only dimension " + std::to_string(d) + " may be)");
    }
  }
  std::vector<int64_t> idx = read_indices("gather", index, d, a.shape()[d]);
  // out[..., j, ...] = a[..., idx[j], ...] at dim d: the offset in `a` of every index position is
  // its offset with dim d's stride zeroed, plus idx times that stride.
  std::vector<int64_t> strides = detail::contiguous_strides(a.shape());
  const int64_t dim_stride = strides[d];
  strides[d] = 0;
  std::vector<int64_t> source(idx.size());
  detail::for_each_broadcast(index.shape(), strides, std::vector<int64_t>(strides.size(), 0),
                             [&](int64_t off, int64_t, int64_t j) {
                               const size_t at = static_cast<size_t>(j);
                               source[at] = off + idx[at] * dim_stride;
                             });
  Tensor out = take_rows(a, index.shape(), source, 1);
  record_op("GatherBackward", {a}, {out}, [shape = a.shape(), source = std::move(source)](const BackwardArgs& args) {
    return variable_list{add_rows_back(args.grads[0], shape, source, 1)};  // an element gathered twice gets both
  });
  return out;
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  DeviceGuard device_guard("index_select", {&a, &index});
  detail::check_defined("index_select", a);
  detail::check_defined("index_select", index, "index");
  const int64_t d = detail::wrap_dim("index_select", dim, a.shape());
  if (index.dim() > 1) {
    throw errors::shape_mismatch("index_select: index is supposed to be a vector, got shape " +
                                 shape_str(index.shape()));
  }
  std::vector<int64_t> idx = read_indices("index_select", index, d, a.shape()[d]);
  Shape shape = a.shape();
  shape[d] = static_cast<int64_t>(idx.size());
  int64_t inner = 0;
  std::vector<int64_t> rows = selected_rows(a.shape(), d, idx, &inner);
  Tensor out = take_rows(a, shape, rows, inner);
  record_op("IndexSelectBackward", {a}, {out}, [shape = a.shape(), rows = std::move(rows), inner](const BackwardArgs& args) {
    return variable_list{add_rows_back(args.grads[0], shape, rows, inner)};  // index_add
  });
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  DeviceGuard device_guard("embedding", {&weight, &indices});
  detail::check_defined("embedding", weight, "weight");
  detail::check_defined("embedding", indices, "indices");
  if (weight.dim() != 2) {
    throw errors::shape_mismatch("embedding: weight must be 2-D [num_embeddings, embedding_dim], got " +
                                 shape_str(weight.shape()));
  }
  std::vector<int64_t> idx = read_indices("embedding", indices, 0, weight.shape()[0]);
  Shape shape = indices.shape();
  shape.push_back(weight.shape()[1]);
  int64_t inner = 0;
  std::vector<int64_t> rows = selected_rows(weight.shape(), 0, idx, &inner);
  Tensor out = take_rows(weight, shape, rows, inner);
  record_op("EmbeddingBackward", {weight}, {out},
            [shape = weight.shape(), rows = std::move(rows), inner](const BackwardArgs& args) {
              // Dense: the whole weight's gradient, each looked-up row accumulating its rows of g.
              return variable_list{add_rows_back(args.grads[0], shape, rows, inner)};
            });
  return out;
}

}  // namespace dagsim
