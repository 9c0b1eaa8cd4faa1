// The store conformance suite (issue 11: "one conformance suite runs against every backend"): the
// same cases against every StoreBackend (store_backend.h), so the built-in store, etcd and any
// later backend keep one contract, store.h's: PyTorch's c10d calls (set/get, get waiting and
// timing out naming its key, compare_set by value, add, wait/check, delete_key, num_keys,
// multi_get/multi_set), versions that rise on every write, compare_set_version whose stale token
// never writes and returns the winner, watches that wake on a change (and watch_at_most answering
// the unchanged key at its own timeout), concurrent compare-and-set racers forming one history,
// and a store that dies failing calls with connection_failed (or timed_out, for a call already
// waiting) naming the store, within its timeout. Timing bounds allow the backend's slack(): exact
// on virtual time, scheduling noise on the real runtime. Where a backend's protocol cannot keep a
// promise (StoreGaps: TCPStore's versions are per client) the case checks what it does promise. A
// backend this machine cannot run (etcd not installed) skips, naming why.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "conformance/store_backend.h"
#include "core/base/throws_error_test_util.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using store::Bytes;
using store::CasOutcome;
using store::Versioned;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

// Short enough for the real runtime; the cases that wait it out are few.
constexpr Duration kTimeout = 1s;
// A call that ends by the store's timeout reports it within this much more (the built-in client's
// reply grace; EtcdStore's request grace).
constexpr Duration kGrace = 1s;

class StoreConformance : public ::testing::TestWithParam<std::shared_ptr<StoreBackend>> {
 protected:
  void SetUp() override {
    if (const auto why = GetParam()->unavailable()) GTEST_SKIP() << GetParam()->name() << ": " << *why;
  }
  void run(const std::function<void(StoreWorld&)>& body) { GetParam()->run(kTimeout, body); }
  StoreGaps gaps() const { return GetParam()->gaps(); }
};

TEST_P(StoreConformance, SetThenGetAndGetVersioned) {
  run([](StoreWorld& w) {
    EXPECT_EQ(w.client(0).get_versioned("k").version, 0u) << "absent: version 0";
    EXPECT_TRUE(w.client(0).get_versioned("k").value.empty());
    w.client(0).set("k", text("v1"));
    EXPECT_EQ(w.client(1).get("k"), text("v1")) << "another client sees it";
    const Versioned v = w.client(2).get_versioned("k");
    EXPECT_EQ(v.value, text("v1"));
    EXPECT_GT(v.version, 0u);
    w.client(1).set("k", text("v2"));
    EXPECT_EQ(w.client(0).get("k"), text("v2"));
  });
}

TEST_P(StoreConformance, GetWaitsForALaterSetAndTimesOutNamingTheKey) {
  run([](StoreWorld& w) {
    TimePoint start = w.clock().now();
    w.spawn(1, "setter", [&w] {
      w.clock().sleep(200ms);
      w.client(1).set("late", text("v"));
    });
    EXPECT_EQ(w.client(0).get("late"), text("v"));
    EXPECT_GE(w.clock().now() - start, 200ms);
    EXPECT_LT(w.clock().now() - start, 200ms + w.slack()) << "woken by the write, not by a poll";
    start = w.clock().now();
    EXPECT_TRUE(throws_error([&] { w.client(0).get("never set"); }, ErrorCode::timed_out, {"never set", "timed out"}));
    EXPECT_GE(w.clock().now() - start, kTimeout);
    EXPECT_LT(w.clock().now() - start, kTimeout + kGrace + w.slack());
  });
}

TEST_P(StoreConformance, CompareSetByValueFollowsPyTorch) {
  run([](StoreWorld& w) {
    store::Store& s = w.client(0);
    // Absent, empty expected: written. Absent, other expected: nothing written, expected back.
    EXPECT_EQ(s.compare_set("a", {}, text("x")), text("x"));
    EXPECT_EQ(w.client(1).get("a"), text("x"));
    EXPECT_EQ(s.compare_set("b", text("e"), text("y")), text("e"));
    EXPECT_FALSE(s.check({"b"}));
    // Present: written only if it holds expected; the current value back either way.
    EXPECT_EQ(s.compare_set("a", text("x"), text("z")), text("z"));
    EXPECT_EQ(s.compare_set("a", text("x"), text("w")), text("z")) << "a mismatch returns the current value";
    EXPECT_EQ(w.client(2).get("a"), text("z"));
    // A present key holding the empty value matches an empty expected.
    s.set("empty", {});
    EXPECT_EQ(s.compare_set("empty", {}, text("filled")), text("filled"));
  });
}

