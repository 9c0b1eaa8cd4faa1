// Termination detection's rule (its messages are tested with the other payloads, in
// autograd_messages_test.cc): the wave rule proves termination only from two identical, balanced,
// idle waves over one set of workers.
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
  for (const char* part : {"Error on Node 0: backward pass of context 0:77 can never finish", "(nodes 0, 2)",
                           "'unused' (autograd message id 2) on node 0; autograd message id 9 on node 2"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " in " << text;
  }
  Wave many = {{0, idle(0, 0)}};
  for (int i = 0; i < 30; ++i) many[0].waiting.push_back("send " + std::to_string(i));
  EXPECT_NE(describe_unfinishable(0, 1, many).find("and 10 more"), std::string::npos);
}

}  // namespace
}  // namespace dagsim::dist_autograd
