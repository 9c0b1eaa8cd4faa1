// The tensor ops of dagsim, forward and backward, with PyTorch's semantics and names.
//
// Every op checks its arguments at the boundary and throws dagsim::Error naming the op and the
// shapes (shape_mismatch, dtype_mismatch, index_out_of_range, invalid_argument); past the boundary
// it asserts. Elementwise binary ops broadcast as torch does. Both operands must have the same
// dtype (dagsim does not promote). Each op records its backward node (autograd/op_backward.h)
// when grad mode is on and an input requires grad. Matrix products go through the serial OpenBLAS
// build, so they are deterministic run to run on one machine.
//
// Ops are spread over files by family: factories.cc, elementwise.cc, reduce.cc, shape_ops.cc,
// index_ops.cc, linalg.cc, nn_ops.cc.
//
// dagsim has no integer dtype: index tensors (an op's index argument, a loss target, the indices
// max and min return) are float tensors holding integral values.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/base/prng.h"
#include "core/tensor/tensor.h"

namespace dagsim {

// Factories (factories.cc) -------------------------------------------------------------------
Tensor zeros(const Shape& shape, Dtype dtype = Dtype::float64);
Tensor ones(const Shape& shape, Dtype dtype = Dtype::float64);
Tensor full(const Shape& shape, double value, Dtype dtype = Dtype::float64);
Tensor scalar_tensor(double value, Dtype dtype = Dtype::float64);
// [start, end) by step, as torch.arange. Throws invalid_argument on a zero step or a wrong sign.
Tensor arange(double start, double end, double step = 1.0, Dtype dtype = Dtype::float64);
Tensor arange(int64_t end, Dtype dtype = Dtype::float64);
// Row-major values. Throws shape_mismatch when values.size() != numel(shape).
Tensor from_values(const Shape& shape, const std::vector<double>& values,
                   Dtype dtype = Dtype::float64);
// Seeded: uniform in [low, high), and normal(mean, std).
Tensor rand_uniform(const Shape& shape, Prng& prng, double low = 0.0, double high = 1.0,
                    Dtype dtype = Dtype::float64);
Tensor randn(const Shape& shape, Prng& prng, double mean = 0.0, double stddev = 1.0,
             Dtype dtype = Dtype::float64);
Tensor zeros_like(const Tensor& t);
// Zeros on `device` of the running node, whatever op is open.
Tensor zeros_on(const Shape& shape, Dtype dtype, Device device);
Tensor ones_like(const Tensor& t);

// Dtypes (cast.cc) -------------------------------------------------------------------------------
// A copy in `dtype` (the tensor itself when it already is), differentiable.
Tensor to_dtype(const Tensor& a, Dtype dtype);
// A copy on `device` (the tensor itself when it already is there), differentiable: the gradient
// goes back to the tensor's own device, as torch.Tensor.to(device). To the cpu, the host waits for
// the copy, as .cpu() does; to a GPU, the copy is ordered on that GPU's current stream.
Tensor to_device(const Tensor& a, Device device);
// PyTorch's type promotion between float dtypes: float64 if either is.
Dtype promote_types(Dtype a, Dtype b);
// Both operands in their common dtype (add, sub, mul and div promote, as PyTorch's do).
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b);

// Elementwise (elementwise.cc) ------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
// Gradient g * sign(a), 0 at a == 0 as PyTorch.
Tensor abs(const Tensor& a);
// NaN below 0; gradient g / (2 sqrt(a)), infinite at 0, as PyTorch.
Tensor sqrt(const Tensor& a);

// The shape two shapes broadcast to, as torch.broadcast_shapes. Throws shape_mismatch naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sums `t` down to `shape` over broadcast dimensions (the backward of broadcasting).
Tensor sum_to(const Tensor& t, const Shape& shape);

// In-place updates (elementwise.cc). Each bumps the version counter. They do not record autograd
// history: under grad mode, an in-place update of a tensor that requires grad throws (optimizers
// run under NoGradGuard, as torch.optim does).
Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);
Tensor& sub_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, double value);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& copy_(Tensor& self, const Tensor& src);
Tensor& fill_(Tensor& self, double value);
Tensor& zero_(Tensor& self);
// self += value * a * b, elementwise in one pass (all three shapes equal), as torch.addcmul_.
Tensor& addcmul_(Tensor& self, const Tensor& a, const Tensor& b, double value);
Tensor& sqrt_(Tensor& self);

