// Matrix products: matmul (torch.matmul's rules), bmm, multi_dot and linear, float32 on oneDNN's
// sgemm, float64 on Eigen's AVX-512 GEMM or the serial OpenBLAS build (see gemm below). Backward formulas call gemm with transpose flags instead of materialising transposes.
#include <cblas.h>
#include <dlfcn.h>
#include <dnnl.h>

#include "core/autograd/op_backward.h"
#include "compute/kernels/gemm_avx512.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/op_util.h"
#include "core/tensor/ops.h"

namespace dagsim {

using autograd::BackwardArgs;
using autograd::record_op;
using autograd::variable_list;

namespace {

// oneDNN runs its products on an OpenMP team as large as the CPU unless told otherwise; dagsim's
// compute is single-threaded (core runs no OS threads, and a product's sums must not depend on how
// many threads split it), so each thread that multiplies holds its OpenMP team to one thread
// first. libgomp is loaded as oneDNN's dependency; its entry point is looked up, not linked, so
// the build needs no OpenMP flags.
void hold_openmp_to_one_thread() {
  thread_local const bool held = [] {
    using SetThreads = void (*)(int);
    auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    DAGSIM_ASSERT_MSG(set != nullptr, "oneDNN is loaded without its OpenMP runtime (omp_set_num_threads)");
    set(1);
    return true;
  }();
  (void)held;
}

// C[m,n] = beta*C + op(A)·op(B), row-major, for `batch` independent products. A batch stride of 0
// reuses one operand for every product (broadcast batch dims are expanded by the caller).
// float32 runs on oneDNN's sgemm: it picks the CPU's widest kernels itself (AVX-512 where there is
// one), about twice OpenBLAS's speed at the MLP's shapes on machines whose OpenBLAS is held to its
// AVX2 kernels (OPENBLAS_CORETYPE=Haswell, as on this project's machines). Which kernels is a
// function of the CPU alone, never of DAGSIM_CPU_CAPABILITY, so a seed replays the same bits on a
// machine whichever vector path runs the elementwise ops. float64 runs on Eigen's AVX-512 GEMM
// where the CPU has AVX-512 (gemm_avx512.h: oneDNN has no dgemm), else on OpenBLAS.
}  // namespace

namespace detail {
template <typename T>
void gemm_host(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    hold_openmp_to_one_thread();
    const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb,
                                            beta, c, ldc);
    DAGSIM_ASSERT_MSG(status == dnnl_success, "oneDNN sgemm refused checked operands");
  } else {
    static const bool avx512 = detail::avx512_gemm_available();
    if (avx512 && k > 0 && (beta == 0.0 || beta == 1.0)) {
      detail::dgemm_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  }
}
template void gemm_host<float>(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t,
                               float, float*, int64_t);
template void gemm_host<double>(bool, bool, int64_t, int64_t, int64_t, const double*, int64_t, const double*, int64_t,
                                double, double*, int64_t);
}  // namespace detail

