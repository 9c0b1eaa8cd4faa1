#include "compute/device/host_kernels.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/base/assert.h"
#include "core/tensor/op_util.h"
#include "compute/kernels/vector_math.h"

namespace dagsim::device {

namespace {

std::vector<int64_t> vec_of(std::span<const int64_t> s) { return {s.begin(), s.end()}; }

bool is_contiguous(std::span<const int64_t> strides, std::span<const int64_t> shape) {
  return vec_of(strides) == detail::contiguous_strides(vec_of(shape));
}

// The vectorised CPU kernel that computes `op`, where there is one (the CPU ops call it).
bool vec_unary(Pointwise op, vec::Unary& out) {
  switch (op) {
    case Pointwise::tanh: out = vec::Unary::tanh; return true;
    case Pointwise::exp: out = vec::Unary::exp; return true;
    case Pointwise::log: out = vec::Unary::log; return true;
    case Pointwise::sigmoid: out = vec::Unary::sigmoid; return true;
    default: return false;
  }
}
bool vec_binary(Pointwise op, vec::Binary& out) {
  switch (op) {
    case Pointwise::add: out = vec::Binary::add; return true;
    case Pointwise::sub: out = vec::Binary::sub; return true;
    case Pointwise::mul: out = vec::Binary::mul; return true;
    case Pointwise::div: out = vec::Binary::div; return true;
    case Pointwise::tanh_backward: out = vec::Binary::tanh_backward; return true;
    case Pointwise::sigmoid_backward: out = vec::Binary::sigmoid_backward; return true;
    default: return false;
  }
}

}  // namespace

void HostKernels::unary(Pointwise op, Dtype dtype, const std::byte* x, std::byte* out, int64_t n, double scalar) {
  DAGSIM_ASSERT_MSG(!is_binary(op), std::string("unary kernel given the binary formula ") + pointwise_name(op));
  dispatch_dtype(dtype, [&]<typename T>() {
    const T* px = reinterpret_cast<const T*>(x);
    T* py = reinterpret_cast<T*>(out);
    if (vec::Unary v{}; vec_unary(op, v)) {
      vec::unary(v, px, py, n);
      return;
    }
    visit_unary(op, [&](auto f) {
      for (int64_t i = 0; i < n; ++i) py[i] = static_cast<T>(f(px == nullptr ? T{0} : px[i], scalar));
    }, [] { DAGSIM_UNREACHABLE(); });
  });
}

void HostKernels::binary(Pointwise op, Dtype dtype, const std::byte* a, std::span<const int64_t> a_strides,
                         const std::byte* b, std::span<const int64_t> b_strides, std::byte* out,
                         std::span<const int64_t> shape, double scalar) {
  DAGSIM_ASSERT_MSG(is_binary(op), std::string("binary kernel given the unary formula ") + pointwise_name(op));
  DAGSIM_ASSERT(a_strides.size() == shape.size() && b_strides.size() == shape.size());
  const Shape out_shape = vec_of(shape);
  const int64_t n = shape_numel(out_shape);
  const bool contiguous = is_contiguous(a_strides, shape) && is_contiguous(b_strides, shape);
  dispatch_dtype(dtype, [&]<typename T>() {
    const T* pa = reinterpret_cast<const T*>(a);
    const T* pb = reinterpret_cast<const T*>(b);
    T* po = reinterpret_cast<T*>(out);
    if (contiguous) {
      if (vec::Binary v{}; vec_binary(op, v)) return vec::binary(v, pa, pb, po, n);
      if (op == Pointwise::axpy && pa == po) return vec::axpy(scalar, pb, po, n);  // add_, as the CPU's
    }
    visit_binary(op, [&](auto f) {
      detail::for_each_broadcast(out_shape, vec_of(a_strides), vec_of(b_strides), [&](int64_t ia, int64_t ib, int64_t io) {
        po[io] = static_cast<T>(f(pa[ia], pb[ib], scalar));
      });
    }, [] { DAGSIM_UNREACHABLE(); });
  });
}

void HostKernels::gather(Dtype dtype, const std::byte* x, std::span<const int64_t> x_strides, std::byte* out,
                         std::span<const int64_t> shape) {
  DAGSIM_ASSERT(x_strides.size() == shape.size());
  dispatch_dtype(dtype, [&]<typename T>() {
    const T* px = reinterpret_cast<const T*>(x);
    T* po = reinterpret_cast<T*>(out);
    detail::for_each_broadcast(vec_of(shape), vec_of(x_strides), std::vector<int64_t>(shape.size(), 0),
                               [&](int64_t ix, int64_t, int64_t io) { po[io] = px[ix]; });
  });
}

void HostKernels::reduce_sum(Dtype dtype, const std::byte* x, std::span<const int64_t> x_shape, std::byte* out,
                             int64_t out_numel, std::span<const int64_t> out_strides, double scale) {
  DAGSIM_ASSERT(out_strides.size() == x_shape.size());
  const Shape shape = vec_of(x_shape);
  dispatch_dtype(dtype, [&]<typename T>() {
    const T* px = reinterpret_cast<const T*>(x);
    T* po = reinterpret_cast<T*>(out);
    std::vector<T> acc(static_cast<size_t>(out_numel), T{0});
    detail::for_each_broadcast(shape, detail::contiguous_strides(shape), vec_of(out_strides),
                               [&](int64_t ix, int64_t io, int64_t) { acc[static_cast<size_t>(io)] += px[ix]; });
    for (int64_t j = 0; j < out_numel; ++j) {
      const T sum = acc[static_cast<size_t>(j)];
      po[j] = scale == 1.0 ? sum : static_cast<T>(sum * scale);
    }
  });
}

void HostKernels::copy_rows(const std::byte* src, size_t src_pitch, std::byte* dst, size_t dst_pitch, size_t row_bytes,
                            size_t rows) {
  for (size_t r = 0; r < rows; ++r) std::memcpy(dst + r * dst_pitch, src + r * src_pitch, row_bytes);
}

void HostKernels::gemm(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const std::byte* a,
                       int64_t lda, const std::byte* b, int64_t ldb, double beta, std::byte* c, int64_t ldc) {
  dispatch_dtype(dtype, [&]<typename T>() {
    detail::gemm_host<T>(trans_a, trans_b, m, n, k, reinterpret_cast<const T*>(a), lda, reinterpret_cast<const T*>(b), ldb,
                         static_cast<T>(beta), reinterpret_cast<T*>(c), ldc);
  });
}

void HostKernels::lines(LineOp op, Dtype dtype, const LineArgs& args) {
  run_lines_on_host(op, dtype, args);
}

void HostKernels::cast(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n) {
  cast_on_host(from, x, to, out, n);
}

}  // namespace dagsim::device
