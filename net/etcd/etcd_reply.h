// Reading etcd's replies: what EtcdStore takes from the JSON of etcd's v3 gateway, a reply to a
// POST or one message of a watch stream. The gateway is plain HTTP, so whoever answers at the
// endpoint (or sits on the path) writes the reply: nothing in it is taken on faith. Pure
// functions, no I/O; the fuzz target net/fuzz/etcd_reply_fuzz.cc drives them.
//
// What it promises:
//  - Bounded parsing: parse_reply refuses text nested deeper than kMaxReplyDepth, or holding more
//    than kMaxReplyValues values, while it parses, before they cost memory (nlohmann's parser
//    takes about 20 bytes per byte of "[[[[..."), so a reply costs memory in proportion to its
//    size, which EtcdHttp bounds (kMaxReplyBytes, kMaxStreamMessageBytes).
//  - Typed: every field is read at the type the gateway gives it (proto3's JSON mapping: 64-bit
//    numbers as decimal strings, bytes as base64, a field at its default left out); a field of
//    any other type is refused by name, never a nlohmann exception (which reached the launcher as
//    "internal error", exit 3).
//  - Errors are protocol_error. A Reply's readers name where the reply came from (the endpoint and
//    the call): "etcd at 127.0.0.1:2379: store get of key k: the reply's succeeded is a string,
//    not a boolean". Text a reply chose that enters a message is printable() (escaped, cut).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/etcd/etcd_codec.h"

namespace dagsim::net::etcd {

// A reply of the gateway nests 6 deep (a txn's responses, a range, its kvs, a kv); its errors'
// details a little more.
inline constexpr int kMaxReplyDepth = 32;
// A range of a few hundred keys holds thousands of values; each costs about 50 bytes parsed.
inline constexpr uint64_t kMaxReplyValues = uint64_t{1} << 20;

// `text` as a JSON object, within the bounds above. Throws protocol_error ("a reply nested deeper
// than 32", "a reply that is not JSON", "a reply that is not a JSON object").
Json parse_reply(std::string_view text);

// Fields of `object` at the gateway's types, each at its proto3 default when absent (0, false,
// {}, [], ""). Throws protocol_error naming the field when it holds another type (or `object` is
// not an object).
// A number: a decimal string ("123") or a JSON number, at most 2^64-1.
uint64_t json_uint(const Json& object, const char* field);
bool json_bool(const Json& object, const char* field);
const Json& json_object(const Json& object, const char* field);
const Json& json_array(const Json& object, const char* field);
std::string json_string(const Json& object, const char* field);

// What a range found for one key: its value and mod revision, or absent (mod_revision 0).
struct KeyState {
  Bytes value;
  uint64_t mod_revision = 0;
  bool present() const { return mod_revision != 0; }
};

// The first kv of a RangeResponse (or a TxnResponse's response_range), absent when it has none.
KeyState first_kv(const Json& range_response);

// One message of a watch stream.
struct WatchMessage {
  std::optional<std::string> error;  // the stream failed: etcd's error, printable
  bool created = false;              // the watch now exists
  bool canceled = false;             // etcd cancelled the watch (its history was compacted)
  std::vector<KeyState> events;      // in order; a DELETE is an absent key
};
WatchMessage watch_message(const Json& message);

// A reply to one call, read through the functions above with every error naming `where` (the
// endpoint and the call: "etcd at 127.0.0.1:2379: store get of key k").
class Reply {
 public:
  Reply(Json json, std::string where) : json_(std::move(json)), where_(std::move(where)) {}

  // A txn's outcome: whether its compares held.
  bool succeeded() const;
  // The store's revision when etcd answered (header.revision).
  uint64_t revision() const;
  // A number field of the reply itself ("count", "deleted").
  uint64_t number(const char* field) const;
  // A range's first kv.
  KeyState first_kv() const;
  // The first kv of the range that is the txn's i-th response.
  KeyState txn_range(size_t i) const;
  // The reply as a message of a watch stream.
  WatchMessage watch() const;

  const Json& json() const { return json_; }
  const std::string& where() const { return where_; }

 private:
  template <typename F>
  auto named(F read) const -> decltype(read());

  Json json_;
  std::string where_;
};

}  // namespace dagsim::net::etcd