// Reductions and normalisations (reduce.cc) --------------------------------------------------
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);

// What max and min along a dim return, as torch.return_types.max: `indices` is float64 (there is
// no integer dtype) and does not require grad. Binds as `auto [values, indices] = max(a, 1);`.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
// The largest (smallest) element along `dim` and its position there, as torch.max(a, dim): the
// first of equal elements, NaN if any (the first NaN). The gradient goes to the selected element
// only. Throws invalid_argument when the dim is empty.
ValuesIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& a, int64_t dim, bool keepdim = false);
// Over all elements, as torch.max(a): the gradient is split evenly among the elements equal to
// the result. Throws invalid_argument on an empty tensor.
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);

// Shape ops (shape_ops.cc); each returns a new contiguous tensor ------------------------------
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
// One size may be -1 (inferred).
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor unsqueeze(const Tensor& a, int64_t dim);
// -1 keeps a size; new leading dims may be added, as torch.Tensor.expand.
Tensor expand(const Tensor& a, const Shape& shape);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor clone(const Tensor& a);
// Shares storage (and so the version counter) with `a`, without history and not requiring grad.
Tensor detach(const Tensor& a);

// Indexing (index_ops.cc): indices must be integers in [0, size) (no negative indices, as torch);
// invalid_argument for a non-integral value, index_out_of_range naming the index and the size.
// Backward adds the gradient into every position read, so a repeated index accumulates.
// As torch.gather: out[i][j][k] = a[index[i][j][k]][j][k] for dim 0; index has a's number of dims,
// no larger than a's except along `dim`, and the output has index's shape.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// As torch.index_select: the slices index[0], index[1], ... of `a` along `dim`; index 1-D (or 0-d).
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// As torch.nn.functional.embedding: weight [num_embeddings, embedding_dim], indices of any shape,
// output indices.shape + [embedding_dim]. The weight's gradient is dense (sparse=False).
Tensor embedding(const Tensor& weight, const Tensor& indices);

// Linear algebra (linalg.cc) --------------------------------------------------------------------
// As torch.matmul: 1-D·1-D dot, 2-D·2-D, 1-D promoted and removed, batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
// [B, n, k] x [B, k, m] -> [B, n, m].
Tensor bmm(const Tensor& a, const Tensor& b);
// As torch.linalg.multi_dot: a chain of matmuls, first and last may be 1-D.
Tensor multi_dot(const std::vector<Tensor>& tensors);
// x·Wᵀ + b, as torch.nn.functional.linear. x [..., in], W [out, in], b [out] (optional).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// Neural-network functions (nn_ops.cc); losses reduce by "mean", PyTorch's default -----------
Tensor mse_loss(const Tensor& input, const Tensor& target);
// input: log-probabilities [N, C]; target: class indices [N] held as integral values.
Tensor nll_loss(const Tensor& input, const Tensor& target);
// log_softmax over dim 1, then nll_loss.
Tensor cross_entropy(const Tensor& input, const Tensor& target);
// As torch.nn.functional.layer_norm: normalises over the trailing dims `normalized_shape` (biased
// variance, eps inside the sqrt), then scales by weight and shifts by bias, each optional
// (undefined) and of shape normalized_shape. Gradients for x, weight and bias.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// As torch.nn.functional.dropout: when training, zeroes each element with probability p (one
// prng draw per element, row-major, so the same seed gives the same mask) and scales the rest by
// 1/(1-p); p == 1 gives zeros. Not training, or p == 0, returns `a` itself and draws nothing.
// The gradient is the mask times the scale. Throws invalid_argument unless p is in [0, 1].
Tensor dropout(const Tensor& a, double p, bool training, Prng& prng);

// Comparison for tests and checks: |a - b| <= atol + rtol * |b| elementwise, same shape.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-9, double atol = 1e-12);

// Operators, as on torch.Tensor.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }

}  // namespace dagsim
