// Indexing ops: gather, index_select and embedding, whose backwards scatter-add the gradient back
// to the positions that were read (a position read twice gets both gradients).
//
// dagsim has no integer dtype, so an index tensor is a float tensor (either dtype) holding
// integral values; each op checks every value is an integer in range before reading anything.
#include <cmath>

#include "core/autograd/op_backward.h"
#include "core/tensor/device_guard.h"
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

// out[o, k, i] = a[o, idx[k], i] for `a` of `shape` split at `dim`; `out` has room for
// outer * idx.size() * inner elements. `add` runs it backwards: a[o, idx[k], i] += out[o, k, i].
template <typename T>
void select_rows(const T* a, T* out, const Shape& shape, int64_t dim, const std::vector<int64_t>& idx) {
  int64_t outer = 0, inner = 0;
  extents(shape, dim, &outer, &inner);
  const int64_t size = shape[dim];
  const int64_t k_n = static_cast<int64_t>(idx.size());
  if (k_n == 0 || inner == 0) return;  // nothing to copy, however large `outer` is
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < k_n; ++k) {
      std::copy_n(a + (o * size + idx[static_cast<size_t>(k)]) * inner, inner, out + (o * k_n + k) * inner);
    }
  }
}

// The backward of select_rows: zeros of `shape`, with each slice of `g` added to the row it read.
Tensor index_add_rows(const Tensor& g, const Shape& shape, int64_t dim, const std::vector<int64_t>& idx) {
  Tensor grad = zeros(shape, g.dtype());
  int64_t outer = 0, inner = 0;
  extents(shape, dim, &outer, &inner);
  const int64_t size = shape[dim];
  const int64_t k_n = static_cast<int64_t>(idx.size());
  if (k_n == 0 || inner == 0) return grad;  // nothing to add, however large `outer` is
  dispatch_dtype(g.dtype(), [&]<typename T>() {
    const T* pg = g.data<T>();
    T* p = grad.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < k_n; ++k) {
        T* row = p + (o * size + idx[static_cast<size_t>(k)]) * inner;
        const T* src = pg + (o * k_n + k) * inner;
        for (int64_t i = 0; i < inner; ++i) row[i] += src[i];
      }
    }
  });
  return grad;
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
  Tensor out = Tensor::empty(index.shape(), a.dtype());
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    const T* x = a.data<T>();
    T* y = out.data<T>();
    for (size_t j = 0; j < source.size(); ++j) y[j] = x[source[j]];
  });
  record_op("GatherBackward", {a}, {out},
            [shape = a.shape(), source = std::move(source)](const BackwardArgs& args) {
              // scatter_add: an element gathered twice gets both gradients.
              const Tensor& g = args.grads[0];
              Tensor grad = zeros(shape, g.dtype());
              dispatch_dtype(g.dtype(), [&]<typename T>() {
                const T* pg = g.data<T>();
                T* p = grad.data<T>();
                for (size_t j = 0; j < source.size(); ++j) p[source[j]] += pg[j];
              });
              return variable_list{grad};
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
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch_dtype(a.dtype(), [&]<typename T>() { select_rows(a.data<T>(), out.data<T>(), a.shape(), d, idx); });
  record_op("IndexSelectBackward", {a}, {out},
            [shape = a.shape(), d, idx = std::move(idx)](const BackwardArgs& args) {
              return variable_list{index_add_rows(args.grads[0], shape, d, idx)};  // index_add
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
  Tensor out = Tensor::empty(shape, weight.dtype());
  dispatch_dtype(weight.dtype(), [&]<typename T>() {
    select_rows(weight.data<T>(), out.data<T>(), weight.shape(), 0, idx);
  });
  record_op("EmbeddingBackward", {weight}, {out},
            [shape = weight.shape(), idx = std::move(idx)](const BackwardArgs& args) {
              // Dense: the whole weight's gradient, each looked-up row accumulating its rows of g.
              return variable_list{index_add_rows(args.grads[0], shape, 0, idx)};
            });
  return out;
}

}  // namespace dagsim