TEST_P(StoreConformance, AddCountsFromAbsentAndFromAnExistingValue) {
  run([](StoreWorld& w) {
    EXPECT_EQ(w.client(0).add("n", 5), 5) << "absent counts as 0";
    EXPECT_EQ(w.client(1).add("n", -2), 3);
    EXPECT_EQ(w.client(2).get("n"), text("3")) << "decimal text, as PyTorch keeps it";
    w.client(0).set("m", text("40"));
    EXPECT_EQ(w.client(0).add("m", 2), 42);
    EXPECT_EQ(w.client(0).add("m", 0), 42);
  });
}

TEST_P(StoreConformance, AddOnAValueThatIsNoIntegerIsAnError) {
  const bool closes = gaps().add_error_closes_connection;
  run([closes](StoreWorld& w) {
    w.client(0).set("s", text("three"));
    if (closes) {
      EXPECT_TRUE(throws_error([&] { w.client(1).add("s", 1); }, ErrorCode::connection_failed, {w.store_name()}));
    } else {
      EXPECT_TRUE(throws_error([&] { w.client(1).add("s", 1); }, ErrorCode::invalid_argument, {"does not hold an integer"}));
    }
    EXPECT_EQ(w.client(0).get("s"), text("three")) << "left as it was";
  });
}

TEST_P(StoreConformance, WaitReturnsOnceEveryKeyIsSetAndCheckSaysWhetherTheyAre) {
  run([](StoreWorld& w) {
    w.client(0).set("here", text("1"));
    EXPECT_TRUE(w.client(0).check({"here"}));
    EXPECT_FALSE(w.client(0).check({"here", "later"}));
    const TimePoint start = w.clock().now();
    w.spawn(2, "setter", [&w] {
      w.clock().sleep(100ms);
      w.client(2).set("later", text("2"));
    });
    w.client(1).wait({"here", "later"});
    EXPECT_LT(w.clock().now() - start, 100ms + w.slack());
    EXPECT_TRUE(w.client(0).check({"here", "later"}));
    // Named in the error (the built-in store and etcd name exactly the missing ones; TCPStore's
    // WAIT cannot tell which of its keys it still waits for).
    EXPECT_TRUE(throws_error([&] { w.client(0).wait({"here", "absent"}); }, ErrorCode::timed_out, {"timed out", "absent"}));
  });
}

TEST_P(StoreConformance, DeleteKeyAndNumKeys) {
  run([](StoreWorld& w) {
    EXPECT_EQ(w.client(0).num_keys(), 0) << "a fresh store is empty";
    w.client(0).set("k1", text("v1"));
    w.client(1).set("k2", text("v2"));
    EXPECT_EQ(w.client(2).num_keys(), 2);
    EXPECT_TRUE(w.client(2).delete_key("k1"));
    EXPECT_FALSE(w.client(2).delete_key("k1")) << "only a key that existed";
    EXPECT_EQ(w.client(0).num_keys(), 1);
    EXPECT_FALSE(w.client(0).check({"k1"}));
    EXPECT_EQ(w.client(0).get_versioned("k1").version, 0u);
  });
}

TEST_P(StoreConformance, MultiSetThenMultiGetInTheOrderAsked) {
  run([](StoreWorld& w) {
    w.client(0).multi_set({"k1", "k2", "k3"}, {text("v1"), text("v2"), text("v3")});
    EXPECT_EQ(w.client(1).multi_get({"k3", "k1"}), (std::vector<Bytes>{text("v3"), text("v1")}));
    EXPECT_TRUE(throws_error([&] { w.client(0).multi_set({"a"}, {}); }, ErrorCode::invalid_argument, {"as many values as keys"}));
    // multi_get waits for a key that is not there yet.
    w.spawn(1, "setter", [&w] {
      w.clock().sleep(100ms);
      w.client(1).set("k4", text("v4"));
    });
    EXPECT_EQ(w.client(2).multi_get({"k4", "k2"}), (std::vector<Bytes>{text("v4"), text("v2")}));
  });
}

