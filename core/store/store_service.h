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
// Threading: the node's fibers (handlers run on them).
#pragma once

#include <functional>
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

 private:
  rpc::Bytes serve(const StoreRequest& request);
  // The request's deadline; throws invalid_argument for a negative timeout.
  runtime::TimePoint deadline(const StoreRequest& request, const std::string& what) const;

  // Versions of incarnation i start at i << 48 (KeyValueTable's constructor says why): 2^48 writes
  // per life.
  static constexpr int kIncarnationShift = 48;

  rpc::RpcAgent& agent_;
  KeyValueTable table_;
  uint64_t observer_id_ = 0;
};

// "[a, b, c]" for messages (at most the first 8 keys, then "and N more").
std::string key_list(const std::vector<std::string>& keys);

}  // namespace dagsim::store
