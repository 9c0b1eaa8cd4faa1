// Distributed autograd under node deaths, in the simulator (issue 4, "beyond PyTorch"): a context
// whose originator died is released on the survivors (PyTorch issue #26379 leaks it), and a node
// dying in the middle of a backward fails it promptly, naming the dead node, instead of hanging.
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "core/base/throws_error_test_util.h"
#include "core/dist_autograd/dist_autograd.h"
#include "core/tensor/ops.h"
#include "conformance/autograd_cluster.h"
#include "sim/sim_network.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using runtime::TimePoint;

// Two or three nodes at a constant latency, RPC timeouts of 5 s.
struct AutogradWorld : AutogradCluster {
  AutogradWorld(int nodes, runtime::Duration latency, runtime::Duration connection_timeout = 5s)
      : AutogradCluster(options(latency, connection_timeout), nodes, registry_,
                        rpc::RpcOptions{.default_timeout = 5s, .limits = {}}) {}
  static sim::SimOptions options(runtime::Duration latency, runtime::Duration connection_timeout) {
    sim::SimOptions o;
    o.network.latency = runtime::LatencyModel::constant(latency);
    o.network.connection_timeout = connection_timeout;
    return o;
  }
  static inline const rpc::FunctionRegistry registry_ = rpc::FunctionRegistry::with_builtins();
};

Tensor leaf() {
  Tensor t = from_values({2}, {1, 2});
  t.set_requires_grad(true);
  return t;
}

TEST(DistAutogradFaults, AContextWhoseOriginatorDiedIsReleasedOnTheSurvivors) {
  AutogradWorld w(2, 1ms);
  Tensor x = leaf();
  w.world.spawn_foreground(0, "trainer", [&] {
    dist_autograd::DistAutograd::Context ctx(*w.autograd[0]);
    w.agents[0]->rpc_sync(1, "neg", {{x}, {}});
    w.world.env(0).clock.sleep(1h);  // killed meanwhile, never releases
  });
  w.world.at(TimePoint{100ms}, "kill", [&] { w.world.kill(0); });
  w.world.run({.stop_at = TimePoint{50ms}});
  EXPECT_EQ(w.autograd[1]->debug_info().num_autograd_contexts, 1u);
  w.world.run({.stop_at = TimePoint{2s}});  // ends when the trainer dies with its node
  w.world.run({.stop_at = TimePoint{2s}});  // the survivors' side of it
  EXPECT_EQ(w.autograd[1]->debug_info().num_autograd_contexts, 0u) << "the orphaned context leaked";
}

// A connection that fails while both incarnations live (a partition held traffic past the
// connection timeout) is not a death: each end probes the other, the probe gets through once the
// partition heals and finds the same incarnation, and nothing is released; the context still
// serves a backward afterwards.
TEST(DistAutogradFaults, APassingConnectionFailureReleasesNothing) {
  AutogradWorld w(2, 1ms, /*connection_timeout=*/200ms);
  Tensor x = leaf();
  bool done = false;
  std::optional<Error> ping_error;
  w.world.spawn_foreground(0, "trainer", [&] {
    dist_autograd::DistAutograd::Context ctx(*w.autograd[0]);
    Tensor y = w.agents[0]->rpc_sync(1, "neg", {{x}, {}})[0];
    w.world.env(0).clock.sleep(1s);  // the connection fails and the partition heals meanwhile
    w.autograd[0]->backward(ctx.id(), {sum(y)});
    done = w.autograd[0]->get_gradients(ctx.id()).size() == 1;
  });
  // Traffic during the partition, outside any autograd context: it is held, and at 350 ms (its
  // connection timeout) the connection fails; both ends are told, and each probes the other.
  w.world.spawn_foreground(0, "pinger", [&] {
    w.world.env(0).clock.sleep(150ms);
    try {
      w.agents[0]->rpc_sync(1, "neg", {{from_values({1}, {1})}, {}});
    } catch (const Error& e) {
      ping_error = e;
    }
  });
  // The probes are held in turn; the heal at 450 ms comes before their own connection times out.
  w.world.at(TimePoint{100ms}, "partition", [&] { w.world.partition({{0, 1}, {1, 0}}); });
  w.world.at(TimePoint{450ms}, "heal", [&] { w.world.heal_all(); });

  EXPECT_EQ(w.world.run({.stop_at = TimePoint{600ms}}), sim::SimWorld::Outcome::finished);
  ASSERT_TRUE(ping_error.has_value()) << "the partition caused no connection failure";
  EXPECT_EQ(ping_error->code(), ErrorCode::connection_failed) << ping_error->what();
  EXPECT_EQ(w.world.network().stats().connection_failures, 1u) << "one failure; the probes got through";
  EXPECT_EQ(w.autograd[0]->debug_info().num_autograd_contexts, 1u);
  EXPECT_EQ(w.autograd[1]->debug_info().num_autograd_contexts, 1u) << "the peer released a live originator's context";

  EXPECT_EQ(w.world.run({.max_virtual_time = TimePoint{60s}}), sim::SimWorld::Outcome::finished);
  EXPECT_TRUE(done);
}

