// The store's record (store_recorder.h): its bounds. Values past the limit are summarised, except
// the rendezvous states clients write, which `dagsim judge` decodes; keys that are long or not
// UTF-8 are summarised; the file stops at its cap with a cut line.
#include "net/tcpstore/store_recorder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <csignal>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "net/crypto.h"

namespace dagsim::net::tcpstore {
namespace {

class Recorder : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("store_recorder_" + std::to_string(getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Applies `q` to the table as the server would, recording it around.
  void query(StoreRecorder& r, Query q) {
    const StoreRecorder::Pending p = r.begin(1, q, table_);
    switch (q.type) {
      case QueryType::set: table_.set(q.keys[0], q.values[0]); break;
      case QueryType::compare_set: (void)table_.compare_set(q.keys[0], q.values[0], q.values[1]); break;
      default: break;
    }
    r.end(p, table_);
  }
  static Query set(std::string key, Bytes value) { return {QueryType::set, {std::move(key)}, {std::move(value)}, 0}; }
  static Query get(std::string key) { return {QueryType::get, {std::move(key)}, {}, 0}; }
  static Query cas(std::string key, Bytes expected, Bytes desired) {
    return {QueryType::compare_set, {std::move(key)}, {std::move(expected), std::move(desired)}, 0};
  }
  std::vector<nlohmann::json> lines() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  std::string path_;
  store::KeyValueTable table_;
};

nlohmann::json summary(const Bytes& b) { return {{"bytes", b.size()}, {"sha256", sha256_hex(b)}}; }

TEST_F(Recorder, ValuesPastTheLimitAreSummarisedButStatesClientsWriteAreWhole) {
  StoreRecorder r(path_, {uint64_t{1} << 30, 16});
  const Bytes small(16, 'a'), big(17, 'b'), state(100'000, 'g');
  query(r, set("/x", small));
  query(r, set("/x", big));
  query(r, get("/x"));
  query(r, set("/torch.rendezvous.job", state));
  query(r, get("/torch.rendezvous.job"));
  query(r, cas("/torch.rendezvous.job", state, big));    // written: all three whole
  query(r, cas("/torch.rendezvous.job", state, small));  // not written: the answer summarised
  query(r, set("torch.rendezvous.other", state));        // dagsim's clients: no "/"
  query(r, set("/torch.rendezvous.big", Bytes(kRecordStateMax + 1, 'g')));
  r.stop();
  const std::vector<nlohmann::json> l = lines();
  ASSERT_EQ(l.size(), 11u);
  EXPECT_EQ(l[1]["value"], hex_of(small));
  EXPECT_EQ(l[2]["value"], summary(big));
  EXPECT_EQ(l[3]["value"], summary(big));
  EXPECT_EQ(l[4]["value"], hex_of(state));
  EXPECT_EQ(l[5]["value"], summary(state));  // a GET of the state: the store's answer
  EXPECT_EQ(l[6]["expected"], hex_of(state));
  EXPECT_EQ(l[6]["desired"], hex_of(big));
  EXPECT_EQ(l[6]["written"], true);
  EXPECT_EQ(l[6]["value"], hex_of(big));
  EXPECT_EQ(l[7]["written"], false);
  EXPECT_EQ(l[7]["expected"], hex_of(state));
  EXPECT_EQ(l[7]["value"], summary(big));
  EXPECT_EQ(l[8]["value"], hex_of(state));
  EXPECT_EQ(l[9]["value"], summary(Bytes(kRecordStateMax + 1, 'g')));
  EXPECT_EQ(l[10]["op"], "stop");
}

TEST_F(Recorder, AGetOfALargeValueAddsALineOfItsOwnSizeNotTheValues) {
  StoreRecorder r(path_);
  query(r, set("/big", Bytes(16 << 20, 0xab)));
  const uint64_t before = r.bytes();
  for (int i = 0; i < 30; ++i) query(r, get("/big"));
  // 30 GETs of 13 bytes each on the wire: once 1 GB of hex, now a line of about 150 bytes each.
  EXPECT_LT(r.bytes() - before, 30u * 200) << r.bytes() - before;
}

TEST_F(Recorder, KeysLongOrNotUtf8AreSummarisedAndTheLineStillWritten) {
  StoreRecorder r(path_);
  const std::string binary = "/a\xff\x1b", long_key(kRecordKeyMax + 1, 'k');
  query(r, set(binary, Bytes{1}));
  query(r, set(long_key, Bytes{2}));
  query(r, set("/plain", Bytes{3}));
  r.stop();
  const std::vector<nlohmann::json> l = lines();
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[1]["key"], summary(Bytes(binary.begin(), binary.end())));
  EXPECT_EQ(l[2]["key"], summary(Bytes(long_key.begin(), long_key.end())));
  EXPECT_EQ(l[3]["key"], "/plain");
}

TEST_F(Recorder, TheFileStopsAtItsCapWithACutLineAndOneLogLine) {
  std::vector<std::string> logged;
  StoreRecorder r(path_, {8192, 1024}, [&](const std::string& line) { logged.push_back(line); });
  for (int i = 0; i < 200; ++i) query(r, set("/k", Bytes(200, 'v')));
  r.stop();
  EXPECT_TRUE(r.cut());
  EXPECT_LE(std::filesystem::file_size(path_), 8192u);
  EXPECT_EQ(std::filesystem::file_size(path_), r.bytes());
  const std::vector<nlohmann::json> l = lines();
  ASSERT_GT(l.size(), 10u);
  EXPECT_EQ(l.back()["op"], "cut");
  EXPECT_EQ(l.back()["max_bytes"], 8192);
  EXPECT_GE(l.back()["t"].get<int64_t>(), l[l.size() - 2]["t"].get<int64_t>());
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("reached its cap of 8192 bytes (--record-max-bytes)"), std::string::npos) << logged[0];
}

TEST_F(Recorder, LimitsOutOfRangeAreRefused) {
  EXPECT_THROW(StoreRecorder(path_, {kRecordMinBytes - 1, 1024}), Error);
  EXPECT_THROW(StoreRecorder(path_, {uint64_t{1} << 30, kRecordStateMax + 1}), Error);
  EXPECT_NO_THROW(StoreRecorder(path_, {kRecordMinBytes, 0}));
}

}  // namespace
}  // namespace dagsim::net::tcpstore

