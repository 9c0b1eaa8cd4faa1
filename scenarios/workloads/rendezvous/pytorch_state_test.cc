// PyTorch's stored rendezvous state (pytorch_state.h): fixtures are pickle.dumps of real 1.13
// _RendezvousState objects (Debian's python3-torch), base64 as the c10d backend stores them.
#include "scenarios/workloads/rendezvous/pytorch_state.h"

#include <gtest/gtest.h>

#include <string>

#include "core/base/error.h"
#include "net/etcd/etcd_codec.h"

namespace dagsim::scenarios {
namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;

// round 3, complete, participants {host-b_70000_1: 1, host-a.example_1234_0: 0}, wait_list {w_5_0},
// heartbeats a 2026-11-26 16:40:01.250000, b 16:40:02.999999, w 1999-12-31 23:59:59.000001.
constexpr std::string_view kComplete =
    "gASVlAEAAAAAAACMN3RvcmNoLmRpc3RyaWJ1dGVkLmVsYXN0aWMucmVuZGV6dm91cy5keW5hbWljX3JlbmRlenZvdXOUjBBfUmVuZGV6dm91c1N0YXRllJOUKYGUfZQojAVyb3VuZJRLA4wIY29tcGxldGWUiIwIZGVhZGxpbmWUTowGY2xvc2VklImMDHBhcnRpY2lwYW50c5R9lChoAIwJX05vZGVEZXNjlJOUKYGUfZQojARmcWRulIwGaG9zdC1ilIwDcGlklEpwEQEAjAhsb2NhbF9pZJRLAXViSwFoDCmBlH2UKGgPjA5ob3N0LWEuZXhhbXBsZZRoEU3SBGgSSwB1YksAdYwJd2FpdF9saXN0lI+UKGgMKYGUfZQoaA+MAXeUaBFLBWgSSwB1YpCMD2xhc3RfaGVhcnRiZWF0c5R9lChoE4wIZGF0ZXRpbWWUjAhkYXRldGltZZSTlEMKB+oLGhAoAQPQkJSFlFKUaA1oH0MKB+oLGhAoAg9CP5SFlFKUaBhoH0MKB88MHxc7OwAAAZSFlFKUdXViLg==";
// round 0, incomplete, deadline 2026-01-02 03:04:05.000006, participants {host-a.example_1234_0: 0}.
constexpr std::string_view kWaiting =
    "gASVPgEAAAAAAACMN3RvcmNoLmRpc3RyaWJ1dGVkLmVsYXN0aWMucmVuZGV6dm91cy5keW5hbWljX3JlbmRlenZvdXOUjBBfUmVuZGV6dm91c1N0YXRllJOUKYGUfZQojAVyb3VuZJRLAIwIY29tcGxldGWUiYwIZGVhZGxpbmWUjAhkYXRldGltZZSMCGRhdGV0aW1llJOUQwoH6gECAwQFAAAGlIWUUpSMBmNsb3NlZJSJjAxwYXJ0aWNpcGFudHOUfZRoAIwJX05vZGVEZXNjlJOUKYGUfZQojARmcWRulIwOaG9zdC1hLmV4YW1wbGWUjANwaWSUTdIEjAhsb2NhbF9pZJRLAHViSwBzjAl3YWl0X2xpc3SUj5SMD2xhc3RfaGVhcnRiZWF0c5R9lGgTaApDCgfqAQIDBAAAAACUhZRSlHN1Yi4=";
constexpr std::string_view kEmpty =
    "gASVtwAAAAAAAACMN3RvcmNoLmRpc3RyaWJ1dGVkLmVsYXN0aWMucmVuZGV6dm91cy5keW5hbWljX3JlbmRlenZvdXOUjBBfUmVuZGV6dm91c1N0YXRllJOUKYGUfZQojAVyb3VuZJRLAIwIY29tcGxldGWUiYwIZGVhZGxpbmWUTowGY2xvc2VklImMDHBhcnRpY2lwYW50c5R9lIwJd2FpdF9saXN0lI+UjA9sYXN0X2hlYXJ0YmVhdHOUfZR1Yi4=";
// pickle.dumps of an object whose __reduce__ is (os.system, ("true",)).
constexpr std::string_view kHostile = "gASVHwAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAR0cnVllIWUUpQu";

runtime::Bytes bytes(std::string_view text) { return {text.begin(), text.end()}; }
runtime::TimePoint at(int64_t ns) { return runtime::TimePoint{runtime::Duration{ns}}; }

TEST(PyTorchState, UnixNanosecondsOfCivilTimes) {
  EXPECT_EQ(unix_ns(1970, 1, 1, 0, 0, 0, 0), 0);
  EXPECT_EQ(unix_ns(2000, 3, 1, 0, 0, 0, 0), int64_t{951'868'800} * 1'000'000'000);
  EXPECT_EQ(unix_ns(2024, 2, 29, 0, 0, 0, 0), int64_t{1'709'164'800} * 1'000'000'000);
  EXPECT_EQ(unix_ns(1969, 12, 31, 23, 59, 59, 999'999), -1000);
}

TEST(PyTorchState, ReadsACompleteRoundAsPyTorchWroteIt) {
  const int64_t origin = unix_ns(2026, 11, 26, 16, 40, 0, 0);
  std::string format;
  const std::optional<RendezvousState> s = decode_stored_state(bytes(kComplete), origin, &format);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(format, "pytorch");
  const NodeDesc a{"host-a.example", 1234, 0}, b{"host-b", 70000, 1}, w{"w", 5, 0};
  EXPECT_EQ(s->round, 3u);
  EXPECT_TRUE(s->complete);
  EXPECT_FALSE(s->closed);
  EXPECT_FALSE(s->deadline.has_value());
  EXPECT_EQ(s->participants, (std::map<NodeDesc, uint32_t>{{a, 0}, {b, 1}}));
  EXPECT_EQ(s->wait_list, std::set<NodeDesc>{w});
  EXPECT_EQ(s->world_size, 2u);
  EXPECT_EQ(s->last_heartbeats.at(a), at(1'250'000'000));
  EXPECT_EQ(s->last_heartbeats.at(b), at(2'999'999'000));
  EXPECT_EQ(s->last_heartbeats.at(w), at(unix_ns(1999, 12, 31, 23, 59, 59, 1) - origin));
  EXPECT_EQ(rendezvous::structural_violation(*s), std::nullopt);
}

TEST(PyTorchState, ReadsADeadlineAndSingleItems) {
  const std::optional<RendezvousState> s = decode_stored_state(bytes(kWaiting), 0);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->complete);
  EXPECT_EQ(s->world_size, 0u);
  EXPECT_EQ(s->deadline, at(unix_ns(2026, 1, 2, 3, 4, 5, 6)));
  EXPECT_EQ(s->participants.size(), 1u);
  EXPECT_EQ(s->last_heartbeats.begin()->second, at(unix_ns(2026, 1, 2, 3, 4, 0, 0)));
  const std::optional<RendezvousState> empty = decode_stored_state(bytes(kEmpty), 0);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(*empty, RendezvousState{});
}

TEST(PyTorchState, TheSentinelIsNoState) {
  std::string format;
  EXPECT_EQ(decode_stored_state(bytes(kPyTorchNullSentinel), 0, &format), std::nullopt);
  EXPECT_EQ(format, "pytorch");
}

TEST(PyTorchState, DagsimsOwnEncodingIsReadOnTheSameClock) {
  RendezvousState s;
  const NodeDesc n{"node", 7, 0};
  s.participants[n] = 0;
  s.last_heartbeats[n] = at(5'000'000'000);
  s.deadline = at(6'000'000'000);
  std::string format;
  const std::optional<RendezvousState> read = decode_stored_state(rendezvous::encode(s), 1'000'000'000, &format);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(format, "dagsim");
  EXPECT_EQ(read->last_heartbeats.at(n), at(4'000'000'000));
  EXPECT_EQ(read->deadline, at(5'000'000'000));
}

TEST(PyTorchState, RefusesAnyOtherGlobalByName) {
  try {
    (void)decode_stored_state(bytes(kHostile), 0);
    FAIL() << "a pickle calling os.system was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::protocol_error);
    EXPECT_NE(e.detail().find("refuses the global posix.system"), std::string::npos) << e.detail();
  }
}

TEST(PyTorchState, EveryTruncationAndCorruptionIsAnErrorNeverACrash) {
  const runtime::Bytes pickle = net::etcd::base64_decode_bytes(kComplete);
  for (size_t n = 0; n < pickle.size(); ++n) {
    EXPECT_THROW((void)decode_pytorch_pickle(std::span(pickle).first(n), 0), Error) << "truncated to " << n;
  }
  // Every single-byte change either still reads as some state or is refused; none crashes or hangs.
  size_t refused = 0;
  for (size_t i = 0; i < pickle.size(); ++i) {
    for (const uint8_t x : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{'('}, uint8_t{'h'}}) {
      runtime::Bytes bad = pickle;
      bad[i] = x;
      try {
        (void)decode_pytorch_pickle(bad, 0);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::protocol_error);
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, pickle.size());
}

}  // namespace
}  // namespace dagsim::scenarios