TEST(DistAutogradFaults, ANodeDyingDuringTheBackwardFailsItPromptlyNamingTheNode) {
  AutogradWorld w(3, 20ms);
  Tensor x = leaf();
  std::optional<Error> error;
  TimePoint failed_at;
  w.world.spawn_foreground(0, "trainer", [&] {
    dist_autograd::DistAutograd::Context ctx(*w.autograd[0]);
    Tensor y = w.agents[0]->rpc_sync(1, "neg", {{x}, {}})[0];
    Tensor z = w.agents[0]->rpc_sync(2, "neg", {{y}, {}})[0];
    try {
      w.autograd[0]->backward(ctx.id(), {sum(z)});
    } catch (const Error& e) {
      error = e;
      failed_at = w.world.now();
    }
  });
  // Forward takes ~80 ms (two round trips); kill worker1 while its gradients are on the way.
  w.world.at(TimePoint{110ms}, "kill", [&] { w.world.kill(1); });
  w.world.run({.max_virtual_time = TimePoint{60s}});
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::connection_failed) << error->what();
  EXPECT_NE(std::string(error->what()).find("worker1"), std::string::npos) << error->what();
  EXPECT_LT(failed_at, TimePoint{1s}) << "failed by the death, not by a timeout";
}

// Beyond PyTorch: worker1 dies and is back before the backward reaches it. Its new life holds no
// send function of the old one's, so the pass fails as a connection failure naming the life that
// died, not with PyTorch's "Could not find ..." (found by examples/rref_owner_kills, seeds 15 and 42).
TEST(DistAutogradFaults, ABackwardThatReachesARestartedWorkerFailsNamingTheLifeThatDied) {
  AutogradWorld w(2, 1ms);
  std::vector<std::unique_ptr<rpc::RpcAgent>> old_agents;  // the dead life's, kept until the end
  std::vector<std::unique_ptr<dist_autograd::DistAutograd>> old_autograd;
  Tensor x = leaf();
  std::optional<Error> error;
  w.world.spawn_foreground(0, "trainer", [&] {
    dist_autograd::DistAutograd::Context ctx(*w.autograd[0]);
    Tensor y = w.agents[0]->rpc_sync(1, "neg", {{x}, {}})[0];  // ~2 ms
    w.world.env(0).clock.sleep(50ms);                          // worker1 dies and comes back
    try {
      w.autograd[0]->backward(ctx.id(), {sum(y)});
    } catch (const Error& e) {
      error = e;
    }
  });
  w.world.at(TimePoint{10ms}, "kill", [&] { w.world.kill(1); });
  w.world.at(TimePoint{20ms}, "restart", [&] {
    w.world.restart(1);
    old_autograd.push_back(std::move(w.autograd[1]));
    old_agents.push_back(std::move(w.agents[1]));
    w.agents[1] = std::make_unique<rpc::RpcAgent>(w.world.env(1), AutogradWorld::registry_,
                                                  rpc::RpcOptions{.default_timeout = 5s, .limits = {}});
    w.autograd[1] = std::make_unique<dist_autograd::DistAutograd>(*w.agents[1], dist_autograd::DistEngineOptions{});
    w.agents[1]->start();
  });
  w.world.run({.max_virtual_time = TimePoint{60s}});
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::connection_failed) << error->what();
  EXPECT_NE(std::string(error->what()).find("reached worker1 in life 2"), std::string::npos) << error->what();
  EXPECT_NE(std::string(error->what()).find("was recorded by life 1, which died"), std::string::npos) << error->what();
}

}  // namespace
}  // namespace dagsim::conformance
