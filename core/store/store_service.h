// StoreService: the built-in store (issue 11), a service on one node's RpcAgent, reachable only
// over the transport, so its death or a partition affects its clients as in life. It holds the
// keys in memory (a KeyValueTable, which dies with the node's incarnation) and serves StoreRequest
// payloads (store_messages.h) with the semantics of store.h; StoreClient is its client.
//
// Waiting operations (get, wait, multi_get, watch) block their handler fiber until the keys are
// there (or the watched key changed), or the request's timeout passes: then the reply is an
// Error(timed_out) naming the keys, which the client rethrows. Every write wakes every waiter, which
// re-checks its own condition (waiters are few: one per rendezvous participant).
//
// Deltas: a versioned request (get_versioned, compare_set_version, watch) names the version whose
// bytes the client holds; when the table still has them (Note [value history]) and the edits
// since are less than half the value, the reply carries the delta instead of the value
// (value_delta.h). A compare-and-set that wrote answers its new version only; its value may come
// as a delta against the expected version, which the store holds when the write can land. Many
// clients ask for the same delta at once (every waiter woken by one write holds the same
// version), so the last few deltas made are kept and served again.
//
// Threading: the node's fibers (handlers run on them).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "core/rpc/rpc_agent.h"
#include "core/store/key_value_table.h"
#include "core/store/store.h"
#include "core/store/store_messages.h"

namespace dagsim::store {

class StoreService {
 public:
  // Registers the store's handler on `agent` (before or after start()). `agent` outlives this.
  explicit StoreService(rpc::RpcAgent& agent);

  // Called after every write of a key with its new value and version (0: deleted), before any
  // waiter wakes: what a workload records as the store's committed history (rendezvous's S1
  // checker reads the state key's versions from it). Must not block.
  using WriteObserver = std::function<void(const std::string& key, const Versioned& now)>;
  void set_write_observer(WriteObserver observer);

  size_t size() const { return table_.size(); }
  uint64_t revision() const { return table_.revision(); }
  // Versioned replies sent as a delta, and deltas computed (the rest came from the cache).
  uint64_t deltas_sent() const { return deltas_sent_; }
  uint64_t deltas_made() const { return deltas_made_; }
  // Compare-and-sets whose value came as a delta and was rebuilt (the version was current).
  uint64_t deltas_received() const { return deltas_received_; }

 private:
  rpc::Bytes serve(const StoreRequest& request);
  // The request's deadline; throws invalid_argument for a negative timeout.
  runtime::TimePoint deadline(const StoreRequest& request, const std::string& what) const;
  // The delta from version `base` of `key` to its value `now` at `version`, when it is worth
  // sending; else nullptr.
  std::shared_ptr<const rpc::Bytes> delta(const std::string& key, uint64_t base, uint64_t version, const Bytes& now);

  // Versions of incarnation i start at i << 48 (KeyValueTable's constructor says why): 2^48 writes
  // per life.
  static constexpr int kIncarnationShift = 48;

  rpc::RpcAgent& agent_;
  KeyValueTable table_;
  uint64_t observer_id_ = 0;
  struct MadeDelta {
    std::string key;
    uint64_t base = 0;
    uint64_t version = 0;
    std::shared_ptr<const rpc::Bytes> delta;  // null: not worth sending
  };
  std::array<MadeDelta, 16> made_{};  // filled round robin
  size_t next_made_ = 0;
  uint64_t deltas_sent_ = 0;
  uint64_t deltas_made_ = 0;
  uint64_t deltas_received_ = 0;
};

// "[a, b, c]" for messages (at most the first 8 keys, then "and N more").
std::string key_list(const std::vector<std::string>& keys);

}  // namespace dagsim::store
