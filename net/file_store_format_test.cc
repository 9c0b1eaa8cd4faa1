// Tests of FileStore's file format (file_store_format.h): a table survives its own encoding; every
// bound and consistency rule refuses a file naming it and the path, before anything the file's
// numbers claim is allocated; versions never wrap; keys in messages are escaped.
#include "net/file_store_format.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <limits>

#include "core/base/throws_error_test_util.h"

namespace dagsim::net {
namespace {

store::Bytes b(const std::string& s) { return {s.begin(), s.end()}; }

void u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
std::string header(uint64_t last_version, uint64_t count) {
  std::string out = "DGFS0001";
  u64(out, last_version);
  u64(out, count);
  return out;
}
// One key's record, as claimed: the lengths need not match the bytes that follow.
std::string record(uint64_t version, uint32_t key_len, uint64_t value_len, const std::string& rest) {
  std::string out;
  u64(out, version);
  u32(out, key_len);
  u64(out, value_len);
  return out + rest;
}

TEST(FileStoreFormat, ATableSurvivesItsEncodingAndEmptyBytesAreANewStore) {
  FileStoreTable t;
  t.put("a", b("1"), "p");
  t.put(std::string("k\0\xff", 3), b(std::string(1000, 'x')), "p");
  t.put("a", {}, "p");
  const FileStoreTable back = decode_file_store(encode_file_store(t, "p"), "p");
  EXPECT_EQ(back.last_version, 3u);
  ASSERT_EQ(back.keys.size(), t.keys.size());
  for (const auto& [key, v] : t.keys) {
    EXPECT_EQ(back.keys.at(key).value, v.value);
    EXPECT_EQ(back.keys.at(key).version, v.version);
  }
  EXPECT_EQ(back.keys.at("a").version, 3u);
  EXPECT_TRUE(decode_file_store("", "p").keys.empty());
}

TEST(FileStoreFormat, EveryBoundAndRuleRefusesTheFileNamingItsPath) {
  const auto refused = [](const std::string& bytes, std::initializer_list<std::string> says) {
    return throws_error([&] { decode_file_store(bytes, "/tmp/the store"); }, ErrorCode::protocol_error, says);
  };
  EXPECT_TRUE(refused("DGFS0002" + std::string(16, '\0'), {"file store /tmp/the store", "not a dagsim file store"}));
  EXPECT_TRUE(refused("DGFS0001", {"the last version runs past the end"}));
  // A count the file cannot hold, and one past the bound, before any record is read.
  EXPECT_TRUE(refused(header(5, uint64_t{1} << 40), {"a key count of 1099511627776, over the limit of 1048576"}));
  EXPECT_TRUE(refused(header(5, 1000), {"a key count of 1000 runs past the end"}));
  // Lengths over the bounds, and within them but past the end.
  EXPECT_TRUE(refused(header(5, 1) + record(1, (16u << 20) + 1, 0, ""), {"over the limits of 16 MiB and 256 MiB"}));
  EXPECT_TRUE(refused(header(5, 1) + record(1, 1, (uint64_t{256} << 20) + 1, "k"), {"over the limits"}));
  EXPECT_TRUE(refused(header(5, 1) + record(1, 1, uint64_t{200} << 20, "kv"), {"a value runs past the end"}));
  // Versions from 1 to the last version; each key once; nothing after the last key.
  EXPECT_TRUE(refused(header(5, 1) + record(0, 1, 1, "kv"), {"key k has version 0"}));
  EXPECT_TRUE(refused(header(5, 1) + record(6, 1, 1, "kv"), {"key k has version 6, not one from 1 to the last version, 5"}));
  EXPECT_TRUE(refused(header(5, 2) + record(1, 1, 1, "kv") + record(2, 1, 1, "kw"), {"key k twice"}));
  EXPECT_TRUE(refused(header(5, 0) + "xyz", {"3 bytes after the last key"}));
  // A key chosen by whoever wrote the file reaches the message escaped.
  EXPECT_TRUE(refused(header(5, 1) + record(9, 5, 0, "\x1b[31m"), {"key \"\\u001b[31m\" has version 9"}));
}

TEST(FileStoreFormat, AFileOverItsSizeBoundIsRefusedByItsLengthBeforeAByteIsRead) {
  // Untouched anonymous pages: the bytes cost nothing unless the decoder reads them.
  const size_t n = kFileStoreMaxFileBytes + 1;
  void* pages = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  EXPECT_TRUE(throws_error([&] { decode_file_store(std::string_view(static_cast<const char*>(pages), n), "p"); },
                           ErrorCode::protocol_error, {"536870913 bytes, over the limit of 512 MiB"}));
  ::munmap(pages, n);
}

TEST(FileStoreFormat, VersionsNeverWrapAndChangesStayWithinTheBounds) {
  FileStoreTable t = decode_file_store(header(std::numeric_limits<uint64_t>::max(), 0), "p");
  EXPECT_TRUE(throws_error([&] { t.put("k", b("v"), "/s"); }, ErrorCode::protocol_error,
                           {"file store /s", "2^64-1", "no version is left for a change to k"}));
  EXPECT_TRUE(t.keys.empty());
  FileStoreTable fresh;
  EXPECT_TRUE(throws_error([&] { fresh.put(std::string((16u << 20) + 1, 'k'), {}, "p"); }, ErrorCode::invalid_argument,
                           {"over the limits of 16 MiB and 256 MiB"}));
  EXPECT_EQ(fresh.last_version, 0u);
}

}  // namespace
}  // namespace dagsim::net
