// Shape ops. reshape, squeeze and unsqueeze are views (they share storage and so the version
// counter, as in PyTorch); every other op returns a new contiguous tensor.
#include <cstring>

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

// A tensor over the same storage with another shape of the same numel.
Tensor view_as_shape(const Tensor& a, Shape shape) {
  DAGSIM_ASSERT_EQ(shape_numel(shape), a.numel());
  return Tensor(std::make_shared<TensorImpl>(a.storage(), std::move(shape), a.dtype()));
}

// Records the backward of a view: the gradient reshaped back to the input's shape.
Tensor record_view(const char* name, const Tensor& a, Tensor out) {
  record_op(name, {a}, {out}, [shape = a.shape()](const BackwardArgs& args) {
    return variable_list{reshape(args.grads[0], shape)};
  });
  return out;
}

// Row-major (outer, size, inner) extents around `dim`.
void split_extents(const Shape& shape, int64_t dim, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) *outer *= shape[d];
    if (d > dim) *inner *= shape[d];
  }
}

// Copies `length` slices along `dim` from `src` starting at `src_at` into `dst` starting at
// `dst_at`; every other dim of the two tensors matches.
void copy_slices(const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at, int64_t dim, int64_t length) {
  int64_t outer = 0, inner = 0;
  split_extents(src.shape(), dim, &outer, &inner);
  const int64_t src_len = src.shape()[dim];
  const int64_t dst_len = dst.shape()[dim];
  const size_t elem = dtype_size(src.dtype());
  const size_t block = static_cast<size_t>(length * inner) * elem;
  if (block == 0) return;
  const auto* s = static_cast<const std::byte*>(src.raw_data());
  auto* d = static_cast<std::byte*>(dst.raw_data());
  if (DeviceKernels* k = device_kernels()) {
    k->copy_rows(s + static_cast<size_t>(src_at * inner) * elem, static_cast<size_t>(src_len * inner) * elem,
                 d + static_cast<size_t>(dst_at * inner) * elem, static_cast<size_t>(dst_len * inner) * elem, block,
                 static_cast<size_t>(outer));
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(d + static_cast<size_t>((o * dst_len + dst_at) * inner) * elem,
                s + static_cast<size_t>((o * src_len + src_at) * inner) * elem, block);
  }
}

// `src` whole, into `dst` at offset `at` along dim.
void copy_along_dim(const Tensor& src, Tensor& dst, int64_t dim, int64_t at) {
  copy_slices(src, 0, dst, at, dim, src.shape()[dim]);
}

// The slice [start, start+length) along dim, as a new tensor (no autograd).
Tensor slice_raw(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  Shape shape = a.shape();
  shape[dim] = length;
  Tensor out = Tensor::empty(shape, a.dtype());
  copy_slices(a, start, out, 0, dim, length);
  return out;
}

// out[o] = a[ia] for every index o of `shape`, ia through `strides` (expand, transpose).
Tensor gather_strided(const Tensor& a, const Shape& shape, const std::vector<int64_t>& strides) {
  Tensor out = Tensor::empty(shape, a.dtype());
  if (DeviceKernels* k = device_kernels()) {
    k->gather(a.dtype(), kernel_input(a), strides, detail::bytes(out), shape);
    return out;
  }
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    const T* x = a.data<T>();
    T* y = out.data<T>();
    detail::for_each_broadcast(shape, strides, std::vector<int64_t>(shape.size(), 0),
                               [&](int64_t ix, int64_t, int64_t io) { y[io] = x[ix]; });
  });
  return out;
}

// Zeros of `shape` with `g` written at [start, start+len) along dim (the backward of a slice).
Tensor unslice(const Tensor& g, const Shape& shape, int64_t dim, int64_t start) {
  Tensor out = zeros(shape, g.dtype());
  copy_along_dim(g, out, dim, start);
  return out;
}

}  // namespace

Tensor reshape(const Tensor& a, const Shape& shape) {
  DeviceGuard device_guard("reshape", {&a});
  detail::check_defined("reshape", a);
  Shape resolved = shape;
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      if (infer_at >= 0) throw errors::invalid_argument("reshape: only one dimension can be inferred");
      infer_at = static_cast<int64_t>(i);
    } else if (resolved[i] < 0) {
      throw errors::invalid_argument("reshape: invalid shape dimension " + std::to_string(resolved[i]) +
                                     " in " + shape_str(shape));
    } else {
      known *= resolved[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || a.numel() % known != 0) {
      throw errors::shape_mismatch("reshape: shape " + shape_str(shape) + " is invalid for input of size " +
                                   std::to_string(a.numel()));
    }
    resolved[static_cast<size_t>(infer_at)] = a.numel() / known;
  }
  if (shape_numel(resolved) != a.numel()) {
    throw errors::shape_mismatch("reshape: shape " + shape_str(shape) + " is invalid for input of size " +
                                 std::to_string(a.numel()) + " (input shape " + shape_str(a.shape()) + ")");
  }
  return record_view("ReshapeBackward", a, view_as_shape(a, resolved));
}

