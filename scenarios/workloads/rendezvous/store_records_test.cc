// A rendezvous judged from its store's record (store_records.h): hand-written records in the
// store's format, each a history the checker must pass or catch.
#include "scenarios/workloads/rendezvous/store_records.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/base/error.h"

namespace dagsim::scenarios {
namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;

constexpr int64_t kOrigin = int64_t{1'700'000'000} * 1'000'000'000;  // the store's start
constexpr int64_t kMs = 1'000'000;
const NodeDesc kA{"host", 11, 0}, kB{"host", 12, 0};

std::string hex(const runtime::Bytes& b) { return to_hex(b); }
runtime::TimePoint wall(int64_t ms) { return runtime::TimePoint{runtime::Duration{kOrigin + ms * kMs}}; }

class StoreRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("store_records_" + std::to_string(getpid()) + "_" +
                                                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    line({{"op", "start"}, {"t", kOrigin}, {"pid", 1}});
    line({{"op", "connect"}, {"t", kOrigin}, {"conn", 1}, {"peer", "127.0.0.1:5001"}, {"pid", kA.pid}});
    line({{"op", "connect"}, {"t", kOrigin}, {"conn", 2}, {"peer", "127.0.0.1:5002"}, {"pid", kB.pid}});
    job_ = {{"run_id", "job"}, {"min_nodes", 2}, {"max_nodes", 2}, {"keep_alive_interval_s", 1},
            {"keep_alive_max_attempt", 2}, {"last_call_timeout_s", 1}, {"monitor_interval_s", 1}, {"faults", nlohmann::json::array()}};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void line(const nlohmann::json& j) { lines_ += j.dump() + "\n"; }
  // A compare_set on the state key at `ms` by connection `conn`.
  void cas(int64_t ms, uint64_t conn, const runtime::Bytes& expected, const RendezvousState& desired, bool written) {
    const runtime::Bytes d = rendezvous::encode(desired);
    line({{"op", "compare_set"}, {"t", kOrigin + ms * kMs}, {"conn", conn}, {"key", "torch.rendezvous.job"},
          {"expected", hex(expected)}, {"desired", hex(d)}, {"written", written}, {"value", hex(written ? d : expected)}});
  }
  StoreRecordsJudgement judge() {
    std::ofstream(dir_ / "store.jsonl") << lines_;
    std::ofstream(dir_ / "job.json") << job_.dump();
    return judge_store_records(dir_.string());
  }
  static std::string all(const std::vector<Violation>& vs) {
    std::string out;
    for (const Violation& v : vs) out += to_string(v) + "\n";
    return out;
  }

  // Two nodes join and complete round 0 (the states dagsim's handler would write).
  std::vector<RendezvousState> formation() {
    RendezvousState s1;
    s1.participants[kA] = 0;
    s1.last_heartbeats[kA] = wall(10);
    RendezvousState s2 = s1;
    s2.participants[kB] = 1;
    s2.last_heartbeats[kB] = wall(20);
    s2.complete = true;
    s2.world_size = 2;
    cas(10, 1, {}, s1, true);
    cas(20, 2, rendezvous::encode(s1), s2, true);
    return {s1, s2};
  }

  std::filesystem::path dir_;
  std::string lines_;
  nlohmann::json job_;
};

TEST_F(StoreRecords, AFormationPassesAndTiesEachWriteToItsProcess) {
  formation();
  const StoreRecordsJudgement j = judge();
  EXPECT_TRUE(j.violations.empty()) << all(j.violations);
  EXPECT_EQ(j.format, "dagsim");
  ASSERT_EQ(j.history.agents.size(), 2u);
  EXPECT_EQ(j.history.agents[0].desc, kA);
  EXPECT_EQ(j.history.agents[0].writes.size(), 1u);
  EXPECT_EQ(j.history.agents[1].desc, kB);
  ASSERT_EQ(j.report["rounds"].size(), 1u);
  EXPECT_EQ(j.report["first_formation_ms"].get<double>(), 20.0);
}

TEST_F(StoreRecords, AStaleTokenThatWroteIsS1) {
  const std::vector<RendezvousState> s = formation();
  // B writes on the first version (stale: the key is at the second) and the record says it won.
  RendezvousState stale = s[0];
  stale.wait_list.insert(kB);
  stale.last_heartbeats[kB] = wall(30);
  cas(30, 2, rendezvous::encode(s[0]), stale, true);
  const StoreRecordsJudgement j = judge();
  EXPECT_NE(all(j.violations).find("S1"), std::string::npos) << all(j.violations);
}

TEST_F(StoreRecords, ALiveMemberRemovedByAnotherIsReportedAndIsL6WithoutARerendezvous) {
  const std::vector<RendezvousState> s = formation();
  // At 2.5 s A finds B's heartbeat (20 ms) past the 2 s expiry and drops it, without a request to
  // re-form (PyTorch's behaviour, #111646). B's process was never killed.
  RendezvousState dropped = s[1];
  dropped.participants.erase(kB);
  dropped.last_heartbeats.erase(kB);
  dropped.last_heartbeats[kA] = wall(2500);
  cas(2500, 1, rendezvous::encode(s[1]), dropped, true);
  line({{"op", "get"}, {"t", kOrigin + 9000 * kMs}, {"conn", 1}, {"key", "torch.rendezvous.job"}, {"value", nullptr}});
  StoreRecordsJudgement j = judge();
  EXPECT_NE(all(j.violations).find("L6"), std::string::npos) << all(j.violations);
  ASSERT_EQ(j.report["live_expired"].size(), 1u) << j.report.dump(1);
  EXPECT_EQ(j.report["live_expired"][0]["pid"], kB.pid);

  // Held to PyTorch's own rule (no re-rendezvous owed), the same history passes; and once B's
  // process was killed first, its removal is no live member's.
  job_["rerendezvous_on_expiry"] = false;
  job_["faults"] = {{{"t", kOrigin + 100 * kMs}, {"kind", "kill"}, {"pid", kB.pid}}};
  j = judge();
  EXPECT_TRUE(j.violations.empty()) << all(j.violations);
  EXPECT_TRUE(j.report["live_expired"].empty());
  EXPECT_EQ(j.report["reformations"][0]["kill_pid"], kB.pid);
}

TEST_F(StoreRecords, BadRecordsAreErrorsNamingTheLine) {
  formation();
  line(nlohmann::json{{"op", "compare_set"}, {"t", kOrigin + 50 * kMs}, {"conn", 9}, {"key", "torch.rendezvous.job"}});
  try {
    (void)judge();
    FAIL() << "a malformed record was judged";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_records);
    EXPECT_NE(e.detail().find("store.jsonl:6:"), std::string::npos) << e.detail();
  }
  lines_ = "{\"op\":\"connect\",\"t\":1}\n";
  EXPECT_THROW((void)judge(), Error);
  job_.erase("run_id");
  EXPECT_THROW((void)judge(), Error);
}

}  // namespace
}  // namespace dagsim::scenarios