namespace {

// gemm_host, or the device's gemm under an op on a device with a kernel table.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (DeviceKernels* kernels = device_kernels()) {
    if (m == 0 || n == 0) return;
    kernels->gemm(dtype_of<T>(), trans_a, trans_b, m, n, k, reinterpret_cast<const std::byte*>(a), lda,
                  reinterpret_cast<const std::byte*>(b), ldb, beta, reinterpret_cast<std::byte*>(c), ldc);
    return;
  }
  detail::gemm_host(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

// out = 0 (a product over an empty inner dimension).
void fill_zeros(Tensor& out) {
  if (DeviceKernels* kernels = device_kernels()) {
    kernels->unary(Pointwise::fill, out.dtype(), nullptr, detail::bytes(out), out.numel(), 0.0);
    return;
  }
  dispatch_dtype(out.dtype(), [&]<typename T>() { std::fill_n(out.data<T>(), out.numel(), T{0}); });
}

// out[b] = op(x[b]) · op(y[b]) for 3-D contiguous tensors, shapes already checked.
// x: [B, m, k] (or [B, k, m] when trans_x), y: [B, k, n] (or [B, n, k] when trans_y).
Tensor batched_gemm(const Tensor& x, const Tensor& y, bool trans_x, bool trans_y) {
  const int64_t batch = x.shape()[0];
  const int64_t m = trans_x ? x.shape()[2] : x.shape()[1];
  const int64_t k = trans_x ? x.shape()[1] : x.shape()[2];
  const int64_t n = trans_y ? y.shape()[1] : y.shape()[2];
  Tensor out = Tensor::empty({batch, m, n}, x.dtype());
  if (out.numel() == 0) return out;  // [2^61, 0, n] would loop 2^61 times over nothing
  if (k == 0) {
    fill_zeros(out);
    return out;
  }
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    for (int64_t b = 0; b < batch; ++b) {
      gemm<T>(trans_x, trans_y, m, n, k, px + b * m * k, x.shape()[2], py + b * k * n, y.shape()[2],
              T{0}, po + b * m * n, n);
    }
  });
  return out;
}

void check_matrix_operands(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_defined(op, a, "self");
  detail::check_defined(op, b, "other");
  detail::check_same_dtype(op, a, b);
}