// Client 0 writes, client 1 reads the versions (with versions per client, as client 1 numbers the
// values it sees: every write here changes the value, except the one that checks that a rewrite
// of the same value is a new version where versions are shared).
TEST_P(StoreConformance, VersionsRiseOnEveryWrite) {
  const bool shared = !gaps().versions_per_client;
  run([shared](StoreWorld& w) {
    store::Store& s = w.client(0);
    uint64_t last = 0;
    auto rose = [&](const std::string& key, const char* by) {
      const uint64_t v = w.client(1).get_versioned(key).version;
      EXPECT_GT(v, last) << "after " << by;
      last = std::max(last, v);
    };
    s.set("a", text("1"));
    rose("a", "set");
    if (shared) {
      s.set("a", text("1"));
      rose("a", "set of the same value");
    }
    s.compare_set("a", text("1"), text("2"));
    rose("a", "compare_set that wrote");
    s.add("a", 1);
    rose("a", "add");
    s.multi_set({"a", "b"}, {text("4"), text("5")});
    rose("a", "multi_set");
    EXPECT_GE(w.client(1).get_versioned("b").version, last) << "multi_set's second key";
    last = std::max(last, w.client(1).get_versioned("b").version);
    const CasOutcome cas = s.compare_set_version("a", s.get_versioned("a").version, text("6"));
    ASSERT_TRUE(cas.written);
    EXPECT_EQ(cas.current.version, s.get_versioned("a").version) << "the outcome names the write's version";
    if (shared) {
      EXPECT_EQ(cas.current.version, w.client(1).get_versioned("a").version) << "one version for all clients";
    }
    rose("a", "compare_set_version");
    // A compare_set that does not write leaves the version alone.
    const uint64_t before = w.client(1).get_versioned("a").version;
    s.compare_set("a", text("not it"), text("7"));
    EXPECT_EQ(w.client(1).get_versioned("a").version, before);
  });
}

// Two clients hold a token of one state; the first to write with it wins, the other's write is
// stale: it never writes and answers the winner's state.
// PyTorch's RendezvousBackendTestMixin.test_set_state_returns_current_backend_state_if_token_is_invalid:
// a version no store call ever gave (ahead of the key's, or the largest there is) is stale too: it
// writes nothing and the reply is the key as it is.
TEST_P(StoreConformance, AVersionTheStoreNeverIssuedNeverWrites) {
  run([](StoreWorld& w) {
    const CasOutcome first = w.client(0).compare_set_version("state", 0, text("round 0"));
    ASSERT_TRUE(first.written);
    for (const uint64_t forged : {first.current.version + 1, first.current.version + 1000, ~uint64_t{0}}) {
      const CasOutcome forged_write = w.client(1).compare_set_version("state", forged, text("forged"));
      EXPECT_FALSE(forged_write.written) << "version " << forged;
      EXPECT_EQ(forged_write.current.value, text("round 0")) << "version " << forged;
    }
    EXPECT_EQ(w.client(2).get("state"), text("round 0")) << "the forged writes left nothing";
    EXPECT_TRUE(w.client(0).compare_set_version("state", w.client(0).get_versioned("state").version, text("round 1")).written)
        << "the key's real version still writes";
  });
}

TEST_P(StoreConformance, AStaleTokenNeverWritesAndReturnsTheWinner) {
  const bool shared = !gaps().versions_per_client;
  run([shared](StoreWorld& w) {
    const CasOutcome first = w.client(0).compare_set_version("state", 0, text("round 0"));
    ASSERT_TRUE(first.written);
    EXPECT_EQ(first.current.value, text("round 0"));
    const uint64_t token0 = first.current.version;
    EXPECT_GT(token0, 0u);
    const uint64_t token1 = w.client(1).get_versioned("state").version;
    if (shared) {
      EXPECT_EQ(token1, token0);
    }
    const CasOutcome theirs = w.client(1).compare_set_version("state", token1, text("round 1 by 1"));
    ASSERT_TRUE(theirs.written);
    EXPECT_GT(theirs.current.version, token1);
    const CasOutcome ours = w.client(0).compare_set_version("state", token0, text("round 1 by 0"));
    EXPECT_FALSE(ours.written);
    EXPECT_EQ(ours.current.value, text("round 1 by 1")) << "the winner's value";
    EXPECT_GT(ours.current.version, token0);
    if (shared) {
      EXPECT_EQ(ours.current.version, theirs.current.version) << "the winner's version";
    }
    EXPECT_EQ(w.client(2).get("state"), text("round 1 by 1")) << "the stale write left nothing";
    // Token 0 writes only an absent key; a token of a deleted key is stale too.
    EXPECT_FALSE(w.client(0).compare_set_version("state", 0, text("again")).written);
    ASSERT_TRUE(w.client(0).delete_key("state"));
    const CasOutcome gone = w.client(0).compare_set_version("state", ours.current.version, text("x"));
    EXPECT_FALSE(gone.written);
    EXPECT_EQ(gone.current.version, 0u);
    EXPECT_TRUE(w.client(0).compare_set_version("state", 0, text("reborn")).written);
  });
}

