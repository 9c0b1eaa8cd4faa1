// Tests of the built-in store (StoreService on node 0, StoreClients on nodes 1 and 2, LocalRuntime's
// virtual time): PyTorch's Store semantics (compare_set's three cases, add as decimal text, get and
// wait blocking until a key is set, multi_get/multi_set, delete, num_keys), versions as
// compare-and-set tokens (a stale token never writes), watches that wake on a change and not
// before, and every waiting call ending with an error that names its keys or the store, never a
// hang.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"

namespace dagsim::store {
namespace {

using namespace std::chrono_literals;
using fibers::LocalRuntime;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = rpc::FunctionRegistry::with_builtins();
    for (int i = 0; i < 3; ++i) {
      runtime::Env& env = rt_.add_node("worker" + std::to_string(i));
      agents_.push_back(std::make_unique<rpc::RpcAgent>(env, registry_));
      if (i == 0) service_ = std::make_unique<StoreService>(*agents_.back());
      agents_.back()->start();
      clients_.push_back(std::make_unique<StoreClient>(*agents_.back(), 0));
      clients_.back()->set_timeout(2s);
    }
  }

  StoreClient& client(int i) { return *clients_[static_cast<size_t>(i)]; }

  LocalRuntime rt_;
  rpc::FunctionRegistry registry_;
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents_;
  std::unique_ptr<StoreService> service_;
  std::vector<std::unique_ptr<StoreClient>> clients_;
};

TEST_F(StoreTest, SetGetAndPyTorchsCompareSet) {
  rt_.run_on(1, [&] {
    client(1).set("a", text("1"));
    EXPECT_EQ(client(1).get("a"), text("1"));
    // Absent key, empty expected: written. Absent key, other expected: not written, expected back.
    EXPECT_EQ(client(1).compare_set("b", {}, text("x")), text("x"));
    EXPECT_EQ(client(1).compare_set("c", text("e"), text("y")), text("e"));
    EXPECT_FALSE(client(1).check({"c"}));
    // Present key: written only if it holds expected; the current value back either way.
    EXPECT_EQ(client(1).compare_set("b", text("x"), text("z")), text("z"));
    EXPECT_EQ(client(1).compare_set("b", text("x"), text("w")), text("z"));
    EXPECT_EQ(client(1).get("b"), text("z"));
  });
}

TEST_F(StoreTest, AddKeepsDecimalTextAndRefusesAKeyThatHoldsNoInteger) {
  rt_.run_on(1, [&] {
    EXPECT_EQ(client(1).add("n", 5), 5);
    EXPECT_EQ(client(1).add("n", -2), 3);
    EXPECT_EQ(client(1).get("n"), text("3"));
    client(1).set("s", text("three"));
    EXPECT_TRUE(throws_error([&] { client(1).add("s", 1); }, ErrorCode::invalid_argument, {"does not hold an integer"}));
  });
}

TEST_F(StoreTest, GetWaitsUntilAnotherNodeSetsTheKey) {
  runtime::TimePoint got_at;
  rt_.env(2).spawner.spawn("setter", [&] {
    rt_.env(2).clock.sleep(500ms);
    client(2).set("late", text("v"));
  });
  const Bytes v = rt_.run_on(1, [&] {
    Bytes out = client(1).get("late");
    got_at = rt_.now();
    return out;
  });
  EXPECT_EQ(v, text("v"));
  EXPECT_GE(got_at, runtime::TimePoint{} + 500ms);
  EXPECT_LT(got_at, runtime::TimePoint{} + 600ms) << "woken by the write, not by a poll";
}

TEST_F(StoreTest, WaitTimesOutNamingTheKeysStillMissing) {
  rt_.run_on(1, [&] {
    client(1).set("here", text("1"));
    EXPECT_TRUE(throws_error([&] { client(1).wait({"here", "absent"}); }, ErrorCode::timed_out,
                             {"store wait for keys [here, absent] timed out after 2000 ms", "still missing: [absent]"}));
  });
  EXPECT_LE(rt_.now(), runtime::TimePoint{} + 2s + 10ms);
}

TEST_F(StoreTest, MultiGetMultiSetDeleteAndNumKeys) {
  rt_.run_on(2, [&] {
    client(2).multi_set({"k1", "k2"}, {text("v1"), text("v2")});
    EXPECT_EQ(client(2).multi_get({"k2", "k1"}), (std::vector<Bytes>{text("v2"), text("v1")}));
    EXPECT_EQ(client(2).num_keys(), 2);
    EXPECT_TRUE(client(2).delete_key("k1"));
    EXPECT_FALSE(client(2).delete_key("k1"));
    EXPECT_EQ(client(2).num_keys(), 1);
    EXPECT_TRUE(throws_error([&] { client(2).multi_set({"a"}, {}); }, ErrorCode::invalid_argument, {"as many values as keys"}));
  });
}