Tensor squeeze(const Tensor& a) {
  DeviceGuard device_guard("squeeze", {&a});
  detail::check_defined("squeeze", a);
  Shape shape;
  for (int64_t s : a.shape()) {
    if (s != 1) shape.push_back(s);
  }
  return record_view("SqueezeBackward", a, view_as_shape(a, shape));
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  DeviceGuard device_guard("squeeze", {&a});
  detail::check_defined("squeeze", a);
  if (a.dim() == 0) return record_view("SqueezeBackward", a, view_as_shape(a, {}));
  const int64_t d = detail::wrap_dim("squeeze", dim, a.shape());
  Shape shape = a.shape();
  if (shape[d] == 1) shape.erase(shape.begin() + d);
  return record_view("SqueezeBackward", a, view_as_shape(a, shape));
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  DeviceGuard device_guard("unsqueeze", {&a});
  detail::check_defined("unsqueeze", a);
  const int64_t d = detail::wrap_dim("unsqueeze", dim, a.shape(), /*inserting=*/true);
  Shape shape = a.shape();
  shape.insert(shape.begin() + d, 1);
  return record_view("UnsqueezeBackward", a, view_as_shape(a, shape));
}

Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1) {
  DeviceGuard device_guard("transpose", {&a});
  detail::check_defined("transpose", a);
  if (a.dim() == 0) return clone(a);
  const int64_t d0 = detail::wrap_dim("transpose", dim0, a.shape());
  const int64_t d1 = detail::wrap_dim("transpose", dim1, a.shape());
  Shape shape = a.shape();
  std::swap(shape[d0], shape[d1]);
  std::vector<int64_t> strides = detail::contiguous_strides(a.shape());
  std::swap(strides[d0], strides[d1]);
  Tensor out = gather_strided(a, shape, strides);
  record_op("TransposeBackward", {a}, {out}, [d0, d1](const BackwardArgs& args) {
    return variable_list{transpose(args.grads[0], d0, d1)};
  });
  return out;
}

