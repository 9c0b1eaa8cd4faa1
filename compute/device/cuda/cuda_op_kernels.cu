#include "compute/device/cuda/cuda_op_kernels.h"

#include <cuda_runtime.h>

#include <string>

#include "compute/device/cuda/cuda_check.h"
#include "compute/device/cuda/grid.cuh"
#include "compute/kernels/warp_walk.h"

namespace dagsim::device::cuda {

namespace {

using grid::as_stream;
using grid::blocks_for;
using grid::kThreads;

// Grid-stride loops, so any n fits any grid. The index space is passed by value (kernel
// parameters live in constant memory).
template <typename T, typename F>
__global__ void unary_kernel(F f, const T* x, T* out, int64_t n, double s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<T>(f(x == nullptr ? T{0} : x[i], s));
  }
}
template <typename T, typename F>
__global__ void binary_contiguous_kernel(F f, const T* a, const T* b, T* out, int64_t n, double s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<T>(f(a[i], b[i], s));
  }
}
template <typename T, typename F>
__global__ void binary_strided_kernel(F f, const T* a, const T* b, T* out, StridedShape index, int64_t n, double s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const Offsets o = offsets_of(index, i);
    out[i] = static_cast<T>(f(a[o.a], b[o.b], s));
  }
}
template <typename T>
__global__ void gather_kernel(const T* x, T* out, StridedShape index, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = x[offsets_of(index, i).a];
  }
}
// One thread per output, adding its elements in index order, in T, as the CPU does.
template <typename T>
__global__ void reduce_kernel(const T* x, T* out, StridedShape kept, int64_t out_numel, StridedShape reduced,
                              int64_t reduced_numel, double scale) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < out_numel; j += int64_t{gridDim.x} * blockDim.x) {
    out[j] = reduced_sum(x, kept, reduced, reduced_numel, scale, j);
  }
}
// One thread per line: each line's outputs are its own (line_kernels.h).
template <typename T, typename F>
__global__ void lines_kernel(F f, LineArgs args) {
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < args.lines; l += int64_t{gridDim.x} * blockDim.x) {
    f.template run<T>(args, l);
  }
}
// How a GPU's lanes read each other's values: warp shuffles over the whole warp (warp_walk.h's
// Lanes). Host and device, so that WarpWalk's host-device members may call it; only device code
// does (a warp's kernel), and a host call would be a programmer error, so it traps.
struct ShuffleLanes {
  static constexpr unsigned kWholeWarp = 0xffffffffu;
  template <typename V> DAGSIM_HOST_DEVICE V exchange(V v, int w) const {
#ifdef __CUDA_ARCH__
    return __shfl_xor_sync(kWholeWarp, v, w);
#else
    (void)w;
    __builtin_trap();
    return v;
#endif
  }
  template <typename V> DAGSIM_HOST_DEVICE V from_lane0(V v) const {
#ifdef __CUDA_ARCH__
    return __shfl_sync(kWholeWarp, v, 0);
#else
    __builtin_trap();
    return v;
#endif
  }
};
using ShuffleWalk = WarpWalk<ShuffleLanes>;

// One warp per line, for the lane-order line ops. Every lane of a warp has the same line, so the
// whole warp reaches each shuffle together.
// A block is whole warps, so every lane of a warp sees the same line (and the same loop bound).
static_assert(kThreads % lane_order::kLanes == 0, "blocks of whole warps");
template <typename T, typename F>
__global__ void warp_lines_kernel(F f, LineArgs args) {
  const ShuffleWalk walk{ShuffleLanes{}, static_cast<int>(threadIdx.x) % lane_order::kLanes};
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / lane_order::kLanes;
  for (int64_t l = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / lane_order::kLanes; l < args.lines; l += warps) {
    f.template run<T>(args, l, walk);
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* x, To* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<To>(x[i]);
  }
}
template <typename T>
__global__ void scale_kernel(T* out, double scale) {
  out[0] = static_cast<T>(out[0] * scale);
}

[[noreturn]] void wrong_arity(Pointwise op, const char* kernel) {
  throw_kernel_misuse((std::string("the ") + kernel + " kernel was given the formula " + pointwise_name(op)).c_str());
}

}  // namespace