namespace dagsim::net::tcpstore {
namespace {

// Runs `command` through sh and says whether it exited 0.
bool sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// A client in another network namespace of this host (a job's agents each have one) is tied to its
// process as a local one is: the recorder finds its socket in that namespace's tables.
TEST(RecorderPeers, AClientInAnotherNetworkNamespaceIsFoundByItsPid) {
  if (geteuid() != 0 || !sh("command -v ip") || !std::filesystem::exists("/usr/bin/python3")) {
    GTEST_SKIP() << "needs root, ip and /usr/bin/python3 for a network namespace";
  }
  const std::string ns = "dagsim-rec-" + std::to_string(getpid());
  const std::string host_if = "drh" + std::to_string(getpid() % 100000);
  const std::string ns_if = "drn" + std::to_string(getpid() % 100000);
  const std::string host_addr = "10.251." + std::to_string(getpid() % 250) + ".1";
  const std::string ns_addr = "10.251." + std::to_string(getpid() % 250) + ".2";
  struct Cleanup {
    std::string ns, host_if;
    ~Cleanup() {
      sh("ip netns del " + ns);
      sh("ip link del " + host_if);
    }
  } cleanup{ns, host_if};
  ASSERT_TRUE(sh("ip netns add " + ns));
  ASSERT_TRUE(sh("ip link add " + host_if + " type veth peer name " + ns_if));
  ASSERT_TRUE(sh("ip link set " + ns_if + " netns " + ns));
  ASSERT_TRUE(sh("ip addr add " + host_addr + "/30 dev " + host_if + " && ip link set " + host_if + " up"));
  ASSERT_TRUE(sh("ip netns exec " + ns + " sh -c 'ip addr add " + ns_addr + "/30 dev " + ns_if + " && ip link set " + ns_if +
                 " up && ip link set lo up'"));

  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address(host_addr), 0});
  const uint16_t port = acceptor.local_endpoint().port();
  // `ip netns exec` execs its command in place, so the client's pid is the one started here.
  const std::string pid_file = ::testing::TempDir() + "/rec_ns_client_" + std::to_string(getpid());
  ASSERT_TRUE(sh("ip netns exec " + ns + " /usr/bin/python3 -c 'import os,socket,time; s=socket.create_connection((\"" +
                 host_addr + "\"," + std::to_string(port) + ")); open(\"" + pid_file +
                 "\",\"w\").write(str(os.getpid())); time.sleep(20)' & "));
  boost::asio::ip::tcp::socket client(io);
  acceptor.accept(client);
  for (int i = 0; i < 200 && !std::filesystem::exists(pid_file); ++i) usleep(50'000);
  std::ifstream in(pid_file);
  int64_t expected = 0;
  ASSERT_TRUE(in >> expected) << "the client never wrote its pid";
  const std::optional<int64_t> found = local_peer_pid(client.remote_endpoint(), client.local_endpoint());
  ::kill(static_cast<pid_t>(expected), SIGKILL);
  std::filesystem::remove(pid_file);
  ASSERT_TRUE(found.has_value()) << "the client in namespace " << ns << " was not found";
  EXPECT_EQ(*found, expected);
}

}  // namespace
}  // namespace dagsim::net::tcpstore