TEST_F(StoreTest, VersionsRiseWithEveryWriteAndAStaleTokenNeverWrites) {
  rt_.run_on(1, [&] {
    EXPECT_EQ(client(1).get_versioned("state").version, 0u);
    const CasOutcome first = client(1).compare_set_version("state", 0, text("round 0"));
    ASSERT_TRUE(first.written);
    const uint64_t token = first.current.version;
    EXPECT_GT(token, 0u);
    // Another node writes with the same token first: ours is stale and writes nothing.
    const CasOutcome theirs = client(2).compare_set_version("state", token, text("round 1 by 2"));
    ASSERT_TRUE(theirs.written);
    EXPECT_GT(theirs.current.version, token);
    const CasOutcome ours = client(1).compare_set_version("state", token, text("round 1 by 1"));
    EXPECT_FALSE(ours.written);
    EXPECT_EQ(ours.current.value, text("round 1 by 2"));
    EXPECT_EQ(ours.current.version, theirs.current.version);
    // A token of 0 writes only an absent key.
    EXPECT_FALSE(client(1).compare_set_version("state", 0, text("again")).written);
  });
}

TEST_F(StoreTest, AWatchWakesWhenTheKeyChangesAndNotBefore) {
  rt_.run_on(1, [&] { client(1).set("w", text("a")); });
  const uint64_t known = rt_.run_on(1, [&] { return client(1).get_versioned("w").version; });
  rt_.env(2).spawner.spawn("writer", [&] {
    rt_.env(2).clock.sleep(300ms);
    client(2).set("other", text("not this one"));
    rt_.env(2).clock.sleep(300ms);
    client(2).set("w", text("b"));
  });
  runtime::TimePoint woke;
  const Versioned v = rt_.run_on(1, [&] {
    Versioned out = client(1).watch("w", known);
    woke = rt_.now();
    return out;
  });
  EXPECT_EQ(v.value, text("b"));
  EXPECT_GT(v.version, known);
  EXPECT_GE(woke, runtime::TimePoint{} + 600ms);
  EXPECT_LT(woke, runtime::TimePoint{} + 700ms);
  // A deletion is a change too.
  rt_.env(2).spawner.spawn("deleter", [&] { client(2).delete_key("w"); });
  EXPECT_EQ(rt_.run_on(1, [&] { return client(1).watch("w", v.version).version; }), 0u);
}

TEST_F(StoreTest, AWatchThatSeesNoChangeTimesOut) {
  rt_.run_on(1, [&] {
    client(1).set("still", text("x"));
    const uint64_t known = client(1).get_versioned("still").version;
    EXPECT_TRUE(throws_error([&] { client(1).watch("still", known); }, ErrorCode::timed_out, {"watch of key still timed out"}));
  });
}

TEST_F(StoreTest, ABoundedWatchAnswersTheUnchangedKeyAtItsTimeoutOrTheChangeAtOnce) {
  rt_.run_on(1, [&] {
    client(1).set("b", text("x"));
    const uint64_t known = client(1).get_versioned("b").version;
    const runtime::TimePoint start = rt_.now();
    const Versioned same = client(1).watch_at_most("b", known, 300ms);
    EXPECT_EQ(same.version, known);
    EXPECT_EQ(same.value, text("x"));
    EXPECT_EQ(rt_.now(), start + 300ms) << "its own timeout, not the store's (2 s)";
  });
  rt_.env(2).spawner.spawn("writer", [&] {
    rt_.env(2).clock.sleep(100ms);
    client(2).set("b", text("y"));
  });
  const runtime::TimePoint start = rt_.now();
  const Versioned changed = rt_.run_on(1, [&] { return client(1).watch_at_most("b", client(1).get_versioned("b").version, 1s); });
  EXPECT_EQ(changed.value, text("y"));
  EXPECT_LT(rt_.now(), start + 200ms);
}

TEST_F(StoreTest, AStoreThatDiesFailsEveryWaiterWithAClearErrorWithinItsTimeout) {
  rt_.env(0).spawner.spawn("death", [&] {
    rt_.env(0).clock.sleep(100ms);
    rt_.kill(0);
  });
  bool failed_clearly = false;
  rt_.run_on(1, [&] {
    try {
      client(1).get("never");
    } catch (const Error& e) {
      failed_clearly = (e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed) &&
                       std::string(e.what()).find("store get on node 0") != std::string::npos;
      EXPECT_TRUE(failed_clearly) << e.what();
    }
  });
  EXPECT_TRUE(failed_clearly);
  EXPECT_LE(rt_.now(), runtime::TimePoint{} + 2s + kReplyGrace + 10ms);
  // A call after the death fails at once, naming the store's node.
  EXPECT_TRUE(throws_error([&] { rt_.run_on(1, [&] { client(1).set("k", text("v")); }); }, ErrorCode::connection_failed,
                           {"store set on node 0"}));
}

