// Tests of FileStore: two stores on one path (two processes' worth: two open file descriptions)
// share keys and versions; PyTorch's compare_set and add rules; waits poll until another writes or
// time out; a corrupt file and an unopenable path are named errors. On LocalRuntime's virtual
// time: the file calls are real, the polls' sleeps virtual.
#include "net/file_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"

namespace dagsim::net {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using runtime::TimePoint;

store::Bytes b(const std::string& s) { return {s.begin(), s.end()}; }

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::path(::testing::TempDir()) / ("dagsim_file_store_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove(path_);
    rt_.add_node("p0");
    rt_.add_node("p1");
  }
  void TearDown() override { fs::remove(path_); }
  std::unique_ptr<FileStore> open(WorkerId node) { return std::make_unique<FileStore>(path_.string(), rt_.env(node).clock); }

  fs::path path_;
  fibers::LocalRuntime rt_;
};

TEST_F(FileStoreTest, TwoStoresOnOnePathShareKeysAndVersions) {
  auto a = open(0), c = open(1);
  rt_.run_on(0, [&] {
    EXPECT_EQ(a->timeout(), 300s) << "PyTorch's FileStore default";
    a->set("k", b("v1"));
    EXPECT_EQ(c->get("k"), b("v1"));
    const store::Versioned v1 = c->get_versioned("k");
    EXPECT_GT(v1.version, 0u);
    EXPECT_FALSE(a->compare_set_version("k", v1.version + 1, b("stale")).written);
    const store::CasOutcome won = a->compare_set_version("k", v1.version, b("v2"));
    EXPECT_TRUE(won.written);
    EXPECT_GT(won.current.version, v1.version);
    EXPECT_EQ(c->get_versioned("k").value, b("v2"));
    EXPECT_EQ(c->get_versioned("k").version, won.current.version);
    EXPECT_TRUE(a->compare_set_version("fresh", 0, b("x")).written) << "version 0 creates";
    EXPECT_EQ(c->add("n", 5), 5);
    EXPECT_EQ(a->add("n", -7), -2);
    EXPECT_EQ(c->add("big", INT64_MAX), INT64_MAX);
    EXPECT_EQ(a->add("big", 1), INT64_MIN) << "wraps at 2^63, as PyTorch";
    EXPECT_EQ(a->num_keys(), 4);
    EXPECT_TRUE(c->check({"k", "n"}));
    EXPECT_FALSE(c->check({"k", "absent"}));
    EXPECT_TRUE(c->delete_key("n"));
    EXPECT_FALSE(a->delete_key("n"));
    a->multi_set({"m1", "m2"}, {b("1"), b("2")});
    EXPECT_EQ(c->multi_get({"m2", "m1"}), (std::vector<store::Bytes>{b("2"), b("1")}));
  });
}

TEST_F(FileStoreTest, CompareSetFollowsPyTorchsRules) {
  auto a = open(0);
  rt_.run_on(0, [&] {
    EXPECT_EQ(a->compare_set("k", b("x"), b("y")), b("x")) << "absent, expected not empty: answers expected";
    EXPECT_FALSE(a->check({"k"})) << "and writes nothing";
    EXPECT_EQ(a->compare_set("k", {}, b("y")), b("y")) << "absent, expected empty: creates";
    EXPECT_EQ(a->compare_set("k", b("no"), b("z")), b("y")) << "a mismatch answers the value held";
    EXPECT_EQ(a->compare_set("k", b("y"), b("z")), b("z"));
    a->set("text", b("3abc"));
    EXPECT_EQ(a->add("text", 1), 4) << "the leading number, as std::stoll reads it";
  });
}

