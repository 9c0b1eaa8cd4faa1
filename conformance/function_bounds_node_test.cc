// The allocation bound and the relay's `to` on the node's call path (issue 49, the in-tree
// counterpart of ../shared/repro/wire4/mlp_layer_unbounded_result.sh): a peer's call arrives as a
// frame, is decoded and served by the callee's RpcAgent out of the same registry a run uses
// (builtins plus the program's functions), and the caller gets the callee's error as its reply.
//
// - mlp_layer on zero-element [2^14, 0] x [2^14, 0] float64 (a 2 GiB result) is an error reply
//   naming mlp_layer, and the whole world allocates under 1 MiB of tensor bytes meanwhile (the
//   simulator runs every node on this thread, so allocation_budget::allocated_bytes() sees them).
// - A relay whose `to` is not a worker id (2^32, NaN, 1e300, -1, 1.5) is an error reply naming
//   the argument, and reaches no worker (a bare cast sent all of them to worker0); a valid one
//   forwards as before.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "conformance/rpc_world.h"
#include "core/tensor/allocation_budget.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/program/program.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;

rpc::FunctionRegistry run_functions() {
  rpc::FunctionRegistry r = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(r);
  return r;
}

// Worker2 calls worker1's `function`; the error it gets back, if any, and the result otherwise.
struct Reply {
  std::optional<Error> error;
  std::vector<Tensor> result;
};

Reply call(RpcWorld& w, const std::string& function, rpc::CallArgs args) {
  Reply reply;
  w.world.spawn_foreground(2, "caller", [&] {
    try {
      reply.result = w.agent(2).rpc_sync(1, function, std::move(args), 10s);
    } catch (const Error& e) {
      reply.error = e;
    }
  });
  EXPECT_EQ(w.world.run({}), sim::SimWorld::Outcome::finished);
  return reply;
}

TEST(FunctionBoundsNode, MlpLayerOnZeroElementInputsIsAnErrorReplyWithoutALargeAllocation) {
  RpcWorld w(latency(1ms, 1ms), 3, run_functions());
  const int64_t n = int64_t{1} << 14;
  rpc::CallArgs args{{zeros({n, 0}, Dtype::float64), zeros({n, 0}, Dtype::float64)}, {}};
  const uint64_t before = allocation_budget::allocated_bytes();
  const Reply reply = call(w, "mlp_layer", std::move(args));
  const uint64_t allocated = allocation_budget::allocated_bytes() - before;
  ASSERT_TRUE(reply.error.has_value()) << "mlp_layer on [2^14, 0] x [2^14, 0] was answered";
  EXPECT_EQ(reply.error->code(), ErrorCode::invalid_argument);
  EXPECT_NE(std::string(reply.error->what()).find("mlp_layer"), std::string::npos) << reply.error->what();
  EXPECT_LT(allocated, uint64_t{1} << 20) << "bytes of tensors allocated while the call was served";
}

TEST(FunctionBoundsNode, AnHonestMlpLayerCallIsStillAnswered) {
  RpcWorld w(latency(1ms, 1ms), 3, run_functions());
  rpc::CallArgs args{{from_values({1, 2}, {1, 2}), from_values({3, 2}, {1, 0, 0, 1, 1, 1})}, {{"activation", 2}}};
  const Reply reply = call(w, "mlp_layer", std::move(args));
  ASSERT_FALSE(reply.error.has_value()) << reply.error->what();
  ASSERT_EQ(reply.result.size(), 1u);
  EXPECT_EQ(reply.result[0].to_vector(), (std::vector<double>{1, 2, 3}));
}

TEST(FunctionBoundsNode, ARelayToThatIsNotAWorkerIdIsRefusedNamingIt) {
  for (double to : {4294967296.0, std::numeric_limits<double>::quiet_NaN(), 1e300, -1.0, 1.5, 65536.0}) {
    RpcWorld w(latency(1ms, 1ms), 3, run_functions());
    rpc::CallArgs args{{from_values({1}, {1}), from_values({1}, {2})}, {{"to", to}}};
    const Reply reply = call(w, "relay_add", std::move(args));
    ASSERT_TRUE(reply.error.has_value()) << "relay_add with to=" << to << " was answered";
    EXPECT_EQ(reply.error->code(), ErrorCode::invalid_argument) << reply.error->what();
    EXPECT_NE(std::string(reply.error->what()).find("argument 'to'"), std::string::npos) << reply.error->what();
  }
  RpcWorld w(latency(1ms, 1ms), 3, run_functions());
  const Reply reply = call(w, "relay_add", {{from_values({1}, {1}), from_values({1}, {2})}, {{"to", 0}}});
  ASSERT_FALSE(reply.error.has_value()) << reply.error->what();
  EXPECT_EQ(reply.result.at(0).item(), 3);
}

}  // namespace
}  // namespace dagsim::conformance
