// Tests of RequestAdmission, of the agent under a flood and of its wait for room to send (issue
// 23, item 3): a node serves at most so many requests at once, in all and per peer, keeps at most
// so many bytes waiting, refuses the rest by name at once, and still serves an honest peer while
// another floods it; a request waits for room on its link within its own timeout.
#include "core/rpc/request_admission.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/rpc/rpc_agent.h"
#include "core/runtime/event.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

using namespace std::chrono_literals;

WaitingRequest waiting(WorkerId from, size_t bytes, uint64_t id) {
  WaitingRequest w;
  w.from = from;
  w.bytes = bytes;
  w.message.request_id = id;
  return w;
}

TEST(RequestAdmission, ServesUpToItsLimitsThenKeepsABoundedBacklogInOrderPeersTakingTurns) {
  RequestAdmission a({.max_serving = 3, .max_serving_per_peer = 2, .max_backlog_bytes = 100});
  EXPECT_TRUE(a.try_start(1));
  EXPECT_TRUE(a.try_start(1));
  EXPECT_FALSE(a.try_start(1));  // peer 1 is at its own limit
  EXPECT_TRUE(a.try_start(2));
  EXPECT_FALSE(a.try_start(3));  // the node is at its limit
  EXPECT_TRUE(a.defer(waiting(1, 40, 11)));
  EXPECT_TRUE(a.defer(waiting(1, 40, 12)));
  EXPECT_FALSE(a.defer(waiting(3, 40, 31)));  // 120 bytes would pass 100
  EXPECT_TRUE(a.defer(waiting(3, 20, 32)));
  EXPECT_EQ(a.backlog_bytes(), 100u);
  EXPECT_EQ(a.waiting(), 3u);
  // Nothing starts while the node is full.
  EXPECT_FALSE(a.next());
  // Peer 2's request ends: peer 1 is still at its limit, so peer 3's waiting request goes first.
  a.finished(2);
  std::optional<WaitingRequest> n = a.next();
  ASSERT_TRUE(n);
  EXPECT_EQ(n->message.request_id, 32u);
  EXPECT_FALSE(a.next());
  // A later request of peer 1 waits behind its earlier ones (FIFO), even with room.
  a.finished(1);
  EXPECT_FALSE(a.try_start(1));
  n = a.next();
  ASSERT_TRUE(n);
  EXPECT_EQ(n->message.request_id, 11u);
  a.finished(3);
  a.finished(1);
  n = a.next();
  ASSERT_TRUE(n);
  EXPECT_EQ(n->message.request_id, 12u);
  EXPECT_EQ(a.waiting(), 0u);
  EXPECT_EQ(a.backlog_bytes(), 0u);
  EXPECT_EQ(a.serving(), 2u);
  EXPECT_TRUE(a.try_start(1) == false && a.try_start(2));  // peer 1 at 2 again; peer 2 has room
}

// Node 0 floods node 1 with slow calls carrying 4 KiB each; node 2 makes one honest call.
TEST(RequestAdmission, AParkedRequestFreesItsSlotUpToThePeersParkingLimit) {
  RequestAdmission a({.max_serving = 2, .max_serving_per_peer = 2, .max_backlog_bytes = 100, .max_parked_per_peer = 1});
  EXPECT_TRUE(a.try_start(1));
  EXPECT_TRUE(a.try_start(1));
  EXPECT_TRUE(a.defer(waiting(2, 10, 21)));
  EXPECT_FALSE(a.next().has_value());  // the node is full
  EXPECT_TRUE(a.park(1));              // one of peer 1's requests waits on something else now
  EXPECT_EQ(a.serving(), 1u);
  EXPECT_EQ(a.parked(), 1u);
  const std::optional<WaitingRequest> next = a.next();  // its slot serves peer 2
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->message.request_id, 21u);
  EXPECT_FALSE(a.park(1));  // peer 1 is at its parking limit: this one stays counted
  EXPECT_EQ(a.serving(), 2u);
  a.finished(1);
  a.finished(2);
  EXPECT_FALSE(a.idle());  // the parked one still runs
  a.finished_parked(1);
  EXPECT_TRUE(a.idle());
}

