// Tests of the gateway's JSON as EtcdStore speaks it: base64 both ways (RFC 4648 vectors, every
// byte value, malformed input refused), proto3's numbers as strings or numbers (0 when left out),
// a prefix's range end, and a range reply's first kv.
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "net/etcd/etcd_codec.h"
#include "net/etcd/etcd_reply.h"

namespace dagsim::net::etcd {
namespace {

TEST(EtcdCodec, Base64MatchesRfc4648AndRoundTripsEveryByte) {
  const std::pair<std::string, std::string> vectors[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded);
    EXPECT_EQ(base64_decode(encoded), plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n < all.size(); n += 37) EXPECT_EQ(base64_decode(base64_encode(all.substr(0, n))), all.substr(0, n));
}

TEST(EtcdCodec, MalformedBase64IsAProtocolError) {
  for (const char* bad : {"Zg=", "Z!==", "Zg==Zg==", "=Zg="}) {
    EXPECT_TRUE(throws_error([&] { base64_decode(bad); }, ErrorCode::protocol_error)) << bad;
  }
}

TEST(EtcdCodec, NumbersComeAsStringsOrNumbersAndDefaultToZero) {
  const Json j = Json::parse(R"({"a": "42", "b": 7, "c": "x", "d": -1})");
  EXPECT_EQ(json_uint(j, "a"), 42u);
  EXPECT_EQ(json_uint(j, "b"), 7u);
  EXPECT_EQ(json_uint(j, "missing"), 0u);
  EXPECT_TRUE(throws_error([&] { json_uint(j, "c"); }, ErrorCode::protocol_error, {"c is x, not an unsigned number"}));
  EXPECT_TRUE(throws_error([&] { json_uint(j, "d"); }, ErrorCode::protocol_error));
}

TEST(EtcdCodec, APrefixRangeEndsAtItsSuccessor) {
  EXPECT_EQ(prefix_end("/dagsim/run/"), "/dagsim/run0");
  EXPECT_EQ(prefix_end(std::string("a\xff", 2)), "b");
  EXPECT_EQ(prefix_end(""), std::string(1, '\0'));
  EXPECT_EQ(prefix_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(EtcdCodec, TheFirstKvOfARangeReplyOrAbsent) {
  const Json found = Json::parse(R"({"header": {"revision": "9"}, "kvs": [{"key": "Zm9v", "mod_revision": "5", "value": "YmFy"}], "count": "1"})");
  const KeyState s = first_kv(found);
  EXPECT_TRUE(s.present());
  EXPECT_EQ(s.mod_revision, 5u);
  EXPECT_EQ(std::string(s.value.begin(), s.value.end()), "bar");
  // An empty value is left out of the JSON altogether.
  const KeyState empty = first_kv(Json::parse(R"({"kvs": [{"key": "Zm9v", "mod_revision": "6"}]})"));
  EXPECT_TRUE(empty.present());
  EXPECT_TRUE(empty.value.empty());
  EXPECT_FALSE(first_kv(Json::parse(R"({"header": {"revision": "9"}})")).present());
}

}  // namespace
}  // namespace dagsim::net::etcd
