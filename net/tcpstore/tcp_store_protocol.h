// PyTorch 1.13's TCPStore wire protocol (torch/csrc/distributed/c10d/TCPStore.cpp at v1.13, checked
// byte for byte against Debian's python3-torch 1.13.1 through a logging proxy): pure encoding and
// decoding, no sockets, so both ends and the fuzzers share one definition.
//
// The protocol, as 1.13 speaks it:
//  - No handshake, no version, no magic number: a client connects and sends queries. Integers are
//    in host order (little-endian on every platform PyTorch ships for); a string or byte vector is
//    a uint64 length then the bytes.
//  - A query is one QueryType byte then its fields:
//      SET key value | COMPARE_SET key expected desired | GET key | ADD key int64
//      CHECK uint64-n key*n | WAIT uint64-n key*n | GETNUMKEYS | WATCH_KEY key | DELETE_KEY key
//  - Replies: SET none; COMPARE_SET and GET a byte vector; ADD, GETNUMKEYS and DELETE_KEY an int64
//    (DELETE_KEY: how many keys were deleted); CHECK one CheckResponse byte; WAIT one WaitResponse
//    byte, sent when every key is present, possibly much later, while the server goes on answering
//    other queries on the connection; WATCH_KEY one WatchResponse byte (callback_registered), and
//    from then on, on that connection, one event per change of the key: WatchResponse type, key,
//    old value, new value (empty when absent).
//  - GET on an absent key is an error at the server (1.13 closes the connection): a client waits
//    for the key first (PyTorch's get is WAIT then GET). There is no error reply at all: a server
//    that cannot answer closes the connection.
//  - PyTorch's clients prefix every key with "/" (the init key "init/" excepted); the server stores
//    keys as they come. Later PyTorch versions (2.x) added APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT
//    and a validation query; 1.13 has none of them, and neither does this file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/runtime/transport.h"

namespace dagsim::net::tcpstore {

using runtime::Bytes;

enum class QueryType : uint8_t {
  set = 0, compare_set, get, add, check, wait, get_num_keys, watch_key, delete_key,
};
inline constexpr uint8_t kLastQueryType = static_cast<uint8_t>(QueryType::delete_key);
const char* query_name(QueryType type);

enum class CheckResponse : uint8_t { ready = 0, not_ready = 1 };
enum class WaitResponse : uint8_t { stop_waiting = 0 };
enum class WatchResponse : uint8_t { key_updated = 0, key_created = 1, key_deleted = 2, callback_registered = 3 };

// What either end accepts from the other; checked before anything is allocated. PyTorch's server
// has no limits at all; these are far past what PyTorch's own rendezvous and agents use (keys of a
// few dozen bytes, a WAIT on one key per worker), so that a job never meets them and one frame
// still cannot ask for unbounded memory.
struct WireLimits {
  uint64_t max_key_bytes = uint64_t{16} << 20;  // one key, and all the keys of a CHECK or WAIT together
  uint64_t max_value_bytes = uint64_t{256} << 20;
  uint64_t max_keys = uint64_t{1} << 16;  // per CHECK or WAIT
};

struct Query {
  QueryType type = QueryType::set;
  std::vector<std::string> keys;  // one, except CHECK and WAIT (any number) and GETNUMKEYS (none)
  std::vector<Bytes> values;      // SET: the value; COMPARE_SET: expected, desired
  int64_t delta = 0;              // ADD
};

// The outcome of decoding the front of a buffer.
struct Decoded {
  enum class Status : uint8_t { complete, incomplete, malformed };
  Status status = Status::incomplete;
  size_t consumed = 0;   // complete: the frame's length
  size_t needed = 0;     // incomplete: the buffer must hold at least this many bytes to progress
  std::string error;     // malformed: why, for the log line that closes the connection
};

// Decodes one query from the front of `buffer` into `out` (valid when complete).
Decoded decode_query(std::span<const uint8_t> buffer, const WireLimits& limits, Query& out);
Bytes encode_query(const Query& query);

struct WatchEvent {
  WatchResponse type = WatchResponse::key_updated;
  std::string key;
  Bytes old_value, new_value;
};
// Decodes one message of a watch connection: a lone callback_registered byte, or an event.
Decoded decode_watch_event(std::span<const uint8_t> buffer, const WireLimits& limits, WatchEvent& out);
Bytes encode_watch_event(const WatchEvent& event);

// Reply pieces (little-endian, as 1.13 on x86-64 and aarch64 writes them).
void append_u64(Bytes& out, uint64_t v);
void append_i64(Bytes& out, int64_t v);
void append_blob(Bytes& out, std::span<const uint8_t> bytes);
uint64_t read_u64(std::span<const uint8_t> eight);

}  // namespace dagsim::net::tcpstore
