// RpcAgent in the simulator: calls over a network with latency, partitions and node deaths end
// with their result or the right error, within the bounds the delivery contract implies, and a
// busy RPC world replays byte for byte.
#include <gtest/gtest.h>

#include <memory>

#include "conformance/rpc_world.h"
#include "core/rpc/rpc_agent.h"
#include "core/tensor/ops.h"
#include "sim/sim_world.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using rpc::CallArgs;
using rpc::CallContext;
using rpc::FunctionRegistry;
using rpc::RpcAgent;
using runtime::Duration;
using runtime::TimePoint;

Tensor scalar(double v) { return from_values({1}, {v}); }

FunctionRegistry registry() {
  FunctionRegistry r = FunctionRegistry::with_builtins();
  r.add("slow", [](CallContext& ctx, const CallArgs& args) {
    ctx.agent().env().clock.sleep(1s);
    return args.tensors;
  });
  return r;
}

TEST(RpcInSim, ACalleeKilledMidCallFailsTheCallAfterAboutOneLatency) {
  RpcWorld w(latency(1ms, 2ms), 2, registry());
  std::optional<Error> error;
  TimePoint failed_at;
  w.world.spawn_foreground(0, "caller", [&] {
    try {
      w.agent(0).rpc_sync(1, "slow", {{scalar(1)}, {}});
    } catch (const Error& e) {
      error = e;
      failed_at = w.world.now();
    }
  });
  w.world.at(TimePoint{500ms}, "kill", [&] { w.world.kill(1); });
  EXPECT_EQ(w.world.run({}), sim::SimWorld::Outcome::finished);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::connection_failed);
  EXPECT_NE(std::string(error->what()).find("worker1 died"), std::string::npos) << error->what();
  EXPECT_GE(failed_at, TimePoint{501ms});
  EXPECT_LE(failed_at, TimePoint{502ms});
}

TEST(RpcInSim, APartitionEndsACallByItsTimeoutOrTheConnectionTimeout) {
  sim::SimOptions options = latency(1ms, 1ms);
  options.network.connection_timeout = 3s;
  RpcWorld w(options, 2, registry());
  std::vector<std::pair<ErrorCode, TimePoint>> ends;
  w.world.spawn_foreground(0, "caller", [&] {
    for (Duration timeout : {Duration{2s}, Duration{10s}}) {
      try {
        w.agent(0).rpc_sync(1, "add", {{scalar(1), scalar(2)}, {}}, timeout);
      } catch (const Error& e) {
        ends.emplace_back(e.code(), w.world.now());
      }
    }
  });
  w.world.at(TimePoint{}, "partition", [&] { w.world.partition({{0, 1}, {1, 0}}); });
  w.world.run({});
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].first, ErrorCode::timed_out);      // 2 s timeout, before the 3 s connection timeout
  EXPECT_EQ(ends[0].second, TimePoint{2s});
  EXPECT_EQ(ends[1].first, ErrorCode::connection_failed);  // the connection times out first
}

uint64_t busy_world_hash(uint64_t seed, std::vector<double>& results) {
  RpcWorld w(latency(10us, 3ms, seed), 4, registry());
  results.assign(40, 0);
  for (int caller = 0; caller < 4; ++caller) {
    w.world.spawn_foreground(static_cast<WorkerId>(caller), "caller", [&w, &results, caller] {
      std::vector<runtime::Future<std::vector<Tensor>>> futures;
      for (int k = 0; k < 10; ++k) {
        const WorkerId to = static_cast<WorkerId>((caller + 1 + k % 3) % 4);
        futures.push_back(w.agent(caller).rpc_async(to, k % 2 ? "mul" : "add", {{scalar(caller), scalar(k)}, {}}));
      }
      for (int k = 0; k < 10; ++k) results[static_cast<size_t>(caller * 10 + k)] = futures[static_cast<size_t>(k)].get()[0].item();
    });
  }
  EXPECT_EQ(w.world.run({}), sim::SimWorld::Outcome::finished);
  return w.world.trace().hash();
}

TEST(RpcInSim, ConcurrentCallsGetTheirOwnResultsAndReplayBySeed) {
  std::vector<double> a, b, c;
  const uint64_t h1 = busy_world_hash(5, a);
  const uint64_t h2 = busy_world_hash(5, b);
  const uint64_t h3 = busy_world_hash(6, c);
  for (int caller = 0; caller < 4; ++caller) {
    for (int k = 0; k < 10; ++k) {
      const double expected = k % 2 ? caller * k : caller + k;
      EXPECT_EQ(a[static_cast<size_t>(caller * 10 + k)], expected) << caller << "," << k;
    }
  }
  EXPECT_EQ(a, c);
  EXPECT_EQ(h1, h2);
  EXPECT_NE(h1, h3);
}

}  // namespace
}  // namespace dagsim::conformance
