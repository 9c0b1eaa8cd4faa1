// storage_pool.h's promises: reuse by size, alignment, the cache's bound, and the issue-25 claim
// that an MLP training step allocates no tensor bytes from the system after its first iteration.
#include "core/tensor/storage_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/autograd/engine.h"
#include "core/base/prng.h"
#include "core/base/sanitizers.h"
#include "core/tensor/ops.h"

namespace dagsim {
namespace {

TEST(StoragePool, AFreedBlockServesTheNextRequestOfItsSize) {
  if (kAddressSanitizer) GTEST_SKIP() << "the pool caches nothing under AddressSanitizer";
  storage_pool::trim();
  void* a = storage_pool::allocate(4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  storage_pool::release(a, 4096);
  EXPECT_EQ(storage_pool::stats().cached_bytes, 4096u);
  const uint64_t hits = storage_pool::stats().hits;
  void* other = storage_pool::allocate(4160);  // another size: not that block
  EXPECT_NE(other, a);
  void* again = storage_pool::allocate(4096);
  EXPECT_EQ(again, a);
  EXPECT_EQ(storage_pool::stats().hits, hits + 1);
  storage_pool::release(other, 4160);
  storage_pool::release(again, 4096);
  storage_pool::trim();
  EXPECT_EQ(storage_pool::stats().cached_bytes, 0u);
}

TEST(StoragePool, TheCacheStaysWithinItsBound) {
  storage_pool::trim();
  constexpr size_t kBlock = size_t{8} << 20;
  std::vector<void*> blocks;
  for (size_t i = 0; i < 2 * storage_pool::kMaxCachedBytes / kBlock; ++i) blocks.push_back(storage_pool::allocate(kBlock));
  for (void* b : blocks) storage_pool::release(b, kBlock);
  EXPECT_LE(storage_pool::stats().cached_bytes, storage_pool::kMaxCachedBytes);
  if (!kAddressSanitizer) {
    EXPECT_EQ(storage_pool::stats().cached_bytes, storage_pool::kMaxCachedBytes);
  }
  storage_pool::trim();
}

// The benchmark's MLP step (8 layers of 256, batch 64, tanh, gradients of the weights): after the
// first iteration, no tensor of a step comes from the system.
TEST(StoragePool, AnMlpStepAllocatesNothingAfterItsFirstIteration) {
  if (kAddressSanitizer) GTEST_SKIP() << "the pool caches nothing under AddressSanitizer";
  for (const Dtype dtype : {Dtype::float32, Dtype::float64}) {
    Prng prng(11);
    const Tensor x = randn({64, 256}, prng, 0.0, 1.0, dtype);
    std::vector<Tensor> weights;
    for (int i = 0; i < 8; ++i) {
      weights.push_back(randn({256, 256}, prng, 0.0, 1.0 / 16, dtype));
      weights.back().set_requires_grad(true);
    }
    auto step = [&] {
      Tensor h = x;
      for (const Tensor& w : weights) h = tanh(matmul(h, w));
      return autograd::Engine::grad({sum(h)}, weights);
    };
    (void)step();
    const uint64_t misses = storage_pool::stats().misses;
    for (int i = 0; i < 3; ++i) {
      const autograd::variable_list grads = step();
      ASSERT_EQ(grads.size(), weights.size());
    }
    EXPECT_EQ(storage_pool::stats().misses, misses) << dtype_name(dtype);
    EXPECT_GT(storage_pool::stats().hits, 0u);
  }
}

}  // namespace
}  // namespace dagsim
