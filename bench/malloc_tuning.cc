// Memory-allocator tuning for the benchmark process, the same as the dagsim binary's: tensor and
// frame buffers over glibc's default mmap threshold (128 KiB, adjusted dynamically) would
// otherwise be mapped and unmapped per allocation, and every fresh page faults. Keeping them on
// the heap is what a long-running training process wants; it changes no result.
#include <malloc.h>

namespace {
struct MallocTuning {
  MallocTuning() {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
} tuning;
}  // namespace
