// Values a peer controls, through the RPC agent: degenerate tensors whose results could never be
// sent back (zero bytes on the wire, a result of 2^40 elements), shapes whose byte counts overflow,
// and request ids near the end of their space. Each is refused by name; the node keeps serving.
#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/rpc/rpc_agent.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

using fibers::LocalRuntime;

class RemoteValuesTest : public ::testing::Test {
 protected:
  void start(RpcOptions options = {}) {
    registry_ = FunctionRegistry::with_builtins();
    for (int i = 0; i < 2; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<RpcAgent>(env, registry_, options));
      agents_.back()->start();
    }
  }
  RpcAgent& agent(int i) { return *agents_[static_cast<size_t>(i)]; }

  // An honest call still works: the node that refused the hostile one is serving.
  void expect_still_serving() {
    const std::vector<Tensor> out = rt_.run_on(0, [&] {
      return agent(0).rpc_sync(1, "add", {{from_values({2}, {1, 2}), from_values({2}, {10, 20})}, {}});
    });
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to_vector(), (std::vector<double>{11, 22}));
  }

  LocalRuntime rt_;
  FunctionRegistry registry_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
};

TEST(TensorSizes, ShapesWhoseBytesOverflowAreRefusedNamingTheShape) {
  const int64_t huge = int64_t{1} << 61;
  // 2^61 float64 elements are 2^64 bytes: the count wrapped to 0 and an op wrote past it.
  EXPECT_TRUE(throws_error([&] { Tensor::empty({huge}, Dtype::float64); }, ErrorCode::invalid_argument,
                           {"shape [2305843009213693952] has 2305843009213693952 elements"}));
  EXPECT_TRUE(throws_error([&] { Tensor::empty({huge, huge}); }, ErrorCode::invalid_argument,
                           {"the product of its sizes passes 2^63"}));
  // No elements, but a stride of 2^80: refused too, or every op walking it would overflow.
  EXPECT_TRUE(throws_error([&] { Tensor::empty({0, int64_t{1} << 40, int64_t{1} << 40}); }, ErrorCode::invalid_argument,
                           {"shape [0, 1099511627776, 1099511627776]: the product of its sizes passes 2^63"}));
  EXPECT_TRUE(throws_error([&] { Tensor::empty({2, -1}); }, ErrorCode::invalid_argument, {"negative size in shape [2, -1]"}));
  // Zero elements are fine however large the other sizes: no bytes.
  const Tensor none = Tensor::empty({0, huge});
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.nbytes(), 0u);
  // And so the reductions over the empty dim refuse their [2^61] result rather than writing it.
  EXPECT_TRUE(throws_error([&] { sum(none, 0); }, ErrorCode::invalid_argument, {"[2305843009213693952]"}));
}

TEST_F(RemoteValuesTest, ABuiltinWhoseResultCouldNeverBeSentBackIsRefusedAndTheNodeServesOn) {
  start();
  const int64_t big = int64_t{1} << 40;
  // sum over the empty dim of [0, 2^40]: nothing on the wire, 8 TiB of result.
  EXPECT_TRUE(throws_error(
      [&] {
        rt_.run_on(0, [&] { agent(0).rpc_sync(1, "sum", {{Tensor::empty({0, big})}, {{"dim", 0}}}); });
      },
      ErrorCode::invalid_argument,
      {"Error on Node 1: sum: argument 0 has shape [0, 1099511627776], whose sizes (zeros aside) multiply past"}));
  // softmax over the empty dim of [0, 2^24]: a result of no elements, but 2^24 lanes, allowed (and
  // quick: nothing to compute).
  const std::vector<Tensor> none =
      rt_.run_on(0, [&] { return agent(0).rpc_sync(1, "softmax", {{Tensor::empty({0, int64_t{1} << 24})}, {{"dim", 0}}}); });
  EXPECT_EQ(none.at(0).shape(), (Shape{0, int64_t{1} << 24}));
  // matmul of [2^20, 0] and [0, 2^20]: two empty tensors, a result of 2^40 zeros.
  const int64_t side = int64_t{1} << 20;
  EXPECT_TRUE(throws_error(
      [&] {
        rt_.run_on(0, [&] { agent(0).rpc_sync(1, "matmul", {{Tensor::empty({side, 0}), Tensor::empty({0, side})}, {}}); });
      },
      ErrorCode::invalid_argument, {"matmul: its result would have shape [1048576, 1048576]"}));
  // A degenerate call with a result that fits is answered correctly, as PyTorch would.
  const std::vector<Tensor> zeros =
      rt_.run_on(0, [&] { return agent(0).rpc_sync(1, "sum", {{Tensor::empty({0, 3})}, {{"dim", 0}}}); });
  ASSERT_EQ(zeros.size(), 1u);
  EXPECT_EQ(zeros[0].to_vector(), (std::vector<double>{0, 0, 0}));
  expect_still_serving();
}

TEST_F(RemoteValuesTest, RequestIdsPassTwoToThe32AndEndWithANamedErrorNotAnAbort) {
  // Past the 32 bits the ids once had: four calls either side of 2^32 all complete.
  RpcOptions options;
  options.first_request_sequence = (uint64_t{1} << 32) - 2;
  start(options);
  for (int i = 0; i < 4; ++i) expect_still_serving();
  EXPECT_EQ(agent(0).pending_calls(), 0u);
}

TEST_F(RemoteValuesTest, TheLastRequestIdIsUsedAndTheNextCallFailsByName) {
  RpcOptions options;
  options.first_request_sequence = RequestIds::kSequenceMask;  // one id left
  start(options);
  expect_still_serving();
  EXPECT_TRUE(throws_error([&] { expect_still_serving(); }, ErrorCode::invalid_argument,
                           {"worker0 has sent 2^48 - 1 requests in this life, all its request ids"}));
  // Node 1's ids are its own: it still calls node 0.
  const std::vector<Tensor> out = rt_.run_on(1, [&] {
    return agent(1).rpc_sync(0, "neg", {{from_values({1}, {3})}, {}});
  });
  EXPECT_EQ(out.at(0).to_vector(), (std::vector<double>{-3}));
}

}  // namespace
}  // namespace dagsim::rpc
