// Tests of the TCPStore wire format (pure code): golden bytes recorded from PyTorch 1.13.1's client
// through a logging proxy, every query round-tripping, a frame cut anywhere reporting how much
// more it needs (never complete, never malformed), and lengths over the limits or unknown types
// refused before anything is allocated.
#include "net/tcpstore/tcp_store_protocol.h"

#include <gtest/gtest.h>

namespace dagsim::net::tcpstore {
namespace {

Bytes hex(std::string_view h) {
  Bytes out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

Query make(QueryType type, std::vector<std::string> keys, std::vector<Bytes> values = {}, int64_t delta = 0) {
  Query q;
  q.type = type;
  q.keys = std::move(keys);
  q.values = std::move(values);
  q.delta = delta;
  return q;
}

// What torch.distributed.TCPStore 1.13.1 sent for set("k", b"v1"), add("n", 5), wait(["k"]) and
// compare_set("k", b"v1", b"v2") (its keys carry the "/" prefix).
TEST(TcpStoreProtocol, EncodesQueriesByteForByteAsPyTorch113) {
  EXPECT_EQ(encode_query(make(QueryType::set, {"/k"}, {text("v1")})), hex("0002000000000000002f6b02000000000000007631"));
  EXPECT_EQ(encode_query(make(QueryType::add, {"/n"}, {}, 5)), hex("0302000000000000002f6e0500000000000000"));
  EXPECT_EQ(encode_query(make(QueryType::wait, {"/k"})), hex("05010000000000000002000000000000002f6b"));
  EXPECT_EQ(encode_query(make(QueryType::compare_set, {"/k"}, {text("v1"), text("v2")})),
            hex("0102000000000000002f6b0200000000000000763102000000000000007632"));
  EXPECT_EQ(encode_query(make(QueryType::get_num_keys, {})), hex("06"));
  EXPECT_EQ(encode_query(make(QueryType::delete_key, {"/k"})), hex("0802000000000000002f6b"));
}

TEST(TcpStoreProtocol, EveryQueryRoundTripsAndACutFrameAsksForMore) {
  const std::vector<Query> queries = {
      make(QueryType::set, {"/a"}, {text("value")}),
      make(QueryType::compare_set, {"/a"}, {text(""), text("x")}),
      make(QueryType::get, {"/a"}),
      make(QueryType::add, {"/n"}, {}, -7),
      make(QueryType::check, {"/a", "/b", "/c"}),
      make(QueryType::wait, {}),
      make(QueryType::get_num_keys, {}),
      make(QueryType::watch_key, {"/w"}),
      make(QueryType::delete_key, {"/a"}),
  };
  const WireLimits limits;
  for (const Query& q : queries) {
    SCOPED_TRACE(query_name(q.type));
    const Bytes frame = encode_query(q);
    Query out;
    const Decoded d = decode_query(frame, limits, out);
    ASSERT_EQ(d.status, Decoded::Status::complete);
    EXPECT_EQ(d.consumed, frame.size());
    EXPECT_EQ(out.type, q.type);
    EXPECT_EQ(out.keys, q.keys);
    EXPECT_EQ(out.values, q.values);
    EXPECT_EQ(out.delta, q.delta);
    for (size_t cut = 0; cut < frame.size(); ++cut) {
      const Decoded part = decode_query(std::span(frame).first(cut), limits, out);
      ASSERT_EQ(part.status, Decoded::Status::incomplete) << "cut at " << cut;
      EXPECT_GT(part.needed, cut);
      EXPECT_LE(part.needed, frame.size());
    }
  }
}

TEST(TcpStoreProtocol, LengthsOverTheLimitsAndUnknownTypesAreRefusedBeforeAllocating) {
  WireLimits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 1024;
  limits.max_keys = 4;
  Query out;
  // A key claiming 2^40 bytes: refused from its 9 header bytes alone.
  Bytes huge_key = {static_cast<uint8_t>(QueryType::get)};
  append_u64(huge_key, uint64_t{1} << 40);
  Decoded d = decode_query(huge_key, limits, out);
  ASSERT_EQ(d.status, Decoded::Status::malformed);
  EXPECT_NE(d.error.find("over the limit of 16"), std::string::npos) << d.error;

  Bytes big_value = encode_query(make(QueryType::set, {"/k"}, {}));
  append_u64(big_value, 1025);
  d = decode_query(big_value, limits, out);
  ASSERT_EQ(d.status, Decoded::Status::malformed);
  EXPECT_NE(d.error.find("a value of 1025 bytes"), std::string::npos) << d.error;

  Bytes many_keys = {static_cast<uint8_t>(QueryType::wait)};
  append_u64(many_keys, 5);
  EXPECT_EQ(decode_query(many_keys, limits, out).status, Decoded::Status::malformed);

  // The keys of one WAIT together stay within one key's limit: 8 + 8 bytes pass, 10 + 10 do not.
  EXPECT_EQ(decode_query(encode_query(make(QueryType::wait, {"aaaaaaaa", "bbbbbbbb"}, {})), limits, out).status,
            Decoded::Status::complete);
  d = decode_query(encode_query(make(QueryType::wait, {"aaaaaaaaaa", "bbbbbbbbbb"}, {})), limits, out);
  ASSERT_EQ(d.status, Decoded::Status::malformed);
  EXPECT_NE(d.error.find("a key (after keys of 10 bytes in this query) of 10 bytes, over the limit of 6"), std::string::npos)
      << d.error;

  const Bytes unknown = {42, 0, 0};
  d = decode_query(unknown, limits, out);
  ASSERT_EQ(d.status, Decoded::Status::malformed);
  EXPECT_NE(d.error.find("unknown query type 42"), std::string::npos);
}

TEST(TcpStoreProtocol, WatchMessagesRoundTrip) {
  WatchEvent e;
  e.type = WatchResponse::key_updated;
  e.key = "/w";
  e.old_value = text("1");
  e.new_value = text("22");
  Bytes stream = encode_watch_event(WatchEvent{WatchResponse::callback_registered, "", {}, {}});
  ASSERT_EQ(stream, Bytes{3});
  const Bytes event = encode_watch_event(e);
  stream.insert(stream.end(), event.begin(), event.end());
  WatchEvent out;
  Decoded d = decode_watch_event(stream, WireLimits{}, out);
  ASSERT_EQ(d.status, Decoded::Status::complete);
  EXPECT_EQ(out.type, WatchResponse::callback_registered);
  d = decode_watch_event(std::span(stream).subspan(d.consumed), WireLimits{}, out);
  ASSERT_EQ(d.status, Decoded::Status::complete);
  EXPECT_EQ(out.key, "/w");
  EXPECT_EQ(out.old_value, text("1"));
  EXPECT_EQ(out.new_value, text("22"));
}

}  // namespace
}  // namespace dagsim::net::tcpstore
