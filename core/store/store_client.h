// StoreClient: a Store whose keys live in a StoreService on another node (or this one), reached
// through the node's RpcAgent. Each call is one request; waiting calls carry the store's timeout
// to the service, which answers timed_out itself, and the client gives the request that timeout
// plus kReplyGrace, so a store that died, was partitioned away or stopped answering fails the call
// with a clear error (connection_failed or timed_out, naming the store's node) soon after its
// timeout, never a hang. Errors the service raised (a bad request, a key that holds no integer) are
// rethrown with their code and text.
//
// Deltas (store_service.h): for each key it used with a versioned operation, the client holds the
// last value it saw or wrote (when large enough for a delta to pay, kMinDeltaBytes), names its
// version in the next versioned request, and rebuilds the value from a delta reply; a
// compare-and-set against the version it holds sends its value as a delta the same way. A request
// keeps the bytes it named alive until its reply, so concurrent calls on one key cannot pull them
// away. A delta that does not fit them throws protocol_error naming the key.
//
// Threading: calls block the calling node fiber.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/rpc/rpc_agent.h"
#include "core/store/store.h"
#include "core/store/store_messages.h"

namespace dagsim::store {

inline constexpr Duration kReplyGrace = std::chrono::seconds(1);

class StoreClient final : public Store {
 public:
  StoreClient(rpc::RpcAgent& agent, WorkerId store_node) : agent_(agent), store_node_(store_node) {}

  void set(const std::string& key, Bytes value) override;
  Bytes get(const std::string& key) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, Bytes desired) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) override;
  Versioned get_versioned(const std::string& key) override;
  CasOutcome compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) override;
  Versioned watch(const std::string& key, uint64_t known_version) override;
  Versioned watch_at_most(const std::string& key, uint64_t known_version, Duration timeout) override;

  WorkerId store_node() const { return store_node_; }
  // Bytes of values the store's replies carried, as sent (deltas as deltas), all operations.
  uint64_t value_bytes_received() const { return value_bytes_received_; }
  // Bytes of values this client's requests carried (deltas as deltas), and of the values its
  // compare-and-sets wrote, whole.
  uint64_t value_bytes_sent() const { return value_bytes_sent_; }
  uint64_t cas_value_bytes() const { return cas_value_bytes_; }

 private:
  StoreReply call(StoreOp op, std::vector<std::string> keys, std::vector<Bytes> values = {}, int64_t number = 0,
                  uint64_t version = 0, std::optional<Duration> waits = std::nullopt, uint64_t base = 0,
                  uint64_t value_base = 0);
  static Versioned versioned(StoreReply& reply);
  // A versioned operation on `key`: sends the version the client holds as the request's base,
  // rebuilds a delta reply, and holds what it returns. `written` gets a compare-and-set's
  // answer (a reply that wrote carries no value: it is the one sent).
  Versioned versioned_call(StoreOp op, const std::string& key, std::vector<Bytes> values, int64_t number,
                           uint64_t version, std::optional<Duration> waits, bool* written = nullptr);

  rpc::RpcAgent& agent_;
  WorkerId store_node_;
  std::map<std::string, std::shared_ptr<const Versioned>> held_;
  uint64_t value_bytes_received_ = 0;
  uint64_t value_bytes_sent_ = 0;
  uint64_t cas_value_bytes_ = 0;
};

}  // namespace dagsim::store