template <typename T>
void pointwise_unary(Pointwise op, const T* x, T* out, int64_t n, double s, StreamHandle stream) {
  if (n == 0) return;
  visit_unary(op, [&](auto f) {
    unary_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(f, x, out, n, s);
  }, [&] { wrong_arity(op, "unary"); });
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void pointwise_binary(Pointwise op, const T* a, const T* b, T* out, const StridedShape& index, int64_t n, double s,
                      StreamHandle stream) {
  if (n == 0) return;
  const bool flat = row_major(index);
  visit_binary(op, [&](auto f) {
    if (flat) {
      binary_contiguous_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(f, a, b, out, n, s);
    } else {
      binary_strided_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(f, a, b, out, index, n, s);
    }
  }, [&] { wrong_arity(op, "binary"); });
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void gather(const T* x, T* out, const StridedShape& index, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  gather_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, out, index, n);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void reduce_sum(const T* x, T* out, const StridedShape& kept, int64_t out_numel, const StridedShape& reduced,
                int64_t reduced_numel, double scale, StreamHandle stream) {
  if (out_numel == 0) return;
  const cudaStream_t s = as_stream(stream);
  if (out_numel == 1 && reduced_numel > 1 && row_major(reduced, /*with_b=*/false)) {
    grid::cub_sum(x, out, reduced_numel, s);  // a whole tensor
    if (scale != 1.0) scale_kernel<T><<<1, 1, 0, s>>>(out, scale);
  } else {
    reduce_kernel<T><<<blocks_for(out_numel), kThreads, 0, s>>>(x, out, kept, out_numel, reduced, reduced_numel, scale);
  }
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void lines_by_threads(LineOp op, const LineArgs& args, StreamHandle stream) {
  if (args.lines == 0) return;
  visit_line(op, [&](auto f) { lines_kernel<T><<<blocks_for(args.lines), kThreads, 0, as_stream(stream)>>>(f, args); });
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void lines(LineOp op, const LineArgs& args, StreamHandle stream) {
  if (!takes_a_walk(op) || args.size < kWarpLineMin) return lines_by_threads<T>(op, args, stream);
  if (args.lines == 0) return;
  visit_line(op, [&](auto f) {
    if constexpr (walks_lines<decltype(f), T, ShuffleWalk>::value) {
      warp_lines_kernel<T><<<blocks_for(args.lines * lane_order::kLanes), kThreads, 0, as_stream(stream)>>>(f, args);
    } else {
      throw_kernel_misuse((std::string("the warp line kernel was given ") + line_op_name(op)).c_str());
    }
  });
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}

template <typename From, typename To>
void cast(const From* x, To* out, int64_t n, StreamHandle stream) {
  if (n == 0) return;
  cast_kernel<From, To><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(x, out, n);
  DAGSIM_CUDA_CHECK(cudaGetLastError());
}
template void cast<float, double>(const float*, double*, int64_t, StreamHandle);
template void cast<double, float>(const double*, float*, int64_t, StreamHandle);
template void cast<float, float>(const float*, float*, int64_t, StreamHandle);
template void cast<double, double>(const double*, double*, int64_t, StreamHandle);

#define DAGSIM_INSTANTIATE(T)                                                                                   \
  template void pointwise_unary<T>(Pointwise, const T*, T*, int64_t, double, StreamHandle);                     \
  template void pointwise_binary<T>(Pointwise, const T*, const T*, T*, const StridedShape&, int64_t, double,    \
                                    StreamHandle);                                                              \
  template void gather<T>(const T*, T*, const StridedShape&, int64_t, StreamHandle);                            \
  template void reduce_sum<T>(const T*, T*, const StridedShape&, int64_t, const StridedShape&, int64_t, double, \
                              StreamHandle);                                                              \
  template void lines<T>(LineOp, const LineArgs&, StreamHandle);                                                \
  template void lines_by_threads<T>(LineOp, const LineArgs&, StreamHandle);
DAGSIM_INSTANTIATE(float)
DAGSIM_INSTANTIATE(double)
#undef DAGSIM_INSTANTIATE

}  // namespace dagsim::device::cuda