TEST(RequestAdmission, AFloodedNodeKeepsItsBoundsRefusesTheRestByNameAndServesAnHonestPeer) {
  fibers::LocalRuntime rt;
  FunctionRegistry registry = FunctionRegistry::with_builtins();
  registry.add("slow", [](CallContext& ctx, const CallArgs& args) {
    ctx.agent().env().clock.sleep(10s);
    return std::vector<Tensor>{args.tensors.at(0)};
  });
  RpcOptions options;
  options.admission = {.max_serving = 8, .max_serving_per_peer = 4, .max_backlog_bytes = 64 << 10};
  std::vector<std::unique_ptr<RpcAgent>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<RpcAgent>(rt.add_node("worker" + std::to_string(i)), registry, options));
    agents.back()->start();
  }
  const int kFlood = 1000;
  size_t served = 0, refused = 0;
  rt.run_on(0, [&] {
    std::vector<Future<std::vector<Tensor>>> calls;
    size_t most_serving = 0, most_backlog = 0;
    const Tensor payload = zeros({512});  // 4 KiB of float64
    for (int i = 0; i < kFlood; ++i) {
      calls.push_back(agents[0]->rpc_async(1, "slow", {{payload}, {}}, 120s));
      if (i % 50 == 0) agents[0]->env().clock.sleep(1ms);  // let node 1 read what arrived
      most_serving = std::max(most_serving, agents[1]->admission().serving());
      most_backlog = std::max(most_backlog, agents[1]->admission().backlog_bytes());
    }
    agents[0]->env().clock.sleep(100ms);
    // The bounds held throughout: 4 of node 0's calls run, and at most 64 KiB of them wait.
    EXPECT_EQ(agents[1]->admission().serving_for(0), 4u);
    EXPECT_LE(most_serving, 4u);
    EXPECT_LE(most_backlog, size_t{64} << 10);
    EXPECT_GT(agents[1]->admission().waiting(), 0u);
    // Meanwhile an honest peer is served at once, its call not queued behind the flood.
    const runtime::TimePoint before = rt.now();
    bool honest_done = false;
    runtime::TimePoint honest_at;
    rt.env(2).spawner.spawn("honest", [&] {
      const std::vector<Tensor> out = agents[2]->rpc_sync(1, "add", {{from_values({1}, {1}), from_values({1}, {2})}, {}});
      EXPECT_EQ(out.at(0).to_vector(), (std::vector<double>{3}));
      honest_done = true;
      honest_at = rt.now();
    });
    agents[0]->env().clock.sleep(1s);
    EXPECT_TRUE(honest_done);
    EXPECT_LT(honest_at - before, 100ms);
    // Every flooding call ends: served (it started or waited) or refused as overloaded, by name.
    for (auto& f : calls) {
      try {
        f.get();
        ++served;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::overloaded) << e.what();
        EXPECT_NE(std::string(e.what()).find("node 1 is overloaded: it serves"), std::string::npos) << e.what();
        ++refused;
      }
    }
  });
  EXPECT_EQ(served + refused, static_cast<size_t>(kFlood));
  EXPECT_GT(refused, 0u);
  EXPECT_GE(served, 4u + 10u);  // those running, and at least the ten a 64 KiB backlog holds
  EXPECT_EQ(agents[1]->admission().serving(), 0u);
  EXPECT_EQ(agents[1]->admission().waiting(), 0u);
}

// A transport whose link to every peer is full until `open` is set (the TCP transport's room,
// Note [room to send]), counting what the agent waits for and sends.
class FullLinks final : public runtime::Transport {
 public:
  explicit FullLinks(runtime::Transport& inner) : inner_(inner) {}
  WorkerId self() const override { return inner_.self(); }
  using runtime::Transport::send;
  void send(WorkerId target, runtime::Bytes payload, uint64_t padding) override {
    ++sent;
    inner_.send(target, std::move(payload), padding);
  }
  runtime::Channel<runtime::Delivery>& inbox() override { return inner_.inbox(); }
  void close() override { inner_.close(); }
  bool wait_for_room(WorkerId, std::optional<runtime::TimePoint> deadline) override {
    ++waits;
    return deadline ? open.wait_until(*deadline) : (open.wait(), true);
  }
  runtime::Event open;
  int waits = 0;
  int sent = 0;

 private:
  runtime::Transport& inner_;
};

TEST(RoomToSend, ARequestWaitsForRoomWithinItsTimeoutAndOneThatTimesOutWaitingIsNeverSent) {
  fibers::LocalRuntime rt;
  FunctionRegistry registry = FunctionRegistry::with_builtins();
  runtime::Env& env0 = rt.add_node("worker0");
  FullLinks links(env0.transport);
  runtime::Env gated{env0.self, env0.name, env0.clock, links, env0.spawner, env0.random, env0.log, env0.incarnation,
                     env0.name_of};
  RpcAgent caller(gated, registry, {});
  RpcAgent callee(rt.add_node("worker1"), registry, {});
  caller.start();
  callee.start();
  const CallArgs args{{from_values({1}, {1}), from_values({1}, {2})}, {}};
  rt.run_on(0, [&] {
    const runtime::TimePoint t0 = rt.now();
    Future<std::vector<Tensor>> late = caller.rpc_async(1, "add", args, 200ms);
    EXPECT_EQ(rt.now() - t0, 200ms) << "rpc_async waited for room until the call's own deadline";
    try {
      late.get();
      ADD_FAILURE() << "a call that never got room succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::timed_out) << e.what();
    }
    EXPECT_EQ(links.waits, 1);
    EXPECT_EQ(links.sent, 0) << "a call that timed out while it waited is never sent";
    // Room comes 50 ms into the next call's wait: it is sent then, and answered.
    rt.env(1).spawner.spawn("opens", [&] {
      rt.env(1).clock.sleep(50ms);
      links.open.set();
    });
    const runtime::TimePoint t1 = rt.now();
    const std::vector<Tensor> out = caller.rpc_sync(1, "add", args, 1s);
    EXPECT_EQ(out.at(0).to_vector(), (std::vector<double>{3}));
    EXPECT_GE(rt.now() - t1, 50ms);
    EXPECT_EQ(links.sent, 1);
  });
}

}  // namespace
}  // namespace dagsim::rpc
