// The built-in store's wire format (store_service.h): one request payload and one reply payload
// for every operation, on service type kStoreServices + 0. Bounded: keys of at most kMaxKeyBytes,
// values of at most kMaxValueBytes, at most kMaxKeys keys per request; a request over the bounds
// is refused by the sender's WireWriter before it leaves and by the store's WireReader if forged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rpc/message.h"
#include "core/rpc/wire.h"

namespace dagsim::store {

inline constexpr rpc::MessageType kStoreRequest = rpc::service_request(rpc::kStoreServices + 0);
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = size_t{16} << 20;
inline constexpr size_t kMaxKeys = 4096;

enum class StoreOp : uint8_t {
  set = 1, get, compare_set, add, wait, check, delete_key, num_keys, multi_get, multi_set, get_versioned,
  compare_set_version, watch,
};
inline constexpr uint8_t kLastStoreOp = static_cast<uint8_t>(StoreOp::watch);
const char* store_op_name(StoreOp op);
// A watch whose request carries this number answers the key unchanged when its timeout passes
// (Store::watch_at_most) instead of timed_out.
inline constexpr int64_t kWatchQuietly = 1;

struct StoreRequest {
  static constexpr const char* kName = "store_request";
  uint8_t op = 0;
  std::vector<std::string> keys;
  std::vector<rpc::Bytes> values;
  int64_t number = 0;      // add: the delta; watch: kWatchQuietly or 0
  uint64_t version = 0;    // compare_set_version: expected; watch: known
  int64_t timeout_ns = 0;  // get, wait, multi_get, watch: how long the store waits
  // get_versioned, compare_set_version, watch: the version of keys[0] whose bytes the client
  // holds (0: none), against which the store may answer with a delta (value_delta.h).
  uint64_t base = 0;
  // compare_set_version: when set, values[0] is not the value to write but a delta against the
  // key's value at this version, which must be the expected one (a write lands only on it).
  uint64_t value_base = 0;
  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("store_request.op", m.op);
    io.list("store_request.keys", m.keys, kMaxKeys, [&](auto& k) { io.str("store_request.key", k, kMaxKeyBytes); });
    io.list("store_request.values", m.values, kMaxKeys, [&](auto& v) { io.blob("store_request.value", v, kMaxValueBytes); });
    io.num("store_request.number", m.number);
    io.num("store_request.version", m.version);
    io.num("store_request.timeout_ns", m.timeout_ns);
    io.num("store_request.base", m.base);
    io.num("store_request.value_base", m.value_base);
  }
};

struct StoreReply {
  static constexpr const char* kName = "store_reply";
  std::vector<rpc::Bytes> values;
  std::vector<uint64_t> versions;
  int64_t number = 0;  // add: the sum; num_keys: the count
  bool flag = false;   // check, delete_key, compare_set_version: the answer
  // Versioned replies: 0 when values[0] is the key's value; else values[0] is a delta against
  // this version (the request's base). A compare-and-set that wrote answers no value at all: it
  // is the one the client sent.
  uint64_t delta_base = 0;
  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.list("store_reply.values", m.values, kMaxKeys, [&](auto& v) { io.blob("store_reply.value", v, kMaxValueBytes); });
    io.list("store_reply.versions", m.versions, kMaxKeys, [&](auto& v) { io.num("store_reply.version", v); });
    io.num("store_reply.number", m.number);
    io.num("store_reply.flag", m.flag);
    io.num("store_reply.delta_base", m.delta_base);
  }
};

}  // namespace dagsim::store
