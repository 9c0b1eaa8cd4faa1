#include "compute/device/sim_gpu.h"

#include <algorithm>
#include <cstring>

#include "core/base/error.h"
#include "core/runtime/fiber_context.h"
#include "core/tensor/device_guard.h"
#include "core/tensor/storage_pool.h"
#include "core/tensor/tensor.h"

namespace dagsim::device {

SimGpu::SimGpu(int ordinal, runtime::Clock& clock, Prng prng, SimGpuDelays delays)
    : device_(Device::cuda(ordinal)), clock_(clock), prng_(prng), delays_(delays), stream_tail_ns_(1, 0) {
  DAGSIM_ASSERT(delays_.kernel_min_ns >= 0 && delays_.kernel_min_ns <= delays_.kernel_max_ns);
  DAGSIM_ASSERT(delays_.copy_min_ns >= 0 && delays_.copy_min_ns <= delays_.copy_max_ns);
}

std::byte* SimGpu::allocate(size_t nbytes) {
  auto* block = static_cast<std::byte*>(storage_pool::allocate(nbytes));
  blocks_[block] = nbytes;
  return block;
}
void SimGpu::release(std::byte* block, size_t nbytes) {
  blocks_.erase(block);
  storage_pool::release(block, nbytes);
}

void SimGpu::check_owned(const std::byte* p, size_t nbytes, const char* primitive) const {
  auto it = blocks_.upper_bound(p);
  const bool owned = it != blocks_.begin() && (--it, p + nbytes <= it->first + it->second);
  DAGSIM_ASSERT_MSG(owned, std::string("the kernel table's ") + primitive + " was given memory that is not " +
                               device_.str() + "'s (a host tensor reached a device kernel)");
}

// The host reference, given only this GPU's memory. Extents are checked at their first element
// (a strided operand's span is the op's business; its start is where a host tensor shows).
class SimGpu::CheckedKernels final : public DeviceKernels {
 public:
  explicit CheckedKernels(const SimGpu& gpu) : gpu_(gpu) {}
  void unary(Pointwise op, Dtype dtype, const std::byte* x, std::byte* out, int64_t n, double scalar) override {
    if (n > 0) {
      if (x != nullptr) gpu_.check_owned(x, dtype_size(dtype), "unary");
      gpu_.check_owned(out, dtype_size(dtype), "unary");
    }
    host_.unary(op, dtype, x, out, n, scalar);
  }
  void binary(Pointwise op, Dtype dtype, const std::byte* a, std::span<const int64_t> a_strides, const std::byte* b,
              std::span<const int64_t> b_strides, std::byte* out, std::span<const int64_t> shape, double scalar) override {
    if (numel(shape) > 0) {
      for (const std::byte* p : {a, b, static_cast<const std::byte*>(out)}) gpu_.check_owned(p, dtype_size(dtype), "binary");
    }
    host_.binary(op, dtype, a, a_strides, b, b_strides, out, shape, scalar);
  }
  void gather(Dtype dtype, const std::byte* x, std::span<const int64_t> x_strides, std::byte* out,
              std::span<const int64_t> shape) override {
    if (numel(shape) > 0) {
      gpu_.check_owned(x, dtype_size(dtype), "gather");
      gpu_.check_owned(out, dtype_size(dtype), "gather");
    }
    host_.gather(dtype, x, x_strides, out, shape);
  }
  void reduce_sum(Dtype dtype, const std::byte* x, std::span<const int64_t> x_shape, std::byte* out, int64_t out_numel,
                  std::span<const int64_t> out_strides, double scale) override {
    if (out_numel > 0) {
      if (numel(x_shape) > 0) gpu_.check_owned(x, static_cast<size_t>(numel(x_shape)) * dtype_size(dtype), "reduce_sum");
      gpu_.check_owned(out, static_cast<size_t>(out_numel) * dtype_size(dtype), "reduce_sum");
    }
    host_.reduce_sum(dtype, x, x_shape, out, out_numel, out_strides, scale);
  }
  void copy_rows(const std::byte* src, size_t src_pitch, std::byte* dst, size_t dst_pitch, size_t row_bytes,
                 size_t rows) override {
    if (rows > 0 && row_bytes > 0) {
      gpu_.check_owned(src, (rows - 1) * src_pitch + row_bytes, "copy_rows");
      gpu_.check_owned(dst, (rows - 1) * dst_pitch + row_bytes, "copy_rows");
    }
    host_.copy_rows(src, src_pitch, dst, dst_pitch, row_bytes, rows);
  }
  void gemm(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const std::byte* a, int64_t lda,
            const std::byte* b, int64_t ldb, double beta, std::byte* c, int64_t ldc) override {
    if (m > 0 && n > 0 && k > 0) {
      for (const std::byte* p : {a, b, static_cast<const std::byte*>(c)}) gpu_.check_owned(p, dtype_size(dtype), "gemm");
    }
    host_.gemm(dtype, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  }
  void lines(LineOp op, Dtype dtype, const LineArgs& args) override {
    if (args.lines > 0) {
      const std::string what = std::string("lines (") + line_op_name(op) + ")";
      for (const void* p : {args.x, args.g, args.w, args.b, static_cast<const void*>(args.y),
                            static_cast<const void*>(args.y2),
                            static_cast<const void*>(args.stat0), static_cast<const void*>(args.stat1),
                            static_cast<const void*>(args.index), static_cast<const void*>(args.starts)}) {
        if (p != nullptr) gpu_.check_owned(static_cast<const std::byte*>(p), 1, what.c_str());
      }
    }
    host_.lines(op, dtype, args);
  }
  void cast(Dtype from, const std::byte* x, Dtype to, std::byte* out, int64_t n) override {
    if (n > 0) {
      gpu_.check_owned(x, static_cast<size_t>(n) * dtype_size(from), "cast");
      gpu_.check_owned(out, static_cast<size_t>(n) * dtype_size(to), "cast");
    }
    host_.cast(from, x, to, out, n);
  }

 private:
  static int64_t numel(std::span<const int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }

  const SimGpu& gpu_;
  HostKernels host_;
};

DeviceKernels* SimGpu::kernels() {
  if (!use_kernel_table_) return nullptr;
  if (kernels_ == nullptr) kernels_ = std::make_unique<CheckedKernels>(*this);
  return kernels_.get();
}

SimGpu::~SimGpu() = default;

int64_t SimGpu::now_ns() const { return clock_.now().ns(); }

int64_t SimGpu::draw_delay(bool copy) {
  return copy ? prng_.uniform_int(delays_.copy_min_ns, delays_.copy_max_ns)
              : prng_.uniform_int(delays_.kernel_min_ns, delays_.kernel_max_ns);
}

void SimGpu::poison(std::byte* bytes, size_t nbytes) {
  ++stats_.racy_reads;
  // What a racing read sees on a real GPU depends on what was there before: a fresh block
  // (zeros), a recycled one (stale values of some other tensor), or memory the allocator filled.
  switch (prng_.uniform_int(0, 2)) {
    case 0:
      std::memset(bytes, 0xff, nbytes);  // all-ones bits: NaN in float32 and float64
      break;
    case 1:
      std::memset(bytes, 0, nbytes);
      break;
    default:
      for (size_t i = 0; i < nbytes; ++i) bytes[i] = static_cast<std::byte>(prng_.next_u64() & 0x3f);
      break;
  }
}

void SimGpu::launch(std::span<Storage* const> reads, std::span<Storage* const> writes, bool copy) {
  int64_t& tail = stream_tail_ns_[static_cast<size_t>(current_.get())];
  const int64_t start = std::max(tail, now_ns());
  bool raced = false;
  for (const Storage* r : reads) raced = raced || r->ready_mark > start;
  const int64_t end = start + draw_delay(copy);
  tail = end;
  ++(copy ? stats_.copies : stats_.kernels);
  for (Storage* w : writes) {
    DAGSIM_ASSERT(w->backend() == this);
    w->ready_mark = end;
    w->writer_stream = current_.get();
    if (raced) poison(w->data(), w->nbytes());
  }
}

int SimGpu::new_stream() {
  stream_tail_ns_.push_back(0);
  return static_cast<int>(stream_tail_ns_.size() - 1);
}

void SimGpu::set_current_stream(int stream) {
  DAGSIM_ASSERT(stream >= 0 && static_cast<size_t>(stream) < stream_tail_ns_.size());
  current_.set(stream);
}

DeviceEvent SimGpu::record(int stream) {
  DAGSIM_ASSERT(stream >= 0 && static_cast<size_t>(stream) < stream_tail_ns_.size());
  return DeviceEvent{device_, stream, stream_tail_ns_[static_cast<size_t>(stream)]};
}

void SimGpu::wait(int stream, const DeviceEvent& event) {
  DAGSIM_ASSERT(event.device == device_);
  int64_t& tail = stream_tail_ns_[static_cast<size_t>(stream)];
  tail = std::max(tail, event.mark);
}

bool SimGpu::query(const DeviceEvent& event) const { return now_ns() >= event.mark; }

void SimGpu::sleep_until(int64_t ns) {
  if (now_ns() >= ns) return;
  // Outside any node fiber (a judge reading results after the run) the world has stopped and
  // there is nothing to wait for; inside one, the fiber sleeps and others run.
  if (runtime::current_fiber() == nullptr || runtime::current_fiber()->clock == nullptr) return;
  ++stats_.host_waits;
  DeviceGuard::Suspend off_device;
  clock_.sleep_until(runtime::TimePoint{runtime::Duration{ns}});
}

void SimGpu::synchronize(const DeviceEvent& event) { sleep_until(event.mark); }

void SimGpu::read_to_host(const Storage& storage, std::byte* out, size_t nbytes) {
  DAGSIM_ASSERT(storage.backend() == this && nbytes <= storage.nbytes());
  // .cpu(): a copy on the current stream, then the host waits for that stream.
  int64_t& tail = stream_tail_ns_[static_cast<size_t>(current_.get())];
  const int64_t start = std::max(tail, now_ns());
  const bool raced = storage.ready_mark > start;
  const int64_t end = start + draw_delay(true);
  tail = end;
  ++stats_.copies;
  // The values as the copy issued now reads them: a later kernel of another fiber, computed
  // eagerly while this one sleeps, must not show through.
  std::memcpy(out, storage.data(), nbytes);
  if (raced) poison(out, nbytes);
  sleep_until(end);
}

void SimGpu::write_from_host(Storage& storage, const std::byte* in, size_t nbytes) {
  DAGSIM_ASSERT(storage.backend() == this && nbytes <= storage.nbytes());
  std::memcpy(storage.data(), in, nbytes);
  Storage* written = &storage;
  launch({}, std::span<Storage* const>(&written, 1), true);
}

}  // namespace dagsim::device