TEST_P(StoreConformance, AWatchWakesOnAChangeOfItsKeyAndNotBefore) {
  run([](StoreWorld& w) {
    w.client(0).set("w", text("a"));
    const uint64_t known = w.client(0).get_versioned("w").version;
    const TimePoint start = w.clock().now();
    w.spawn(1, "writer", [&w] {
      w.clock().sleep(150ms);
      w.client(1).set("other", text("not this one"));
      w.clock().sleep(150ms);
      w.client(1).set("w", text("b"));
    });
    const Versioned v = w.client(0).watch("w", known);
    EXPECT_EQ(v.value, text("b"));
    EXPECT_GT(v.version, known);
    EXPECT_GE(w.clock().now() - start, 300ms);
    EXPECT_LT(w.clock().now() - start, 300ms + w.slack());
    // A version already behind answers at once; a deletion is a change too (version 0).
    EXPECT_EQ(w.client(0).watch("w", known).value, text("b"));
    w.spawn(2, "deleter", [&w] {
      w.clock().sleep(50ms);
      w.client(2).delete_key("w");
    });
    EXPECT_EQ(w.client(0).watch("w", v.version).version, 0u);
  });
}

TEST_P(StoreConformance, AWatchWithoutAChangeTimesOutNamingItsKey) {
  run([](StoreWorld& w) {
    w.client(0).set("still", text("x"));
    const uint64_t known = w.client(0).get_versioned("still").version;
    const TimePoint start = w.clock().now();
    EXPECT_TRUE(throws_error([&] { w.client(0).watch("still", known); }, ErrorCode::timed_out, {"watch of key still", "timed out"}));
    EXPECT_GE(w.clock().now() - start, kTimeout);
    EXPECT_LT(w.clock().now() - start, kTimeout + kGrace + w.slack());
  });
}

TEST_P(StoreConformance, WatchAtMostAnswersTheUnchangedKeyAfterItsOwnTimeout) {
  run([](StoreWorld& w) {
    w.client(0).set("b", text("x"));
    const uint64_t known = w.client(0).get_versioned("b").version;
    TimePoint start = w.clock().now();
    const Versioned same = w.client(0).watch_at_most("b", known, 300ms);
    EXPECT_EQ(same.version, known);
    EXPECT_EQ(same.value, text("x"));
    EXPECT_GE(w.clock().now() - start, 300ms);
    EXPECT_LT(w.clock().now() - start, 300ms + w.slack()) << "its own timeout, not the store's";
    // An absent key stays absent: version 0 back.
    EXPECT_EQ(w.client(0).watch_at_most("nothing", 0, 50ms).version, 0u);
    // A change ends it at once.
    start = w.clock().now();
    w.spawn(1, "writer", [&w] {
      w.clock().sleep(100ms);
      w.client(1).set("b", text("y"));
    });
    EXPECT_EQ(w.client(0).watch_at_most("b", known, 5s).value, text("y"));
    EXPECT_LT(w.clock().now() - start, 100ms + w.slack());
    EXPECT_TRUE(throws_error([&] { w.client(0).watch_at_most("b", known, -1ms); }, ErrorCode::invalid_argument));
  });
}

