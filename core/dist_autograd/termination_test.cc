// Termination detection's pieces: its messages round-trip and reject corruption by name, and the
// wave rule proves termination only from two identical, balanced, idle waves over one set of
// workers.
#include "core/dist_autograd/termination.h"

#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"

namespace dagsim::dist_autograd {
namespace {

ProbeReport idle(uint64_t sent, uint64_t received, std::vector<WorkerId> known = {}) {
  ProbeReport r;
  r.has_context = true;
  r.sent = sent;
  r.received = received;
  r.known_workers = std::move(known);
  return r;
}

TEST(Termination, ProbeMessagesRoundTrip) {
  auto [context, wave] = read_probe_request(make_probe_request(-42, 7));
  EXPECT_EQ(context, -42);
  EXPECT_EQ(wave, 7u);

  ProbeReport report = idle(3, 5, {0, 2, 65535});
  report.context = 99;
  report.wave = 4;
  report.busy = true;
  report.waiting = {"'unused' (autograd message id 2) on node 0", ""};
  const rpc::Message m = make_probe_report(11, report);
  EXPECT_EQ(m.request_id, 11u);
  ProbeReport back = read_probe_report(m);
  EXPECT_EQ(back.context, 99);
  EXPECT_EQ(back.wave, 4u);
  EXPECT_TRUE(back.has_context);
  EXPECT_TRUE(back.busy);
  EXPECT_EQ(back.sent, 3u);
  EXPECT_EQ(back.received, 5u);
  EXPECT_EQ(back.known_workers, report.known_workers);
  EXPECT_EQ(back.waiting, report.waiting);

  auto [abort_context, reason] = read_abort_request(make_abort_request(5, "because"));
  EXPECT_EQ(abort_context, 5);
  EXPECT_EQ(reason, "because");
}

TEST(Termination, CorruptReportsAreProtocolErrorsNamingTheField) {
  rpc::Message m = make_probe_report(1, idle(1, 1, {1}));
  rpc::Message truncated = m;
  truncated.payload.resize(truncated.payload.size() - 1);
  EXPECT_TRUE(throws_error([&] { read_probe_report(truncated); }, ErrorCode::protocol_error, {"probe_report.waiting_count"}));

  rpc::Message bad_flag = m;
  bad_flag.payload[16] = 7;  // has_context, after context id and wave
  EXPECT_TRUE(throws_error([&] { read_probe_report(bad_flag); }, ErrorCode::protocol_error, {"probe_report.has_context"}));

  rpc::Message huge = m;
  for (size_t i = 0; i < 4; ++i) huge.payload[34 + i] = 0xff;  // the worker count
  EXPECT_TRUE(throws_error([&] { read_probe_report(huge); }, ErrorCode::protocol_error, {"probe_report.worker_count", "limit"}));

  rpc::Message trailing = make_probe_request(1, 1);
  trailing.payload.push_back(0);
  EXPECT_TRUE(throws_error([&] { read_probe_request(trailing); }, ErrorCode::protocol_error, {"trailing"}));
}

TEST(Termination, OnlyTwoIdenticalBalancedIdleWavesProveIt) {
  const Wave stuck = {{0, idle(2, 1)}, {1, idle(1, 2)}};
  EXPECT_TRUE(quiescent(stuck));
  EXPECT_TRUE(proves_termination(stuck, stuck));

  // A gradient in flight: sent 3, received 2.
  const Wave in_flight = {{0, idle(2, 1)}, {1, idle(1, 1)}};
  EXPECT_FALSE(quiescent(in_flight));
  EXPECT_FALSE(proves_termination(in_flight, in_flight));

  // Balanced and idle twice, but something happened in between: a request and its reply.
  const Wave later = {{0, idle(3, 2)}, {1, idle(2, 3)}};
  EXPECT_TRUE(quiescent(later));
  EXPECT_FALSE(proves_termination(stuck, later));

  // A worker with work ready.
  Wave busy = stuck;
  busy[1].busy = true;
  EXPECT_FALSE(proves_termination(stuck, busy));
  EXPECT_FALSE(proves_termination(busy, stuck));

  // A worker that no longer knows the context (released meanwhile).
  Wave released = stuck;
  released[1].has_context = false;
  EXPECT_FALSE(proves_termination(stuck, released));

  // A worker learnt in the second wave only.
  Wave grown = stuck;
  grown.emplace(2, idle(0, 0));
  EXPECT_FALSE(proves_termination(stuck, grown));
}

TEST(Termination, TheErrorNamesEveryWorkerAndWhatWaits) {
  Wave wave = {{0, idle(1, 1)}, {2, idle(1, 1)}};
  wave[0].waiting = {"'unused' (autograd message id 2) on node 0"};
  wave[2].waiting = {"autograd message id 9 on node 2"};
  const std::string text = describe_unfinishable(0, 77, wave);
  for (const char* part : {"Error on Node 0: backward pass of context 77 can never finish", "(nodes 0, 2)",
                           "'unused' (autograd message id 2) on node 0; autograd message id 9 on node 2"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " in " << text;
  }
  Wave many = {{0, idle(0, 0)}};
  for (int i = 0; i < 30; ++i) many[0].waiting.push_back("send " + std::to_string(i));
  EXPECT_NE(describe_unfinishable(0, 1, many).find("and 10 more"), std::string::npos);
}

}  // namespace
}  // namespace dagsim::dist_autograd
