// Tests of request handlers by message type on RpcAgent (add_handler / request_bytes): services
// side by side on one node, byte payloads both ways, a handler's error with its code and node, a
// type nobody serves, the same timeout / dead-peer promises as calls, and the agent's checks on
// responses (the wrong peer, the wrong type, an id it never handed out). Also: a timeout fails its
// call on the agent's reaper fiber, never on the clock's driver.
#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/codec.h"
#include "core/rpc/rpc_agent.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

using namespace std::chrono_literals;
using fibers::LocalRuntime;

constexpr MessageType kEcho = service_request(kTestServices + 0);
constexpr MessageType kCount = service_request(kTestServices + 1);
constexpr MessageType kSlow = service_request(kTestServices + 2);
constexpr MessageType kFail = service_request(kTestServices + 3);
constexpr MessageType kRelay = service_request(kTestServices + 4);
constexpr MessageType kNobody = service_request(kTestServices + 5);

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

class RpcHandlersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = FunctionRegistry::with_builtins();
    registry_.add("slow", [](CallContext& ctx, const CallArgs& args) {
      ctx.agent().env().clock.sleep(10s);
      return args.tensors;
    });
    for (int i = 0; i < 3; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<RpcAgent>(env, registry_));
      RpcAgent& agent = *agents_.back();
      agent.add_handler(kEcho, [&agent](WorkerId from, const Bytes& payload) {
        Bytes out = text("node " + std::to_string(agent.self()) + " from " + std::to_string(from) + ": ");
        out.insert(out.end(), payload.begin(), payload.end());
        return out;
      });
      agent.add_handler(kCount, [this](WorkerId, const Bytes& payload) {
        counted_ += payload.size();
        return Bytes{static_cast<uint8_t>(counted_)};
      });
      agent.add_handler(kSlow, [&agent](WorkerId, const Bytes& payload) {
        agent.env().clock.sleep(10s);
        return payload;
      });
      agent.add_handler(kFail, [](WorkerId, const Bytes&) -> Bytes {
        throw errors::invalid_argument("no such key 'k'");
      });
      // A handler may block on requests of its own: node 1 asks node 2.
      agent.add_handler(kRelay, [&agent](WorkerId, const Bytes& payload) {
        return agent.request_bytes(2, kEcho, payload).get();
      });
      agent.start();
    }
  }

  RpcAgent& agent(int i) { return *agents_[static_cast<size_t>(i)]; }

  LocalRuntime rt_;
  FunctionRegistry registry_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
  size_t counted_ = 0;
};

TEST_F(RpcHandlersTest, ServicesSitSideBySideAndExchangeBytes) {
  const auto [echo, count, sum] = rt_.run_on(0, [&] {
    Future<Bytes> e = agent(0).request_bytes(1, kEcho, text("hello"));
    Future<Bytes> c = agent(0).request_bytes(1, kCount, Bytes(5, 0));
    // Calls still work beside them.
    const double s = agent(0).rpc_sync(1, "add", {{from_values({1}, {1}), from_values({1}, {2})}, {}})[0].item();
    return std::tuple{e.get(), c.get(), s};
  });
  EXPECT_EQ(echo, text("node 1 from 0: hello"));
  EXPECT_EQ(count, Bytes{5});
  EXPECT_EQ(sum, 3.0);
  EXPECT_EQ(agent(0).pending_calls(), 0u);
}

TEST_F(RpcHandlersTest, HandlersMayBlockOnRequestsOfTheirOwnAndServeOneself) {
  EXPECT_EQ(rt_.run_on(0, [&] { return agent(0).request_bytes(1, kRelay, text("x")).get(); }), text("node 2 from 1: x"));
  EXPECT_EQ(rt_.run_on(2, [&] { return agent(2).request_bytes(2, kEcho, text("me")).get(); }), text("node 2 from 2: me"));
}

TEST_F(RpcHandlersTest, AHandlersErrorKeepsItsCodeAndSaysWhichNodeRaisedIt) {
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).request_bytes(1, kFail, {}).get(); }); },
                           ErrorCode::invalid_argument, {"Error on Node 1: no such key 'k'"}));
}

