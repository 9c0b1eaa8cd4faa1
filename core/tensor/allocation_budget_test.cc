// The allocation budget (allocation_budget.h): charged before bytes are taken, nested scopes
// charged together, one fiber's scope never charging another's allocations.
#include "core/tensor/allocation_budget.h"

#include <gtest/gtest.h>

#include <boost/fiber/all.hpp>
#include <string>

#include "core/tensor/ops.h"

namespace dagsim {
namespace {

TEST(AllocationBudget, AnAllocationPastTheBoundIsRefusedBeforeAnyByteIsTaken) {
  allocation_budget::Scope scope("f", 4096);
  Tensor a = Tensor::empty({256}, Dtype::float64);  // 2,048 bytes
  EXPECT_EQ(scope.charged(), 2048u);
  const uint64_t before = allocation_budget::allocated_bytes();
  try {
    (void)Tensor::empty({int64_t{1} << 40}, Dtype::float32);  // 4 TiB: would fail if tried
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("f: it would allocate 4398046511104 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(allocation_budget::allocated_bytes(), before);
  EXPECT_EQ(scope.charged(), 2048u);
  Tensor b = Tensor::empty({256}, Dtype::float64);  // exactly to the bound
  EXPECT_EQ(scope.charged(), 4096u);
  EXPECT_THROW((void)Tensor::empty({1}, Dtype::float32), Error);
}

TEST(AllocationBudget, ItIsCumulativeAndCountsEveryKernelsResult) {
  allocation_budget::Scope scope("g", 1 << 20);
  Tensor x = from_values({2, 2}, {1, 2, 3, 4});
  const uint64_t start = scope.charged();
  for (int i = 0; i < 10; ++i) x = add(x, x);  // each result is charged, freed or not
  EXPECT_GE(scope.charged() - start, 10u * 4 * sizeof(double));
}

TEST(AllocationBudget, NestedScopesAreChargedTogether) {
  allocation_budget::Scope outer("outer", 8192);
  {
    allocation_budget::Scope inner("inner", 1 << 20);
    Tensor a = Tensor::empty({1024}, Dtype::float32);  // 4 KiB: both
    EXPECT_EQ(inner.charged(), 4096u);
    try {
      (void)Tensor::empty({2048}, Dtype::float32);  // 8 KiB: within inner, past outer
      ADD_FAILURE() << "not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("outer:"), std::string::npos) << e.what();
    }
    EXPECT_EQ(inner.charged(), 4096u);  // a refused charge reaches no scope
  }
  EXPECT_EQ(outer.charged(), 4096u);
}

TEST(AllocationBudget, AScopeChargesOnlyItsOwnFiber) {
  allocation_budget::Scope mine("main", 1024);
  uint64_t other_fiber_bytes = 0;
  boost::fibers::fiber other([&] {
    const uint64_t before = allocation_budget::allocated_bytes();
    Tensor big = Tensor::empty({4096}, Dtype::float64);  // 32 KiB: no scope here
    other_fiber_bytes = allocation_budget::allocated_bytes() - before;
  });
  other.join();
  EXPECT_EQ(other_fiber_bytes, 4096u * 8);
  EXPECT_EQ(mine.charged(), 0u);
}

TEST(AllocationBudget, WithoutAScopeNothingIsRefused) {
  const uint64_t before = allocation_budget::allocated_bytes();
  Tensor t = Tensor::empty({1 << 20}, Dtype::float32);
  EXPECT_EQ(allocation_budget::allocated_bytes() - before, uint64_t{4} << 20);
}

}  // namespace
}  // namespace dagsim
