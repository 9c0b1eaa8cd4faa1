// LinkQueue's rule: a burst serialises back to back, latency is added per message, nothing
// overtakes, and an injected failure leaves the queue as it was.
#include "core/runtime/link_queue.h"

#include <gtest/gtest.h>

namespace dagsim::runtime {
namespace {

using namespace std::chrono_literals;

TEST(LinkQueue, ABurstOverANarrowLinkLeavesBackToBack) {
  NetworkModel m;
  m.latency = LatencyModel::constant(2ms);
  m.bandwidth_bytes_per_s = 1e6;  // 10 KB take 10 ms
  LinkQueue q;
  Prng random(1);
  const TimePoint t0{1s};
  for (int i = 1; i <= 5; ++i) {
    const std::optional<TimePoint> arrival = q.admit(t0, 10'000, m, 0, 1, random);
    ASSERT_TRUE(arrival);
    EXPECT_EQ(*arrival, t0 + i * 10ms + 2ms) << "message " << i << " waits for the " << i - 1 << " before it";
  }
  EXPECT_EQ(q.busy_until(), t0 + 50ms);
  // Sent after the link went quiet: it leaves at once.
  EXPECT_EQ(*q.admit(t0 + 100ms, 10'000, m, 0, 1, random), t0 + 112ms);
}

TEST(LinkQueue, PerLinkBandwidthAndLatencyApply) {
  NetworkModel m;
  m.latency = LatencyModel::constant(1ms);
  m.links.push_back(LinkModel{0, 1, LatencyModel::constant(5ms), 2e6});
  LinkQueue narrow, other;
  Prng random(1);
  EXPECT_EQ(*narrow.admit(TimePoint{}, 2'000, m, 0, 1, random), TimePoint{} + 1ms + 5ms);
  EXPECT_EQ(*other.admit(TimePoint{}, 2'000, m, 1, 0, random), TimePoint{} + 1ms) << "unlimited the other way";
}

TEST(LinkQueue, NothingOvertakesTheMessageBeforeIt) {
  NetworkModel m;
  m.latency = LatencyModel::uniform(0ms, 10ms);
  LinkQueue q;
  Prng random(7);
  TimePoint last{};
  for (int i = 0; i < 200; ++i) {
    const TimePoint arrival = *q.admit(TimePoint{i * 100us}, 100, m, 0, 1, random);
    EXPECT_GE(arrival, last);
    last = arrival;
  }
}

TEST(LinkQueue, AnInjectedFailureLosesTheMessageAndLeavesTheQueue) {
  NetworkModel m;
  m.bandwidth_bytes_per_s = 1e6;
  m.connection_failure_rate = 1.0;
  LinkQueue q;
  Prng random(1);
  EXPECT_FALSE(q.admit(TimePoint{}, 10'000, m, 0, 1, random));
  EXPECT_EQ(q.busy_until(), TimePoint{});
}

TEST(LinkQueue, TheSameSeedGivesTheSameArrivals) {
  NetworkModel m;
  m.latency = LatencyModel::uniform(1ms, 9ms);
  m.connection_failure_rate = 0.2;
  auto run = [&] {
    LinkQueue q;
    Prng random(42);
    std::vector<int64_t> out;
    for (int i = 0; i < 50; ++i) {
      const std::optional<TimePoint> a = q.admit(TimePoint{i * 1ms}, 500, m, 0, 1, random);
      out.push_back(a ? a->since_epoch.count() : -1);
    }
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace dagsim::runtime
