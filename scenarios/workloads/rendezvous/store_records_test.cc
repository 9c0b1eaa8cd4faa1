// A rendezvous judged from its store's record (store_records.h): hand-written records in the
// store's format, each a history the checker must pass or catch.
#include "scenarios/workloads/rendezvous/store_records.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/base/error.h"
#include "net/etcd/etcd_codec.h"
#include "scenarios/workloads/rendezvous/store_record_reader.h"

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

// A record written from etcd's revisions (a [job] on etcd): sets from one connection no process
// is known for. Every commit lacks its writer, S1 unless job.json says the writers are unknown;
// then S1 is not judged, the report says so, and the state's own rules still hold it.
TEST_F(StoreRecords, WritersUnknownLeavesS1UnjudgedAndSaysSo) {
  lines_.clear();
  line({{"op", "start"}, {"t", kOrigin}, {"pid", 1}});
  line({{"op", "connect"}, {"t", kOrigin}, {"conn", 1}, {"peer", "etcd"}, {"pid", nullptr}});
  RendezvousState s1;
  s1.participants[kA] = 0;
  s1.last_heartbeats[kA] = wall(10);
  RendezvousState s2 = s1;
  s2.participants[kB] = 1;
  s2.last_heartbeats[kB] = wall(20);
  s2.complete = true;
  s2.world_size = 2;
  for (const auto& [ms, s] : {std::pair{10, s1}, std::pair{20, s2}}) {
    line({{"op", "set"}, {"t", kOrigin + ms * kMs}, {"conn", 1}, {"key", "torch.rendezvous.job"}, {"value", hex(rendezvous::encode(s))}});
  }
  const StoreRecordsJudgement known = judge();
  EXPECT_NE(all(known.violations).find("no node wrote it"), std::string::npos) << all(known.violations);
  job_["writers_known"] = false;
  const StoreRecordsJudgement unknown = judge();
  EXPECT_TRUE(unknown.violations.empty()) << all(unknown.violations);
  EXPECT_EQ(unknown.report["rounds"].size(), 1u);
  EXPECT_NE(unknown.report["not_judged"].get<std::string>().find("S1: the record ties no write"), std::string::npos)
      << unknown.report["not_judged"];
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

// What the store's record summarises (store_recorder.h: long values it answered, long or binary
// keys) the judge does not need: the same history judges the same with them.
TEST_F(StoreRecords, SummarisedAnswersAndKeysJudgeAsTheWholeValuesDid) {
  formation();
  const nlohmann::json summary = {{"bytes", 20000}, {"sha256", std::string(64, 'a')}};
  line({{"op", "get"}, {"t", kOrigin + 30 * kMs}, {"conn", 1}, {"key", "torch.rendezvous.job"}, {"value", summary}});
  line({{"op", "set"}, {"t", kOrigin + 31 * kMs}, {"conn", 2}, {"key", summary}, {"value", summary}});
  line({{"op", "set"}, {"t", kOrigin + 32 * kMs}, {"conn", 2}, {"key", "/other"}, {"value", summary}});
  line({{"op", "wait"}, {"t", kOrigin + 33 * kMs}, {"conn", 2}, {"keys", {"/a", summary}}});
  const StoreRecordsJudgement j = judge();
  EXPECT_TRUE(j.violations.empty()) << all(j.violations);
  EXPECT_EQ(j.report["commits"], 2);
  EXPECT_TRUE(j.report["record_cut"].is_null());
}

TEST_F(StoreRecords, AStateRecordedAsASummaryIsRefusedNamingTheLine) {
  formation();
  line({{"op", "set"}, {"t", kOrigin + 40 * kMs}, {"conn", 1}, {"key", "/torch.rendezvous.job"},
        {"value", {{"bytes", 17 << 20}, {"sha256", std::string(64, 'b')}}}});
  try {
    (void)judge();
    FAIL() << "a summarised state was judged";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_records);
    EXPECT_NE(e.detail().find("store.jsonl:6: value: the state of torch.rendezvous.job was recorded as a summary (17825792 bytes"),
              std::string::npos) << e.detail();
  }
}

