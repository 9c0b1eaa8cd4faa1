// Tests of restore_store_records (store_restore.h): a record written by the real recorder through
// the real server replays into a fresh table (every write kind, in order, across two files); a
// summarised value, a cut record and a bad line are refused naming FILE:LINE; a torn last line is
// skipped.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

#include <fstream>
#include <thread>

#include "core/base/error.h"
#include "core/base/throws_error_test_util.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/store_recorder.h"
#include "net/tcpstore/store_restore.h"
#include "net/tcpstore/tcp_store_client.h"
#include "net/tcpstore/tcp_store_server.h"

namespace dagsim::net::tcpstore {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

// Serves a table with a recorder at `path` on its own thread while `body` runs against a client.
void record(const std::string& path, RecorderLimits limits, const std::function<void(TcpStoreClient&)>& body) {
  std::thread thread([&] {
    StoreHost host("test", [](const std::string& line) { ADD_FAILURE() << line; });
    TcpStoreServerOptions o;
    o.recorder = std::make_shared<StoreRecorder>(path, limits);
    TcpStoreServer server(host.io(), host.spawner(), tcp::acceptor(host.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
                          std::make_shared<store::KeyValueTable>(), o);
    TcpStoreClientOptions co;
    co.port = server.port();
    TcpStoreClient c(host.io(), co);
    c.set_timeout(5s);
    host.run([&] { body(c); });
    server.close();
    o.recorder->stop();
  });
  thread.join();
}

TEST(StoreRestore, ReplaysEveryWriteInOrderAcrossLives) {
  const std::string dir = ::testing::TempDir();
  const std::string first = dir + "/restore-0.jsonl", second = dir + "/restore-1.jsonl";
  RecorderLimits whole;
  whole.value_bytes = kRecordStateMax;
  record(first, whole, [](TcpStoreClient& c) {
    c.set("a", text("1"));
    c.set("gone", text("x"));
    c.compare_set("b", {}, text("B"));           // written
    c.compare_set("b", text("nope"), text("C"));  // not written
    c.add("n", 5);
    c.add("n", 2);
    c.set("big", Bytes(5000, 0xab));  // past the default 1 KiB, kept whole here
    EXPECT_EQ(c.get("a"), text("1"));
    EXPECT_TRUE(c.delete_key("gone"));
  });
  record(second, whole, [](TcpStoreClient& c) {
    c.set("a", text("2"));  // a later life overwrites
  });
  store::KeyValueTable table;
  const RestoreSummary s = restore_store_records({first, second}, table);
  EXPECT_EQ(s.files, 2u);
  EXPECT_EQ(s.writes, 8u);
  EXPECT_EQ(s.torn_lines, 0u);
  EXPECT_EQ(table.get("/a"), text("2"));
  EXPECT_EQ(table.get("/b"), text("B"));
  EXPECT_EQ(table.get("/n"), text("7"));
  EXPECT_EQ(table.get("/big"), Bytes(5000, 0xab));
  EXPECT_FALSE(table.get("/gone").has_value());
  EXPECT_EQ(table.add("/n", 1), 8);  // an integer still
}

TEST(StoreRestore, RefusesASummarisedValueNamingTheLine) {
  const std::string path = ::testing::TempDir() + "/restore-summary.jsonl";
  record(path, RecorderLimits{}, [](TcpStoreClient& c) {
    c.set("small", text("ok"));
    c.set("big", Bytes(5000, 1));  // summarised under the default 1 KiB
  });
  // The line of the big set: the one with a digest.
  std::ifstream in(path);
  size_t number = 0, summarised = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (summarised == 0 && line.find("sha256") != std::string::npos) summarised = number;
  }
  ASSERT_NE(summarised, 0u);
  store::KeyValueTable table;
  EXPECT_TRUE(throws_error([&] { restore_store_records({path}, table); }, ErrorCode::invalid_argument,
                           {path + ":" + std::to_string(summarised) + ":", "summary", "--record-value-bytes"}));
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(StoreRestore, RefusesACutRecordAndBadLinesSkipsATornLastLine) {
  const std::string dir = ::testing::TempDir();
  const std::string start = R"({"op":"start","t":1,"pid":1})" "\n";
  const std::string set = R"({"op":"set","t":2,"conn":1,"key":"/k","value":"7631"})" "\n";
  store::KeyValueTable table;
  write_file(dir + "/cut.jsonl", start + set + R"({"op":"cut","t":3,"max_bytes":4096})" "\n");
  EXPECT_TRUE(throws_error([&] { restore_store_records({dir + "/cut.jsonl"}, table); }, ErrorCode::invalid_argument,
                           {dir + "/cut.jsonl:3:", "cut"}));
  write_file(dir + "/bad.jsonl", start + "{not json\n" + set);
  EXPECT_TRUE(throws_error([&] { restore_store_records({dir + "/bad.jsonl"}, table); }, ErrorCode::invalid_argument,
                           {dir + "/bad.jsonl:2:", "not JSON"}));
  write_file(dir + "/hex.jsonl", start + R"({"op":"set","t":2,"conn":1,"key":"/k","value":"7g"})" "\n");
  EXPECT_TRUE(throws_error([&] { restore_store_records({dir + "/hex.jsonl"}, table); }, ErrorCode::invalid_argument,
                           {"hex.jsonl:2:", "not hex"}));
  write_file(dir + "/key.jsonl", start + R"({"op":"set","t":2,"conn":1,"key":{"bytes":5000,"sha256":"00"},"value":"00"})" "\n");
  EXPECT_TRUE(throws_error([&] { restore_store_records({dir + "/key.jsonl"}, table); }, ErrorCode::invalid_argument,
                           {"key.jsonl:2:", "key was recorded as a summary"}));
  write_file(dir + "/deep.jsonl", start + std::string(50, '[') + std::string(50, ']') + "\n");
  EXPECT_TRUE(throws_error([&] { restore_store_records({dir + "/deep.jsonl"}, table); }, ErrorCode::invalid_argument,
                           {"deep.jsonl:2:", "nested deeper"}));
  EXPECT_TRUE(throws_error([&] { restore_store_records({dir + "/absent.jsonl"}, table); }, ErrorCode::invalid_argument,
                           {"absent.jsonl", "cannot read"}));
  // Killed mid-line: the unterminated tail is skipped, what came before is restored.
  write_file(dir + "/torn.jsonl", start + set + R"({"op":"set","t":3,"conn":1,"ke)");
  const RestoreSummary s = restore_store_records({dir + "/torn.jsonl"}, table);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.torn_lines, 1u);
  EXPECT_EQ(table.get("/k"), text("v1"));
}

}  // namespace
}  // namespace dagsim::net::tcpstore
