// StoreClient: a Store whose keys live in a StoreService on another node (or this one), reached
// through the node's RpcAgent. Each call is one request; waiting calls carry the store's timeout
// to the service, which answers timed_out itself, and the client gives the request that timeout
// plus kReplyGrace, so a store that died, was partitioned away or stopped answering fails the call
// with a clear error (connection_failed or timed_out, naming the store's node) soon after its
// timeout, never a hang. Errors the service raised (a bad request, a key that holds no integer) are
// rethrown with their code and text.
//
// Threading: calls block the calling node fiber.
#pragma once

#include <optional>

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

 private:
  StoreReply call(StoreOp op, std::vector<std::string> keys, std::vector<Bytes> values = {}, int64_t number = 0,
                  uint64_t version = 0, std::optional<Duration> waits = std::nullopt);
  static Versioned versioned(StoreReply& reply);

  rpc::RpcAgent& agent_;
  WorkerId store_node_;
};

}  // namespace dagsim::store