TEST_F(StoreRecords, ACutRecordIsJudgedUpToItsCapAndSaysSo) {
  formation();
  line({{"op", "cut"}, {"t", kOrigin + 50 * kMs}, {"max_bytes", 4096}});
  line({{"op", "nonsense after the cut"}});
  const StoreRecordsJudgement j = judge();
  EXPECT_TRUE(j.violations.empty()) << all(j.violations);
  ASSERT_FALSE(j.report["record_cut"].is_null());
  EXPECT_EQ(j.report["record_cut"]["max_bytes"], 4096);
  EXPECT_EQ(j.report["record_cut"]["at_ms"], 50.0);
  EXPECT_EQ(j.report["record_cut"]["line"], 6);
}

TEST_F(StoreRecords, HostileRecordsAreRefusedWithinBoundsNamingWhatAndWhere) {
  const auto refusal = [&](const std::string& record, const nlohmann::json& job) {
    lines_ = record;
    job_ = job;
    try {
      (void)judge();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_records);
      return e.detail();
    }
    return std::string("judged");
  };
  const nlohmann::json job = job_;
  const std::string start = lines_;
  // A pickle nesting a million tuples under the state key: the unpickler's limit, named with the line.
  std::string nest = "\x80\x04N" + std::string(1'000'000, '\x85') + ".";
  const std::string b64 = net::etcd::base64_encode(std::string_view(nest));
  std::string e = refusal(start + nlohmann::json{{"op", "set"}, {"t", kOrigin}, {"conn", 1}, {"key", "torch.rendezvous.job"},
                                                 {"value", hex(runtime::Bytes(b64.begin(), b64.end()))}}.dump() + "\n", job);
  EXPECT_NE(e.find("store.jsonl:4: the state of torch.rendezvous.job does not decode: PyTorch rendezvous state: nested deeper than 32"),
            std::string::npos) << e;
  // JSON nested past the format's depth, and a line past the longest the store writes.
  e = refusal(start + std::string(100, '[') + std::string(100, ']') + "\n", job);
  EXPECT_NE(e.find("store.jsonl:4: nested deeper than 4 arrays or objects"), std::string::npos) << e;
  e = refusal(start + std::string(kMaxStoreRecordLineBytes + 1, ' ') + "\n", job);
  EXPECT_NE(e.find("store.jsonl:4: a line longer than"), std::string::npos) << e;
  // Times before the epoch (they would overflow against a late start), values neither hex nor a summary.
  e = refusal(start + R"({"op":"close","t":-9223372036854775807,"conn":1})" "\n", job);
  EXPECT_NE(e.find("a time before the Unix epoch"), std::string::npos) << e;
  e = refusal(start + R"({"op":"set","t":1700000000000000000,"conn":1,"key":"torch.rendezvous.job","value":{"bytes":1}})" "\n", job);
  EXPECT_NE(e.find("store.jsonl:4: value: neither hex nor a summary"), std::string::npos) << e;
  // A run id and a fault kind with control characters are escaped where they are named.
  nlohmann::json hostile = job;
  hostile["run_id"] = "a\x1b[2J";
  e = refusal(start + nlohmann::json{{"op", "set"}, {"t", kOrigin}, {"conn", 1}, {"key", "torch.rendezvous.a\x1b[2J"},
                                     {"value", "67"}}.dump() + "\n", hostile);
  EXPECT_NE(e.find("the state of \"torch.rendezvous.a\\u001b[2J\" does not decode"), std::string::npos) << e;
  hostile = job;
  hostile["faults"] = {{{"t", 1}, {"kind", "\x07" "bell"}}};
  e = refusal(start, hostile);
  EXPECT_NE(e.find("a fault of kind \"\\u0007bell\""), std::string::npos) << e;
  EXPECT_EQ(e.find('\x07'), std::string::npos);
  // job.json past its size or depth, or not a regular file (a FIFO would block the judge).
  e = refusal(start, nlohmann::json::parse(std::string(20, '[') + std::string(20, ']')));
  EXPECT_NE(e.find("job.json: nested deeper than 8 arrays or objects"), std::string::npos) << e;
  std::ofstream(dir_ / "store.jsonl") << start;
  std::filesystem::remove(dir_ / "job.json");
  ASSERT_EQ(mkfifo((dir_ / "job.json").c_str(), 0600), 0);
  try {
    (void)judge_store_records(dir_.string());
    FAIL() << "a FIFO job.json was read";
  } catch (const Error& err) {
    EXPECT_NE(err.detail().find("not a regular file"), std::string::npos) << err.detail();
  }
}

}  // namespace
}  // namespace dagsim::scenarios
