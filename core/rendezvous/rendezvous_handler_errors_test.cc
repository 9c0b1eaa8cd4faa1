// The handler's error paths, as PyTorch 1.13's DynamicRendezvousHandlerTest checks them, ported by
// name onto LocalRuntime with the built-in store: a store that is gone fails is_closed and
// set_closed with a named error, makes shutdown say false instead of throwing, and costs the
// keep-alive a failed beat, never its fiber; and a handler that is dropped stops its keep-alive
// (so the others see it expire). PyTorch also records an event for each error; dagsim has no
// rendezvous events yet (docs/elastic_parity.md counts those rows as partly).
#include <gtest/gtest.h>

#include <memory>

#include "core/fibers/local_runtime.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/rendezvous/rendezvous_test_cluster.h"

namespace dagsim::rendezvous {
namespace {

using namespace std::chrono_literals;
using namespace testing;

class HandlerErrors : public ::testing::Test, public Cluster {
 protected:
  // Two nodes form round 0 at once (min = max = 2); the store dies at `store_dies`.
  void form_then_kill_store(TimePoint store_dies) {
    start(2, job(2, 2));
    join_at(1, at(0ms));
    join_at(2, at(0ms));
    rt_.env(0).spawner.spawn("death", [this, store_dies] {
      rt_.env(0).clock.sleep_until(store_dies);
      rt_.kill(0);
    });
  }
  // Runs `fn` on node i at `when`, keeping the code of the error it throws (nullopt: none).
  void call_at(int i, TimePoint when, std::function<void()> fn, std::optional<ErrorCode>& error, std::string& what) {
    at_time(i, when, [fn = std::move(fn), &error, &what] {
      try {
        fn();
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        error = e.code();
        what = e.what();
      }
    });
  }
};

// test_is_closed_records_and_raises_exceptions, test_set_closed_records_and_raises_exceptions:
// the store's failure comes out of the call as the rendezvous's, naming the op and the store.
TEST_F(HandlerErrors, IsClosedAndSetClosedRaiseTheStoresErrorNamingIt) {
  form_then_kill_store(at(1s));
  std::optional<ErrorCode> is_closed_error, set_closed_error;
  std::string is_closed_what, set_closed_what;
  call_at(1, at(2s), [&] { handler(1).is_closed(); }, is_closed_error, is_closed_what);
  call_at(2, at(2s), [&] { handler(2).set_closed(); }, set_closed_error, set_closed_what);
  run_until(at(60s));
  ASSERT_TRUE(result(1).info.has_value()) << result(1).what;
  EXPECT_EQ(is_closed_error, ErrorCode::rendezvous_connection_failed) << is_closed_what;
  EXPECT_NE(is_closed_what.find("node worker1_0_0"), std::string::npos) << is_closed_what;
  EXPECT_NE(is_closed_what.find("node 0"), std::string::npos) << "names the store: " << is_closed_what;
  EXPECT_EQ(set_closed_error, ErrorCode::rendezvous_connection_failed) << set_closed_what;
  EXPECT_NE(set_closed_what.find("close op"), std::string::npos) << set_closed_what;
}

// test_shutdown_returns_false_if_rendezvous_cannot_be_closed (here: cannot be left; dagsim's
// shutdown leaves without closing): a rendezvous error is a false, not an exception, and the
// keep-alive stops all the same.
TEST_F(HandlerErrors, ShutdownReturnsFalseIfTheRendezvousCannotBeLeft) {
  form_then_kill_store(at(1s));
  std::optional<ErrorCode> error;
  std::string what;
  std::optional<bool> left;
  call_at(1, at(2s), [&] { left = handler(1).shutdown(); }, error, what);
  run_until(at(60s));
  EXPECT_EQ(error, std::nullopt) << what;
  EXPECT_EQ(left, false);
  const uint64_t beats = handler(1).keep_alives() + handler(1).keep_alive_failures();
  run_until(at(120s));
  EXPECT_EQ(handler(1).keep_alives() + handler(1).keep_alive_failures(), beats) << "no keep-alive after shutdown";
}

// test_keep_alive_swallows_rendezvous_errors: a beat that fails is counted and logged, the fiber
// goes on beating, and nothing ends with an exception.
TEST_F(HandlerErrors, TheKeepAliveSwallowsRendezvousErrors) {
  form_then_kill_store(at(7s));
  run_until(at(6s));
  const uint64_t before = handler(1).keep_alives();
  EXPECT_EQ(before, 1u) << "one beat at 5 s, before the store died";
  run_until(at(90s));
  EXPECT_EQ(handler(1).keep_alives(), before) << "no beat can succeed without a store";
  EXPECT_GE(handler(1).keep_alive_failures(), 2u) << "it kept trying";
  EXPECT_TRUE(rt_.failures().empty()) << rt_.failures().front().what;
}

// test_keep_alive_thread_is_started_with_next_rendezvous_and_stopped_with_finalizer: dropping the
// handler stops its keep-alive, so the other node sees its heartbeat stop and it expire.
TEST_F(HandlerErrors, ADroppedHandlerStopsItsKeepAlive) {
  start(2, job(2, 2));
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  run_until(at(7s));
  ASSERT_TRUE(result(2).info.has_value()) << result(2).what;
  const NodeDesc dropped = handler(2).node();
  EXPECT_EQ(handler(2).keep_alives(), 1u) << "one beat at 5 s";
  at_time(2, at(7s), [this] { handlers_[1].reset(); });
  run_until(at(14s));
  const auto heartbeat = handler(1).last_state().last_heartbeats.find(dropped);
  ASSERT_NE(heartbeat, handler(1).last_state().last_heartbeats.end()) << "not expired yet (expiry 15 s)";
  EXPECT_LE(heartbeat->second, at(5s) + 1s) << "no beat after the handler went (the next was due at 10 s)";
  run_until(at(40s));
  EXPECT_FALSE(handler(1).last_state().last_heartbeats.contains(dropped)) << "it expired and the survivor removed it";
  EXPECT_TRUE(rt_.failures().empty()) << rt_.failures().front().what;
}

}  // namespace
}  // namespace dagsim::rendezvous