// Plain 2-D product without autograd: op(a)·op(b), shapes already checked.
Tensor mm_raw(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false) {
  const int64_t m = trans_a ? a.shape()[1] : a.shape()[0];
  const int64_t k = trans_a ? a.shape()[0] : a.shape()[1];
  const int64_t n = trans_b ? b.shape()[0] : b.shape()[1];
  Tensor out = Tensor::empty({m, n}, a.dtype());
  if (k == 0) {
    fill_zeros(out);
    return out;
  }
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    gemm<T>(trans_a, trans_b, m, n, k, a.data<T>(), a.shape()[1], b.data<T>(), b.shape()[1], T{0},
            out.data<T>(), n);
  });
  return out;
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) {
  DeviceGuard device_guard("bmm", {&a, &b});
  check_matrix_operands("bmm", a, b);
  if (a.dim() != 3 || b.dim() != 3) {
    throw errors::shape_mismatch("bmm: expected 3-D tensors, got " + shape_str(a.shape()) + " and " +
                                 shape_str(b.shape()));
  }
  if (a.shape()[0] != b.shape()[0] || a.shape()[2] != b.shape()[1]) {
    throw errors::shape_mismatch("bmm: batch1 and batch2 shapes cannot be multiplied (" +
                                 shape_str(a.shape()) + " and " + shape_str(b.shape()) + ")");
  }
  Tensor out = batched_gemm(a, b, false, false);
  record_op("BmmBackward", {a, b}, {out}, [](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    const Tensor& x = args.saved[0];
    const Tensor& y = args.saved[1];
    // dX = G·Yᵀ, dY = Xᵀ·G
    return variable_list{args.needs(0) ? batched_gemm(g, y, false, true) : Tensor(),
                         args.needs(1) ? batched_gemm(x, g, true, false) : Tensor()};
  }, {a, b});
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  DeviceGuard device_guard("matmul", {&a, &b});
  check_matrix_operands("matmul", a, b);
  if (a.dim() == 0 || b.dim() == 0) {
    throw errors::shape_mismatch("matmul: both arguments need at least 1 dimension, got " +
                                 shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  const int64_t k_a = a.shape().back();
  const int64_t k_b = b.dim() == 1 ? b.shape()[0] : b.shape()[b.shape().size() - 2];
  if (k_a != k_b) {
    throw errors::shape_mismatch("matmul: mat1 and mat2 shapes cannot be multiplied (" +
                                 shape_str(a.shape()) + " and " + shape_str(b.shape()) + ")");
  }
  if (a.dim() == 2 && b.dim() == 2) {
    // The common case, one gemm and no reshaping.
    Tensor out = mm_raw(a, b);
    record_op("MmBackward", {a, b}, {out}, [](const BackwardArgs& args) {
      const Tensor& g = args.grads[0];
      return variable_list{args.needs(0) ? mm_raw(g, args.saved[1], false, true) : Tensor(),
                           args.needs(1) ? mm_raw(args.saved[0], g, true, false) : Tensor()};
    }, {a, b});
    return out;
  }
  // torch.matmul: a 1-D operand becomes a matrix (a row for the left, a column for the right),
  // batch dims broadcast, and the added dim is removed from the result. Built from differentiable
  // shape ops plus bmm, so its backward is theirs.
  Tensor x = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor y = b.dim() == 1 ? unsqueeze(b, 1) : b;
  const Shape x_batch(x.shape().begin(), x.shape().end() - 2);
  const Shape y_batch(y.shape().begin(), y.shape().end() - 2);
  // Rethrown so the message names the operands: the batch dims alone ("[2] and [3]") do not say
  // which call failed.
  const Shape batch = [&] {
    try {
      return broadcast_shapes(x_batch, y_batch, "matmul");
    } catch (const Error&) {
      throw errors::shape_mismatch("matmul: batch dimensions " + shape_str(x_batch) + " and " +
                                   shape_str(y_batch) + " do not broadcast (shapes " +
                                   shape_str(a.shape()) + " and " + shape_str(b.shape()) + ")");
    }
  }();
  const int64_t n = x.shape()[x.shape().size() - 2];
  const int64_t m = y.shape().back();
  Tensor out;
  if (batch.empty()) {
    out = bmm(unsqueeze(x, 0), unsqueeze(y, 0));
    out = squeeze(out, 0);
  } else {
    // No output elements (n or m is 0): contract over nothing, so the broadcast copy of the other
    // operand is empty too. [2^20, 1, 4, 4] times [1, 2^20, 4, 0] once expanded the first to 2^44
    // elements for a result of none (found by the execute fuzzer). The gradients are zeros either way.
    const bool empty = n == 0 || m == 0;
    const int64_t k = empty ? 0 : k_a;
    const Tensor xk = empty ? narrow(x, -1, 0, 0) : x;
    const Tensor yk = empty ? narrow(y, -2, 0, 0) : y;
    Shape x_full = batch, y_full = batch;
    x_full.insert(x_full.end(), {n, k});
    y_full.insert(y_full.end(), {k, m});
    const int64_t flat = shape_numel(batch);
    Tensor x3 = reshape(x_batch == batch ? xk : expand(xk, x_full), {flat, n, k});
    Tensor y3 = reshape(y_batch == batch ? yk : expand(yk, y_full), {flat, k, m});
    Shape out_shape = batch;
    out_shape.insert(out_shape.end(), {n, m});
    out = reshape(bmm(x3, y3), out_shape);
  }
  if (a.dim() == 1) out = squeeze(out, -2);
  if (b.dim() == 1) out = squeeze(out, -1);
  return out;
}

Tensor multi_dot(const std::vector<Tensor>& tensors) {
  DeviceGuard device_guard("multi_dot", tensors);
  if (tensors.size() < 2) {
    throw errors::invalid_argument("multi_dot: expected at least 2 tensors but got " +
                                   std::to_string(tensors.size()));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    detail::check_defined("multi_dot", tensors[i], "tensor");
    const bool edge = i == 0 || i + 1 == tensors.size();
    if (tensors[i].dim() != 2 && !(edge && tensors[i].dim() == 1)) {
      throw errors::shape_mismatch("multi_dot: tensor " + std::to_string(i) + " must be 2-D" +
                                   (edge ? " or 1-D" : "") + ", got shape " +
                                   shape_str(tensors[i].shape()));
    }
  }
  // Inner sizes are checked up front so the message names multi_dot and the tensors as given; a
  // failing matmul further on would name an intermediate product the caller never passed.
  for (size_t i = 0; i + 1 < tensors.size(); ++i) {
    if (tensors[i].shape().back() != tensors[i + 1].shape()[0]) {
      throw errors::shape_mismatch("multi_dot: tensor " + std::to_string(i) + " of shape " +
                                   shape_str(tensors[i].shape()) + " and tensor " + std::to_string(i + 1) +
                                   " of shape " + shape_str(tensors[i + 1].shape()) +
                                   " cannot be multiplied");
    }
  }
  // Left to right; shapes are compatible, so each matmul only fails on dtypes.
  Tensor out = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) out = matmul(out, tensors[i]);
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  DeviceGuard device_guard("linear", {&x, &weight, &bias});
  detail::check_defined("linear", x, "input");
  detail::check_defined("linear", weight, "weight");
  detail::check_same_dtype("linear", x, weight);
  if (weight.dim() != 2 || x.dim() == 0 || x.shape().back() != weight.shape()[1]) {
    throw errors::shape_mismatch("linear: input " + shape_str(x.shape()) + " and weight " +
                                 shape_str(weight.shape()) +
                                 " cannot be multiplied (expected weight [out_features, " +
                                 (x.dim() == 0 ? std::string("?") : std::to_string(x.shape().back())) + "])");
  }
  if (bias.defined()) {
    detail::check_same_dtype("linear", x, bias);
    if (bias.dim() != 1 || bias.shape()[0] != weight.shape()[0]) {
      throw errors::shape_mismatch("linear: bias has shape " + shape_str(bias.shape()) + ", expected [" +
                                   std::to_string(weight.shape()[0]) + "]");
    }
  }
  if (x.dim() != 2) {
    Tensor out = matmul(x, transpose(weight, 0, 1));
    return bias.defined() ? add(out, bias) : out;
  }
  // The 2-D case is the MLP hot path: one gemm with a transposed weight, bias folded in.
  const int64_t batch = x.shape()[0];
  const int64_t in = x.shape()[1];
  const int64_t out_features = weight.shape()[0];
  Tensor out = Tensor::empty({batch, out_features}, x.dtype());
  if (bias.defined()) {
    // Every row starts as the bias; the product adds to it (beta = 1).
    if (DeviceKernels* kernels = device_kernels()) {
      const std::vector<int64_t> row_strides{0, 1};
      kernels->gather(x.dtype(), detail::bytes(bias), row_strides, detail::bytes(out), out.shape());
    } else {
      dispatch_dtype(x.dtype(), [&]<typename T>() {
        for (int64_t r = 0; r < batch; ++r) std::copy_n(bias.data<T>(), out_features, out.data<T>() + r * out_features);
      });
    }
  } else if (in == 0) {
    fill_zeros(out);
  }
  dispatch_dtype(x.dtype(), [&]<typename T>() {
    T* po = out.data<T>();
    const T beta = bias.defined() ? T{1} : T{0};
    if (in == 0) return;
    gemm<T>(false, true, batch, out_features, in, x.data<T>(), in, weight.data<T>(), in, beta, po,
            out_features);
  });
  variable_list inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  record_op("LinearBackward", inputs, {out}, [has_bias = bias.defined()](const BackwardArgs& args) {
    const Tensor& g = args.grads[0];
    const Tensor& xs = args.saved[0];
    const Tensor& w = args.saved[1];
    variable_list grads{args.needs(0) ? mm_raw(g, w) : Tensor(),            // dX = G·W
                        args.needs(1) ? mm_raw(g, xs, true, false) : Tensor()};  // dW = Gᵀ·X
    if (has_bias) grads.push_back(args.needs(2) ? sum(g, 0) : Tensor());
    return grads;
  }, {x, weight});
  return out;
}

}  // namespace dagsim