TEST_F(RpcHandlersTest, ATypeNobodyServesGetsAnErrorReplyNamingIt) {
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).request_bytes(1, kNobody, {}).get(); }); },
                           ErrorCode::protocol_error,
                           {"Error on Node 1: node 1 has no handler for message type service_req (437)"}));
  // Distributed autograd's types too, on a node that runs none.
  EXPECT_TRUE(throws_error(
      [&] { rt_.run_on(0, [&] { agent(0).request_bytes(1, MessageType::backward_autograd_req, {}).get(); }); },
      ErrorCode::protocol_error, {"no handler for message type backward_autograd_req"}));
}

TEST_F(RpcHandlersTest, ARequestTimesOutNamingThePeerAndItsLateReplyIsIgnored) {
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).request_bytes(1, kSlow, {}, 2s, "store get").get(); }); },
                           ErrorCode::timed_out, {"store get to worker1 timed out after 2000 ms"}));
  EXPECT_EQ(rt_.now().since_epoch, std::chrono::nanoseconds(10s)) << "the handler ran to its end";
  EXPECT_EQ(agent(0).pending_calls(), 0u);
}

TEST_F(RpcHandlersTest, ARequestToADeadNodeFailsNamingIt) {
  rt_.kill(1);
  EXPECT_TRUE(throws_error([&] { rt_.run_on(0, [&] { agent(0).request_bytes(1, kEcho, {}).get(); }); },
                           ErrorCode::connection_failed, {"service_req request to worker1: worker1 is dead"}));
}

TEST_F(RpcHandlersTest, ATimeoutFailsItsCallOnANodeFiberSoContinuationsNeverStartFromTheDriver) {
  // The continuation's fiber is spawned by whoever fails the call: the agent's reaper (finish and
  // fail assert they run on a node fiber; a timer callback that failed the call itself would trip
  // that assertion, since timers fire outside every node fiber).
  std::string failed_on;
  bool timed_out = false;
  rt_.run_on(0, [&] {
    Future<Bytes> f = agent(0).request_bytes(1, kSlow, {}, 1s);
    f.then([&](Future<Bytes> done) {
      timed_out = throws_error([&] { done.get(); }, ErrorCode::timed_out, {"timed out after 1000 ms"});
    });
    Future<std::vector<Tensor>> g = agent(0).rpc_async(2, "slow", {}, 500ms);
    g.then([&](Future<std::vector<Tensor>> done) { failed_on = done.has_error() ? "error" : "value"; });
    f.wait();
  });
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(failed_on, "error");
}

TEST_F(RpcHandlersTest, AResponseFromTheWrongPeerOrOfTheWrongTypeFailsTheCall) {
  // Node 0's first request id is predictable (ids.h): worker 0, incarnation 0, sequence 1.
  const uint64_t first = make_global_id(0, 1);
  Message forged;
  forged.type = response_type_of(kSlow);
  forged.request_id = first;
  EXPECT_TRUE(throws_error(
      [&] {
        rt_.run_on(0, [&] {
          Future<Bytes> f = agent(0).request_bytes(1, kSlow, {});
          rt_.env(2).transport.send(0, encode(forged));  // node 2 answers a request sent to node 1
          f.get();
        });
      },
      ErrorCode::protocol_error, {"a service_resp from node 2 cannot answer it"}));
  forged.type = MessageType::ret;  // node 1, but a call's reply to a handler's request
  forged.request_id = make_global_id(0, 2);
  EXPECT_TRUE(throws_error(
      [&] {
        rt_.run_on(0, [&] {
          Future<Bytes> f = agent(0).request_bytes(1, kSlow, {});
          rt_.env(1).transport.send(0, encode(forged));
          f.get();
        });
      },
      ErrorCode::protocol_error, {"a ret from node 1 cannot answer it (expected a service_resp)"}));
  // An id node 0 never handed out is logged and dropped.
  forged.request_id = make_global_id(2, 1);
  rt_.run_on(1, [&] { rt_.env(1).transport.send(0, encode(forged)); });
  const auto& log = dynamic_cast<runtime::MemoryLog&>(rt_.env(0).log).entries();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().kind, "rpc.stray_response");
}

}  // namespace
}  // namespace dagsim::rpc