// Deltas (store_service.h): a versioned reply to a client that holds an earlier version carries
// the edits since, a compare-and-set that wrote carries no value, a compare-and-set against the
// version its client holds sends its value as a delta, and a version the store no longer keeps is
// answered whole. `state(k)` is a 13 KB value; each k adds a record in the middle.
TEST_F(StoreTest, AClientHoldingAVersionIsAnsweredWithTheEditsSinceNotTheValue) {
  auto state = [](int joined) {
    std::string s;
    for (int i = 0; i < 1000; ++i) {
      if (i % 2 == 0 || i < 2 * joined) s += "node" + std::to_string(i) + " beat 12345\n";
    }
    return text(s);
  };
  rt_.run_on(1, [&] {
    uint64_t before = 0;
    auto received = [&](StoreClient& c) { return c.value_bytes_received() - std::exchange(before, c.value_bytes_received()); };
    const CasOutcome created = client(1).compare_set_version("state", 0, state(0));
    ASSERT_TRUE(created.written);
    EXPECT_EQ(created.current.value, state(0));  // what it sent: the reply carries none
    before = client(2).value_bytes_received();
    const Versioned seen = client(2).get_versioned("state");
    EXPECT_EQ(seen.value, state(0));
    EXPECT_EQ(received(client(2)), state(0).size());  // it held nothing: whole

    ASSERT_TRUE(client(1).compare_set_version("state", created.current.version, state(1)).written);
    const Versioned woke = client(2).watch("state", seen.version);
    EXPECT_EQ(woke.value, state(1));
    EXPECT_LT(received(client(2)), 64u);
    // Read again with nothing changed: a copy of what it holds.
    EXPECT_EQ(client(2).get_versioned("state").value, state(1));
    EXPECT_LT(received(client(2)), 16u);

    // A compare-and-set that loses gets the winner's value as a delta; one that wins, nothing.
    ASSERT_TRUE(client(1).compare_set_version("state", woke.version, state(2)).written);
    const CasOutcome lost = client(2).compare_set_version("state", woke.version, state(3));
    EXPECT_FALSE(lost.written);
    EXPECT_EQ(lost.current.value, state(2));
    EXPECT_LT(received(client(2)), 64u);
    const CasOutcome won = client(2).compare_set_version("state", lost.current.version, state(3));
    ASSERT_TRUE(won.written);
    EXPECT_EQ(won.current.value, state(3));
    EXPECT_EQ(received(client(2)), 0u);

    // Client 1 writes past the store's history: client 2's version is gone, and it is answered whole.
    uint64_t token = won.current.version;
    for (size_t i = 0; i <= kHistoryVersions; ++i) {
      const CasOutcome w = client(1).compare_set_version("state", token, state(4 + static_cast<int>(i % 2)));
      ASSERT_TRUE(w.written);
      token = w.current.version;
    }
    const Versioned late = client(2).get_versioned("state");
    EXPECT_EQ(late.value, state(4 + static_cast<int>(kHistoryVersions % 2)));
    EXPECT_EQ(received(client(2)), late.value.size());
  });
  EXPECT_EQ(service_->deltas_sent(), 3u);
  // Every compare-and-set made against a version its client held went as a delta, and was rebuilt
  // where it could land: client 1's two edits, client 2's win, and client 1's loop but its first
  // write (made against client 2's version, which client 1 never held: sent whole); client 2's
  // lost race rebuilt nothing. The values read back above are what those writes sent.
  EXPECT_EQ(service_->deltas_received(), 2u + 1 + kHistoryVersions);
}

// A compare-and-set whose value is a delta against another version than the expected one, or a
// delta that does not fit the value it names, is refused with a named error and writes nothing.
TEST_F(StoreTest, AForgedDeltaValueIsRefusedAndWritesNothing) {
  rt_.run_on(1, [&] {
    const Bytes value(300, 'v');
    const uint64_t version = client(1).compare_set_version("state", 0, value).current.version;
    auto forged = [&](uint64_t value_base, Bytes delta) {
      StoreRequest r;
      r.op = static_cast<uint8_t>(StoreOp::compare_set_version);
      r.keys = {"state"};
      r.values = {std::move(delta)};
      r.version = version;
      r.value_base = value_base;
      agents_[1]->request_bytes(0, kStoreRequest, rpc::to_bytes(r), 2s, "forged store request").get();
    };
    EXPECT_TRUE(throws_error([&] { forged(version + 1, Bytes{1}); }, ErrorCode::invalid_argument,
                             {"a delta against version", "not the expected"}));
    EXPECT_TRUE(throws_error([&] { forged(version, Bytes{10, 1, 0, 200}); }, ErrorCode::protocol_error,
                             {"store delta.copy.length"}));
    const Versioned after = client(2).get_versioned("state");
    EXPECT_EQ(after.version, version);
    EXPECT_EQ(after.value, value);
  });
}