Tensor expand(const Tensor& a, const Shape& shape) {
  DeviceGuard device_guard("expand", {&a});
  detail::check_defined("expand", a);
  if (shape.size() < a.shape().size()) {
    throw errors::shape_mismatch("expand: the number of sizes provided (" + std::to_string(shape.size()) +
                                 ") must be greater or equal to the number of dimensions in the tensor (" +
                                 std::to_string(a.dim()) + ")");
  }
  const size_t lead = shape.size() - a.shape().size();
  Shape target = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) {
        throw errors::shape_mismatch("expand: -1 is not allowed in a leading, non-existing dimension (" +
                                     shape_str(shape) + ")");
      }
      continue;
    }
    const int64_t own = a.shape()[i - lead];
    if (shape[i] == -1) target[i] = own;
    else if (own != shape[i] && own != 1) {
      throw errors::shape_mismatch("expand: the expanded size of the tensor (" + std::to_string(shape[i]) +
                                   ") must match the existing size (" + std::to_string(own) +
                                   ") at non-singleton dimension " + std::to_string(i) + ". Target sizes: " +
                                   shape_str(shape) + ". Tensor sizes: " + shape_str(a.shape()));
    }
  }
  Tensor out = gather_strided(a, target, detail::broadcast_strides(a.shape(), target));
  record_op("ExpandBackward", {a}, {out}, [shape = a.shape()](const BackwardArgs& args) {
    return variable_list{sum_to(args.grads[0], shape)};
  });
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  DeviceGuard device_guard("cat", tensors);
  if (tensors.empty()) throw errors::invalid_argument("cat: expected a non-empty list of tensors");
  for (const Tensor& t : tensors) detail::check_defined("cat", t, "tensor");
  const Tensor& first = tensors[0];
  if (first.dim() == 0) throw errors::invalid_argument("cat: zero-dimensional tensor cannot be concatenated");
  const int64_t d = detail::wrap_dim("cat", dim, first.shape());
  Shape shape = first.shape();
  shape[d] = 0;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_same_dtype("cat", first, t);
    bool compatible = t.dim() == first.dim();
    for (int64_t k = 0; compatible && k < first.dim(); ++k) {
      if (k != d && t.shape()[k] != first.shape()[k]) compatible = false;
    }
    if (!compatible) {
      throw errors::shape_mismatch("cat: sizes of tensors must match except in dimension " + std::to_string(d) +
                                   "; tensor 0 has shape " + shape_str(first.shape()) + " and tensor " +
                                   std::to_string(i) + " has shape " + shape_str(t.shape()));
    }
    sizes.push_back(t.shape()[d]);
    shape[d] += t.shape()[d];
  }
  Tensor out = Tensor::empty(shape, first.dtype());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    copy_along_dim(t, out, d, at);
    at += t.shape()[d];
  }
  record_op("CatBackward", tensors, {out}, [d, sizes](const BackwardArgs& args) {
    variable_list grads;
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      grads.push_back(args.needs(i) ? slice_raw(args.grads[0], d, start, sizes[i]) : Tensor());
      start += sizes[i];
    }
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  DeviceGuard device_guard("stack", tensors);
  if (tensors.empty()) throw errors::invalid_argument("stack: expected a non-empty list of tensors");
  detail::check_defined("stack", tensors[0], "tensor");
  const int64_t d = detail::wrap_dim("stack", dim, tensors[0].shape(), /*inserting=*/true);
  for (size_t i = 0; i < tensors.size(); ++i) {
    detail::check_defined("stack", tensors[i], "tensor");
    if (tensors[i].shape() != tensors[0].shape()) {
      throw errors::shape_mismatch("stack: expects each tensor to be equal size, but got " +
                                   shape_str(tensors[0].shape()) + " at entry 0 and " +
                                   shape_str(tensors[i].shape()) + " at entry " + std::to_string(i));
    }
  }
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  DeviceGuard device_guard("split", {&a});
  detail::check_defined("split", a);
  if (a.dim() == 0) throw errors::invalid_argument("split: cannot split a zero-dimensional tensor");
  const int64_t d = detail::wrap_dim("split", dim, a.shape());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw errors::invalid_argument("split: split sizes must be non-negative");
    total += s;
  }
  if (total != a.shape()[d]) {
    std::string listed;
    for (int64_t s : sizes) listed += (listed.empty() ? "" : ", ") + std::to_string(s);
    throw errors::shape_mismatch("split: split sizes [" + listed + "] sum to " + std::to_string(total) +
                                 " but the tensor has size " + std::to_string(a.shape()[d]) +
                                 " along dimension " + std::to_string(d) + " (shape " + shape_str(a.shape()) + ")");
  }
  std::vector<Tensor> outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    outs.push_back(slice_raw(a, d, start, s));
    start += s;
  }
  // One node with an output per piece, as PyTorch's SplitBackward: pieces that got no gradient
  // arrive as zeros (see OpBackward::apply).
  record_op("SplitBackward", {a}, outs, [shape = a.shape(), d, sizes](const BackwardArgs& args) {
    Tensor grad = Tensor::empty(shape, args.grads[0].dtype());
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      copy_along_dim(args.grads[i], grad, d, at);
      at += sizes[i];
    }
    return variable_list{grad};
  });
  return outs;
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  DeviceGuard device_guard("split", {&a});
  detail::check_defined("split", a);
  if (split_size <= 0) {
    throw errors::invalid_argument("split: split_size must be positive, got " + std::to_string(split_size));
  }
  if (a.dim() == 0) throw errors::invalid_argument("split: cannot split a zero-dimensional tensor");
  const int64_t n = a.shape()[detail::wrap_dim("split", dim, a.shape())];
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += split_size) sizes.push_back(std::min(split_size, n - at));
  if (sizes.empty()) sizes.push_back(0);
  return split(a, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  DeviceGuard device_guard("chunk", {&a});
  detail::check_defined("chunk", a);
  if (chunks <= 0) throw errors::invalid_argument("chunk: chunks must be positive, got " + std::to_string(chunks));
  if (a.dim() == 0) throw errors::invalid_argument("chunk: cannot chunk a zero-dimensional tensor");
  const int64_t n = a.shape()[detail::wrap_dim("chunk", dim, a.shape())];
  const int64_t size = std::max<int64_t>(1, (n + chunks - 1) / chunks);
  return split(a, size, dim);
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  DeviceGuard device_guard("narrow", {&a});
  detail::check_defined("narrow", a);
  if (a.dim() == 0) throw errors::invalid_argument("narrow: cannot narrow a zero-dimensional tensor");
  const int64_t d = detail::wrap_dim("narrow", dim, a.shape());
  const int64_t n = a.shape()[d];
  const int64_t s = start < 0 ? start + n : start;
  if (s < 0 || s > n || length < 0 || s + length > n) {
    throw errors::index_out_of_range("narrow: start (" + std::to_string(start) + ") + length (" +
                                     std::to_string(length) + ") exceeds dimension size (" + std::to_string(n) +
                                     ") of dimension " + std::to_string(d) + " (shape " + shape_str(a.shape()) + ")");
  }
  Tensor out = slice_raw(a, d, s, length);
  record_op("NarrowBackward", {a}, {out}, [shape = a.shape(), d, s](const BackwardArgs& args) {
    return variable_list{unslice(args.grads[0], shape, d, s)};
  });
  return out;
}

Tensor clone(const Tensor& a) {
  DeviceGuard device_guard("clone", {&a});
  detail::check_defined("clone", a);
  Tensor out;
  if (device_kernels() != nullptr) {
    out = gather_strided(a, a.shape(), detail::contiguous_strides(a.shape()));
  } else {
    out = Tensor::empty(a.shape(), a.dtype());
    if (a.nbytes() > 0) std::memcpy(out.raw_data(), a.raw_data(), a.nbytes());
  }
  record_op("CloneBackward", {a}, {out}, [](const BackwardArgs& args) { return variable_list{args.grads[0]}; });
  return out;
}

Tensor detach(const Tensor& a) {
  DeviceGuard device_guard("detach", {&a});
  detail::check_defined("detach", a);
  return view_as_shape(a, a.shape());
}

}  // namespace dagsim
