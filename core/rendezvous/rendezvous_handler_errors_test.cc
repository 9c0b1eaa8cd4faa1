// The handler's error paths, as PyTorch 1.13's DynamicRendezvousHandlerTest checks them, ported by
// name onto LocalRuntime with the built-in store: a store that is gone fails is_closed and
// set_closed with a named error, makes shutdown say false instead of throwing, and costs the
// keep-alive a failed beat, never its fiber; a handler that is dropped stops its keep-alive
// (so the others see it expire); and a store that answers too slowly (SlowStore) makes
// set_closed, the keep-alive and next_rendezvous time out within their own timeouts. PyTorch also records an event for each error; dagsim has no
// rendezvous events yet (docs/elastic_parity.md counts those rows as partly).
#include <gtest/gtest.h>

#include <memory>

#include "core/fibers/local_runtime.h"
#include "core/rendezvous/rendezvous_backend.h"
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
  // The same, also noting when the call ended (returned or threw).
  void call_at(int i, TimePoint when, std::function<void()> fn, std::optional<ErrorCode>& error, std::string& what,
               std::optional<TimePoint>& ended) {
    call_at(
        i, when,
        [this, fn = std::move(fn), &ended] {
          try {
            fn();
          } catch (...) {
            ended = rt_.now();
            throw;
          }
          ended = rt_.now();
        },
        error, what);
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

// A corrupt state (any client of the store can write one) is a RendezvousStateError in PyTorch, one
// of the rendezvous errors: the keep-alive counts and logs its beats failing, its fiber lives on,
// and shutdown says false instead of throwing; the op a caller makes names the key and what is
// wrong (issue 49, launch_corrupt_state_exit3).
TEST_F(HandlerErrors, ACorruptStateIsARendezvousErrorToTheKeepAliveAndShutdown) {
  start(1, job(1, 1));
  join_at(1, at(0ms));
  run_until(at(1s));
  ASSERT_TRUE(result(1).info.has_value()) << result(1).what;
  at_time(1, at(2s), [&] { clients_[0]->set(state_key("job"), store::Bytes{'g', 'a', 'r', 'b', 'a', 'g', 'e'}); });
  run_until(at(30s));
  EXPECT_GE(handler(1).keep_alive_failures(), 2u) << "it kept trying";
  EXPECT_TRUE(rt_.failures().empty()) << rt_.failures().front().what;
  std::optional<ErrorCode> waiting_error, shutdown_error;
  std::string waiting_what, shutdown_what;
  std::optional<bool> left;
  call_at(1, at(31s), [&] { (void)handler(1).num_nodes_waiting(); }, waiting_error, waiting_what);
  call_at(1, at(32s), [&] { left = handler(1).shutdown(); }, shutdown_error, shutdown_what);
  (void)rt_.run(at(40s));  // idle after the shutdown
  EXPECT_EQ(waiting_error, ErrorCode::protocol_error) << waiting_what;
  EXPECT_NE(waiting_what.find("the state under key torch.rendezvous.job (version"), std::string::npos) << waiting_what;
  EXPECT_NE(waiting_what.find("is corrupt"), std::string::npos) << waiting_what;
  EXPECT_EQ(shutdown_error, std::nullopt) << shutdown_what;
  EXPECT_EQ(left, false);
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

// A store that answers, but slowly: each call waits `delay` on the caller's clock, then goes to
// the real store, or throws `failure` when one is set. PyTorch's tests patch the state holder's
// sync to sleep or raise; this does the same one level down.
class SlowStore final : public store::Store {
 public:
  SlowStore(store::Store& inner, runtime::Clock& clock) : inner_(inner), clock_(clock) { set_timeout(inner.timeout()); }
  Duration delay{0};
  std::optional<Error> failure;

  void set(const std::string& k, store::Bytes v) override { slow(), inner_.set(k, std::move(v)); }
  store::Bytes get(const std::string& k) override { return slow(), inner_.get(k); }
  store::Bytes compare_set(const std::string& k, const store::Bytes& e, store::Bytes d) override {
    return slow(), inner_.compare_set(k, e, std::move(d));
  }
  int64_t add(const std::string& k, int64_t d) override { return slow(), inner_.add(k, d); }
  void wait(const std::vector<std::string>& ks) override { slow(), inner_.wait(ks); }
  bool check(const std::vector<std::string>& ks) override { return slow(), inner_.check(ks); }
  bool delete_key(const std::string& k) override { return slow(), inner_.delete_key(k); }
  int64_t num_keys() override { return slow(), inner_.num_keys(); }
  std::vector<store::Bytes> multi_get(const std::vector<std::string>& ks) override { return slow(), inner_.multi_get(ks); }
  void multi_set(const std::vector<std::string>& ks, std::vector<store::Bytes> vs) override {
    slow(), inner_.multi_set(ks, std::move(vs));
  }
  store::Versioned get_versioned(const std::string& k) override { return slow(), inner_.get_versioned(k); }
  store::CasOutcome compare_set_version(const std::string& k, uint64_t v, store::Bytes d) override {
    return slow(), inner_.compare_set_version(k, v, std::move(d));
  }
  store::Versioned watch(const std::string& k, uint64_t v) override { return slow(), inner_.watch(k, v); }
  store::Versioned watch_at_most(const std::string& k, uint64_t v, Duration t) override {
    return slow(), inner_.watch_at_most(k, v, t);
  }

 private:
  void slow() {
    if (delay > Duration::zero()) clock_.sleep(delay);
    if (failure) throw *failure;
  }
  store::Store& inner_;
  runtime::Clock& clock_;
};

// test_set_closed_respects_the_requested_timeout: a store slower than the close timeout makes
// set_closed fail with a timeout, promptly, and leaves the rendezvous open.
TEST_F(HandlerErrors, SetClosedRespectsTheRequestedTimeout) {
  RendezvousSettings settings = job(1, 2);
  settings.timeout.close = 1s;
  start(1, settings);
  SlowStore slow(*clients_[0], rt_.env(1).clock);
  slow.delay = 2s;
  RendezvousHandler closer(rt_.env(1), slow, settings, NodeDesc{"worker1", 0, 1});
  std::optional<ErrorCode> error;
  std::string what;
  std::optional<TimePoint> returned_at;
  call_at(1, at(0ms), [&] { closer.set_closed(); }, error, what, returned_at);
  (void)rt_.run(at(20s));  // idle once the call failed: nothing else runs
  ASSERT_TRUE(returned_at.has_value());
  EXPECT_LE(*returned_at, at(2s + 10ms)) << "one slow sync past the deadline, then the timeout";
  EXPECT_EQ(error, ErrorCode::rendezvous_timeout) << what;
  EXPECT_NE(what.find("close op"), std::string::npos) << what;
  bool closed = true;
  at_time(1, at(21s), [&] { closed = handler(1).is_closed(); });
  (void)rt_.run(at(22s));
  EXPECT_FALSE(closed) << "the close never landed";
}

// test_keep_alive_respects_the_requested_timeout: a beat slower than the heartbeat timeout times
// out and is counted as failed; the keep-alive goes on, and beats again once the store is fast.
TEST_F(HandlerErrors, TheKeepAliveRespectsTheRequestedTimeout) {
  RendezvousSettings settings = job(1, 1);
  settings.timeout.heartbeat = 1s;
  settings.keep_alive_interval = 2s;
  settings.keep_alive_max_attempt = 100;
  start(1, settings);
  SlowStore slow(*clients_[0], rt_.env(1).clock);
  RendezvousHandler beating(rt_.env(1), slow, settings, NodeDesc{"worker1", 0, 1});
  std::optional<RendezvousInfo> info;
  at_time(1, at(0ms), [&] { info = beating.next_rendezvous(); });
  run_until(at(1s));
  ASSERT_TRUE(info.has_value());
  slow.delay = 3s;  // past the heartbeat timeout
  run_until(at(20s));
  EXPECT_GE(beating.keep_alive_failures(), 2u) << "each slow beat timed out";
  const uint64_t beats = beating.keep_alives();
  slow.delay = Duration::zero();
  run_until(at(40s));
  EXPECT_GT(beating.keep_alives(), beats) << "it beats again once the store answers in time";
  at_time(1, at(41s), [&] { (void)beating.shutdown(); });
  (void)rt_.run(at(45s));  // idle after the shutdown
}

// test_shutdown_records_and_raises_exceptions: an error that is not the rendezvous's (here a bug
// of the store's own, not a failure to reach it) comes out of shutdown as it is; a rendezvous error
// is a false (ShutdownReturnsFalseIfTheRendezvousCannotBeLeft).
TEST_F(HandlerErrors, ShutdownRaisesAnErrorThatIsNotTheRendezvouss) {
  start(1, job(1, 1));
  SlowStore failing(*clients_[0], rt_.env(1).clock);
  RendezvousHandler h(rt_.env(1), failing, job(1, 1), NodeDesc{"worker1", 0, 1});
  std::optional<RendezvousInfo> info;
  at_time(1, at(0ms), [&] { info = h.next_rendezvous(); });
  run_until(at(1s));
  ASSERT_TRUE(info.has_value());
  failing.failure = errors::invalid_argument("the store's own bug");
  std::optional<ErrorCode> error;
  std::string what;
  call_at(1, at(2s), [&] { (void)h.shutdown(); }, error, what);
  (void)rt_.run(at(5s));  // idle once shutdown threw
  EXPECT_EQ(error, ErrorCode::invalid_argument) << what;
  EXPECT_NE(what.find("the store's own bug"), std::string::npos) << what;
}

// test_shutdown_can_be_called_multiple_times (differs: dagsim's shutdown leaves, it does not
// close; see "Where dagsim differs"): a second shutdown is harmless, and the rendezvous stays open
// for the others.
TEST_F(HandlerErrors, ShutdownTwiceLeavesOnceAndNeverCloses) {
  start(2, job(1, 2));
  join_at(1, at(0ms));
  join_at(2, at(0ms));
  std::vector<bool> answers;
  bool closed = true;
  at_time(1, at(40s), [&] {
    answers.push_back(handler(1).shutdown());
    answers.push_back(handler(1).shutdown());
    (void)handler(2).num_nodes_waiting();  // a fresh read (is_closed may answer from its cache)
    closed = handler(2).last_state().closed;
  });
  run_until(at(45s));
  ASSERT_TRUE(result(1).info.has_value()) << result(1).what;
  EXPECT_EQ(answers, (std::vector<bool>{true, true}));
  EXPECT_FALSE(closed);
  EXPECT_FALSE(handler(2).last_state().participants.contains(handler(1).node())) << "it left";
}

// test_next_rendezvous_respects_the_requested_timeout: with a slow store and a round that cannot
// complete (min 2, one node), next_rendezvous fails with a timeout within its join timeout, the
// rollback and one slow call; it never hangs on the slowness.
TEST_F(HandlerErrors, NextRendezvousRespectsTheRequestedTimeoutOnASlowStore) {
  RendezvousSettings settings = job(2, 2);
  settings.timeout.join = 2s;
  start(1, settings);
  SlowStore slow(*clients_[0], rt_.env(1).clock);
  slow.delay = 500ms;
  RendezvousHandler joiner(rt_.env(1), slow, settings, NodeDesc{"worker1", 0, 1});
  std::optional<ErrorCode> error;
  std::string what;
  std::optional<TimePoint> returned_at;
  call_at(1, at(0ms), [&] { (void)joiner.next_rendezvous(); }, error, what, returned_at);
  (void)rt_.run(at(30s));  // idle once the join failed
  EXPECT_EQ(error, ErrorCode::rendezvous_timeout) << what;
  ASSERT_TRUE(returned_at.has_value());
  EXPECT_GE(*returned_at, at(2s));
  EXPECT_LE(*returned_at, at(2s) + kRollbackPeriod + 1s) << "the join timeout, the rollback and one slow call at most";
}

}  // namespace
}  // namespace dagsim::rendezvous