TEST_F(FileStoreTest, WaitsPollUntilAnotherWritesOrTimeOut) {
  auto a = open(0), c = open(1);
  a->set_timeout(5s);
  std::optional<TimePoint> got_at;
  rt_.env(0).spawner.spawn("waiter", [&] {
    EXPECT_EQ(a->get("late"), b("here"));
    got_at = rt_.now();
  });
  rt_.env(1).spawner.spawn("writer", [&] {
    rt_.env(1).clock.sleep(1s);
    c->set("late", b("here"));
  });
  (void)rt_.run(TimePoint{} + 10s);
  ASSERT_TRUE(got_at.has_value());
  EXPECT_GE(*got_at, TimePoint{} + 1s);
  EXPECT_LE(*got_at, TimePoint{} + 1s + FileStore::kPollInterval);
  rt_.run_on(0, [&] {
    const TimePoint start = rt_.now();
    const store::Versioned same = a->watch_at_most("late", a->get_versioned("late").version, 300ms);
    EXPECT_EQ(same.value, b("here"));
    EXPECT_EQ(rt_.now() - start, 300ms) << "returned unchanged at its bound";
    EXPECT_TRUE(throws_error([&] { a->get("never"); }, ErrorCode::timed_out, {"never"}));
    EXPECT_TRUE(throws_error([&] { a->watch("late", a->get_versioned("late").version); }, ErrorCode::timed_out, {"late"}));
  });
}

TEST_F(FileStoreTest, ACorruptFileAndAnUnopenablePathAreNamedErrors) {
  std::ofstream(path_) << "not a store";
  auto a = open(0);
  rt_.run_on(0, [&] {
    EXPECT_TRUE(throws_error([&] { a->get_versioned("k"); }, ErrorCode::protocol_error, {path_.string(), "not a dagsim file store"}));
  });
  // Lengths past the end: a valid header that promises a key it does not hold.
  std::string truncated = "DGFS0001";
  truncated += std::string("\x05\0\0\0\0\0\0\0", 8) + std::string("\x01\0\0\0\0\0\0\0", 8);
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << truncated;
  rt_.run_on(0, [&] { EXPECT_TRUE(throws_error([&] { a->num_keys(); }, ErrorCode::protocol_error, {"past the end"})); });
  EXPECT_TRUE(throws_error([&] { FileStore("/nonexistent-dagsim-dir/store", rt_.env(0).clock); }, ErrorCode::connection_failed,
                           {"/nonexistent-dagsim-dir/store", "No such file"}));
}

// A store file is anyone's to write on the host: a sparse file of 64 GiB (one truncate, no disk)
// is refused by its size before a byte is read, naming the path and the bound.
TEST_F(FileStoreTest, AFileOverTheBoundIsRefusedBeforeItIsRead) {
  auto a = open(0);
  fs::resize_file(path_, uint64_t{64} << 30);
  rt_.run_on(0, [&] {
    EXPECT_TRUE(throws_error([&] { a->get_versioned("k"); }, ErrorCode::protocol_error,
                             {path_.string(), "68719476736 bytes, over the limit of 512 MiB"}));
  });
}

// A FIFO, a device or a directory at the path is refused at once, never read or waited on.
TEST_F(FileStoreTest, ASpecialFileIsRefusedAtOnce) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  EXPECT_TRUE(throws_error([&] { FileStore(path_.string(), rt_.env(0).clock); }, ErrorCode::connection_failed,
                           {path_.string(), "not a regular file"}));
  EXPECT_TRUE(throws_error([&] { FileStore("/dev/null", rt_.env(0).clock); }, ErrorCode::connection_failed,
                           {"/dev/null", "not a regular file"}));
  EXPECT_TRUE(throws_error([&] { FileStore(::testing::TempDir(), rt_.env(0).clock); }, ErrorCode::connection_failed));
}

// A last version of 2^64-1 (anyone may write it): reads go on, a change is refused by name and
// the file is left as it was, never a version that wraps to 0.
TEST_F(FileStoreTest, AVersionAtTheTopIsNeverWrapped) {
  std::string bytes = "DGFS0001" + std::string(8, '\xff') + std::string(8, '\0');
  std::ofstream(path_, std::ios::binary) << bytes;
  auto a = open(0);
  rt_.run_on(0, [&] {
    EXPECT_EQ(a->num_keys(), 0);
    EXPECT_TRUE(throws_error([&] { a->set("k", b("v")); }, ErrorCode::protocol_error, {path_.string(), "2^64-1"}));
    EXPECT_TRUE(throws_error([&] { (void)a->compare_set_version("k", 0, b("v")); }, ErrorCode::protocol_error, {"2^64-1"}));
    EXPECT_FALSE(a->check({"k"}));
  });
  EXPECT_EQ(fs::file_size(path_), bytes.size());
}

}  // namespace
}  // namespace dagsim::net
