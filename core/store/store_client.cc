#include "core/store/store_client.h"

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/store/held_values.h"
#include "core/store/value_delta.h"

namespace dagsim::store {

StoreReply StoreClient::call(StoreOp op, std::vector<std::string> keys, std::vector<Bytes> values, int64_t number,
                             uint64_t version, std::optional<Duration> waits, uint64_t base, uint64_t value_base) {
  StoreRequest request;
  request.op = static_cast<uint8_t>(op);
  request.keys = std::move(keys);
  request.values = std::move(values);
  request.number = number;
  request.version = version;
  request.timeout_ns = waits ? waits->count() : 0;
  request.base = base;
  request.value_base = value_base;
  for (const Bytes& v : request.values) value_bytes_sent_ += v.size();
  // A waiting request gets its wait and then some, so the store's own timed_out, which names the
  // keys, arrives first; any other request gets the store's timeout.
  const Duration rpc_timeout = waits ? *waits + kReplyGrace : timeout();
  const std::string what = std::string("store ") + store_op_name(op) + " on node " + std::to_string(store_node_);
  Bytes reply = agent_.request_bytes(store_node_, kStoreRequest, rpc::to_bytes(request), rpc_timeout, what).get();
  StoreReply r = rpc::from_bytes<StoreReply>(reply);
  for (const Bytes& v : r.values) value_bytes_received_ += v.size();
  return r;
}

Versioned StoreClient::versioned_call(StoreOp op, const std::string& key, std::vector<Bytes> values, int64_t number,
                                      uint64_t version, std::optional<Duration> waits, bool* written) {
  std::shared_ptr<const Versioned> held;
  if (const auto it = held_.find(key); it != held_.end()) held = it->second;
  // A compare-and-set that writes answers no value: keep the one sent. Its value goes as a delta
  // against the expected version when this client holds that version's bytes and the edits are
  // under half the value (a rendezvous state rewritten by one join).
  std::optional<Bytes> sent;
  uint64_t value_base = 0;
  if (op == StoreOp::compare_set_version) {
    const Bytes& value = values.at(0);
    cas_value_bytes_ += value.size();
    if (held && held->version == version && version != 0 && value.size() >= kMinDeltaBytes) {
      if (std::optional<Bytes> d = make_delta(held->value, value, value.size() / 2)) {
        // The whole value stays here and the delta goes: no copy of a state per attempt.
        sent = std::move(values[0]);
        values[0] = std::move(*d);
        value_base = version;
      }
    }
    if (!sent) sent = values[0];
  }
  StoreReply r = call(op, {key}, std::move(values), number, version, waits, held ? held->version : 0, value_base);
  if (written != nullptr) *written = r.flag;
  Versioned out;
  if (sent && r.flag) {
    if (r.versions.size() != 1 || !r.values.empty()) {
      throw errors::protocol_error("store reply to compare_set_version that wrote: expected one version, no value");
    }
    out = {std::move(*sent), r.versions[0]};
  } else if (r.delta_base != 0) {
    if (!held || held->version != r.delta_base || r.values.size() != 1 || r.versions.size() != 1) {
      throw errors::protocol_error("store reply for key " + printable(key, 120) + ": a delta against version " +
                                   std::to_string(r.delta_base) + ", but the request named version " +
                                   std::to_string(held ? held->version : 0));
    }
    try {
      out = {apply_delta(held->value, r.values[0], kMaxValueBytes), r.versions[0]};
    } catch (const Error& e) {
      throw errors::protocol_error("store reply for key " + printable(key, 120) + ": " + e.detail());
    }
  } else {
    out = versioned(r);
  }
  // Hold the newest version seen (an older reply, overtaken by a concurrent call's, changes
  // nothing); a key gone or too small for deltas holds nothing.
  const auto it = held_.find(key);
  if (it == held_.end() || out.version == 0 || it->second->version < out.version) {
    if (out.version != 0 && out.value.size() >= kMinDeltaBytes) {
      held_[key] = HeldValues::for_this_thread().intern(out);
    } else if (it != held_.end()) {
      held_.erase(it);
    }
  }
  return out;
}

Versioned StoreClient::versioned(StoreReply& reply) {
  if (reply.values.size() != 1 || reply.versions.size() != 1) {
    throw errors::protocol_error("store reply: expected one value and one version");
  }
  return {std::move(reply.values[0]), reply.versions[0]};
}

void StoreClient::set(const std::string& key, Bytes value) { call(StoreOp::set, {key}, {std::move(value)}); }

Bytes StoreClient::get(const std::string& key) {
  StoreReply r = call(StoreOp::get, {key}, {}, 0, 0, timeout());
  if (r.values.size() != 1) throw errors::protocol_error("store reply to get: expected one value");
  return std::move(r.values[0]);
}

Bytes StoreClient::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  StoreReply r = call(StoreOp::compare_set, {key}, {expected, std::move(desired)});
  if (r.values.size() != 1) throw errors::protocol_error("store reply to compare_set: expected one value");
  return std::move(r.values[0]);
}

int64_t StoreClient::add(const std::string& key, int64_t delta) { return call(StoreOp::add, {key}, {}, delta).number; }

void StoreClient::wait(const std::vector<std::string>& keys) { call(StoreOp::wait, keys, {}, 0, 0, timeout()); }

bool StoreClient::check(const std::vector<std::string>& keys) { return call(StoreOp::check, keys).flag; }

bool StoreClient::delete_key(const std::string& key) { return call(StoreOp::delete_key, {key}).flag; }

int64_t StoreClient::num_keys() { return call(StoreOp::num_keys, {}).number; }

std::vector<Bytes> StoreClient::multi_get(const std::vector<std::string>& keys) {
  StoreReply r = call(StoreOp::multi_get, keys, {}, 0, 0, timeout());
  if (r.values.size() != keys.size()) throw errors::protocol_error("store reply to multi_get: one value per key expected");
  return std::move(r.values);
}

void StoreClient::multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) {
  if (keys.size() != values.size()) throw errors::invalid_argument("store multi_set: as many values as keys are needed");
  call(StoreOp::multi_set, keys, std::move(values));
}

Versioned StoreClient::get_versioned(const std::string& key) {
  return versioned_call(StoreOp::get_versioned, key, {}, 0, 0, std::nullopt);
}

CasOutcome StoreClient::compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) {
  bool written = false;
  Versioned current =
      versioned_call(StoreOp::compare_set_version, key, {std::move(desired)}, 0, expected_version, std::nullopt, &written);
  return {written, std::move(current)};
}

Versioned StoreClient::watch(const std::string& key, uint64_t known_version) {
  return versioned_call(StoreOp::watch, key, {}, 0, known_version, timeout());
}

Versioned StoreClient::watch_at_most(const std::string& key, uint64_t known_version, Duration timeout) {
  if (timeout < Duration::zero()) throw errors::invalid_argument("store watch_at_most: negative timeout");
  return versioned_call(StoreOp::watch, key, {}, kWatchQuietly, known_version, timeout);
}

}  // namespace dagsim::store