// Racers append their own entries to one key, each append a compare_set_version from the last
// version they saw, retrying from the winner's state: every append lands exactly once, each
// racer's in its own order, at distinct versions, and adds racing on one counter lose nothing.
constexpr int kRacers = 4, kAppends = 8;
TEST_P(StoreConformance, ConcurrentCasRacersFormOneHistory) {
  const bool shared = !gaps().versions_per_client;
  run([shared](StoreWorld& w) {
    std::vector<std::vector<uint64_t>> written(kRacers);
    std::vector<std::function<void()>> racers;
    for (int r = 0; r < kRacers; ++r) {
      racers.push_back([&w, &written, r] {
        store::Store& s = w.client(r % kStoreClients);
        Versioned seen = s.get_versioned("history");
        for (int a = 0; a < kAppends; ++a) {
          std::string next(seen.value.begin(), seen.value.end());
          next += std::to_string(r) + "." + std::to_string(a) + ";";
          for (;;) {
            const CasOutcome o = s.compare_set_version("history", seen.version, text(next));
            EXPECT_GE(o.current.version, seen.version) << "versions never go back";
            seen = o.current;
            if (o.written) break;
            next = std::string(seen.value.begin(), seen.value.end()) + std::to_string(r) + "." + std::to_string(a) + ";";
          }
          written[static_cast<size_t>(r)].push_back(seen.version);
        }
      });
    }
    for (int r = 0; r < kRacers; ++r) racers.push_back([&w, r] {
      for (int a = 0; a < kAppends; ++a) w.client(r % kStoreClients).add("counter", 1);
    });
    run_concurrently(w, racers);
    const Versioned final_state = w.client(0).get_versioned("history");
    std::string history(final_state.value.begin(), final_state.value.end());
    std::map<int, int> next_of;  // racer -> the append it should show next
    for (size_t from = 0, end = 0; (end = history.find(';', from)) != std::string::npos; from = end + 1) {
      const std::string entry = history.substr(from, end - from);
      const int r = std::stoi(entry.substr(0, entry.find('.')));
      EXPECT_EQ(std::stoi(entry.substr(entry.find('.') + 1)), next_of[r]++) << "racer " << r << " in order, once: " << history;
    }
    std::set<uint64_t> versions;
    for (int r = 0; r < kRacers; ++r) {
      EXPECT_EQ(next_of[r], kAppends) << "every append of racer " << r << " landed: " << history;
      versions.insert(written[static_cast<size_t>(r)].begin(), written[static_cast<size_t>(r)].end());
    }
    if (shared) {
      EXPECT_EQ(versions.size(), static_cast<size_t>(kRacers * kAppends)) << "each write its own version";
      EXPECT_EQ(*versions.rbegin(), final_state.version) << "the last write is what is there";
    }
    EXPECT_EQ(w.client(1).get("counter"), text(std::to_string(kRacers * kAppends)));
  });
}

TEST_P(StoreConformance, ADeadStoreFailsCallsWithConnectionFailedNamingIt) {
  const Duration retried = gaps().refused_retried_until_timeout ? kTimeout : Duration::zero();
  run([retried](StoreWorld& w) {
    w.client(0).set("k", text("v"));
    std::optional<Error> waiter_error;
    const TimePoint start = w.clock().now();
    run_concurrently(w, {[&] {
                           try {
                             w.client(0).get("never set");
                           } catch (const Error& e) {
                             runtime::rethrow_if_unwinding(e);
                             waiter_error = e;
                           }
                         },
                         [&] {
                           w.clock().sleep(100ms);
                           w.kill_store();
                         }});
    ASSERT_TRUE(waiter_error.has_value()) << "a waiter in get when the store died returned a value";
    EXPECT_TRUE(waiter_error->code() == ErrorCode::connection_failed || waiter_error->code() == ErrorCode::timed_out)
        << waiter_error->what();
    EXPECT_NE(std::string(waiter_error->what()).find(w.store_name()), std::string::npos) << waiter_error->what();
    EXPECT_LT(w.clock().now() - start, kTimeout + kGrace + w.slack());
    // Calls after the death fail, naming the store: at once, or at their timeout where a refused
    // connect is retried.
    TimePoint after = w.clock().now();
    EXPECT_TRUE(throws_error([&] { w.client(1).set("k", text("w")); }, ErrorCode::connection_failed, {w.store_name()}));
    EXPECT_LT(w.clock().now() - after, retried + w.slack());
    after = w.clock().now();
    EXPECT_TRUE(throws_error([&] { w.client(2).get_versioned("k"); }, ErrorCode::connection_failed, {w.store_name()}));
    EXPECT_LT(w.clock().now() - after, retried + w.slack());
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformance, ::testing::ValuesIn(all_store_backends()),
                         [](const ::testing::TestParamInfo<std::shared_ptr<StoreBackend>>& info) { return info.param->name(); });

}  // namespace
}  // namespace dagsim::conformance