// A store that restarts empty must not hand out versions of its earlier life: a client holding one
// as a compare-and-set token would overwrite a value it never read (the rendezvous property found
// this: after the store node crashed and restarted, a node's cached token 4 matched the new life's
// version 4 and its stale state went in). Versions of a later incarnation lie above all earlier ones.
TEST(StoreIncarnations, ARestartedStoreNeverHandsOutAVersionOfAnEarlierLife) {
  const auto versions_of_life = [](uint32_t incarnation) {
    LocalRuntime rt;
    const rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
    runtime::Env& store_env = rt.add_node("worker0");
    store_env.incarnation = incarnation;
    rpc::RpcAgent store_agent(store_env, registry);
    StoreService service(store_agent);
    store_agent.start();
    rpc::RpcAgent client_agent(rt.add_node("worker1"), registry);
    client_agent.start();
    StoreClient client(client_agent, 0);
    std::vector<uint64_t> versions;
    rt.run_on(1, [&] {
      for (int i = 0; i < 3; ++i) versions.push_back(client.compare_set_version("state", versions.empty() ? 0 : versions.back(), text("v")).current.version);
    });
    return versions;
  };
  const std::vector<uint64_t> first = versions_of_life(0);
  const std::vector<uint64_t> second = versions_of_life(1);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_LT(first[0], first[1]);
  EXPECT_LT(second[0], second[1]);
  EXPECT_GT(second.front(), first.back());
}

// More nodes waiting on the store than it has handler fibers (max_serving): each waiting call is
// parked (RpcAgent::park_request), so the write that ends their wait is served at once. Before,
// the waits held every fiber, the write queued behind them, and every one of them timed out: a
// rendezvous of 2,048 simulated nodes (1,024 fibers by default) never formed.
TEST(StoreParking, WatchersBeyondTheStoresHandlerFibersDoNotStarveTheWriteThatWakesThem) {
  constexpr int kWatchers = 6;
  LocalRuntime rt;
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  rpc::RpcOptions options;
  options.admission.max_serving = 2;  // fewer fibers than watchers
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents;
  std::vector<std::unique_ptr<StoreClient>> clients;
  std::unique_ptr<StoreService> service;
  for (int i = 0; i <= kWatchers + 1; ++i) {
    runtime::Env& env = rt.add_node("worker" + std::to_string(i));
    agents.push_back(std::make_unique<rpc::RpcAgent>(env, registry, i == 0 ? options : rpc::RpcOptions{}));
    if (i == 0) service = std::make_unique<StoreService>(*agents.back());
    agents.back()->start();
    clients.push_back(std::make_unique<StoreClient>(*agents.back(), 0));
    clients.back()->set_timeout(10s);
  }
  const uint64_t known = rt.run_on(1, [&] {
    clients[1]->set("k", text("before"));
    return clients[1]->get_versioned("k").version;
  });
  std::vector<uint64_t> seen(kWatchers + 2, 0);
  std::vector<runtime::TimePoint> woke(kWatchers + 2);
  for (int i = 1; i <= kWatchers; ++i) {
    rt.env(static_cast<WorkerId>(i)).spawner.spawn("watcher", [&, i] {
      seen[i] = clients[i]->watch("k", known).version;
      woke[i] = rt.now();
    });
  }
  const runtime::TimePoint written = rt.run_on(kWatchers + 1, [&] {
    rt.env(kWatchers + 1).clock.sleep(100ms);  // every watch is at the store by now
    clients[kWatchers + 1]->set("k", text("after"));
    return rt.now();
  });
  EXPECT_LT(written, runtime::TimePoint{} + 1s) << "the write waited behind the watches";
  rt.run_on(1, [&] { rt.env(1).clock.sleep(200ms); });
  for (int i = 1; i <= kWatchers; ++i) {
    EXPECT_GT(seen[i], known) << "watcher " << i;
    EXPECT_LT(woke[i], runtime::TimePoint{} + 1s) << "watcher " << i;
  }
}

}  // namespace
}  // namespace dagsim::store
