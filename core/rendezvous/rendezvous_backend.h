// RendezvousBackend: one rendezvous run's shared state on a Store, under one key
// ("torch.rendezvous.<run_id>"), in the role of PyTorch's C10dRendezvousBackend
// (shared/reference/rendezvous.md §1 "Backends"). The state holder reads and writes through it.
//
// Promises:
//  - The token is the key's version in the store (store.h), never the state blob: set_state()
//    writes with compare_set_version(key, token, ...), so a stale token never writes (S1), and two
//    writers with the same token cannot both win, even with identical bytes (PyTorch compares the
//    bytes, so identical concurrent writes both "win" there).
//  - Token 0 means "no state yet": the first writer creates the key with it. PyTorch needs a
//    sentinel value for that; get_versioned never blocks, so no sentinel is written here.
//  - Decoding is cached by version (Note [decoded state cache]): a node that reads a version it
//    already holds, or that it wrote itself, does not decode it again.
//  - Errors: a store that fails (timed_out, connection_failed, broken_promise) throws
//    rendezvous_connection_failed naming the run, the key and the store's own words; a value that
//    does not decode throws protocol_error naming the run, the key and the field (PyTorch's
//    RendezvousStateError). An error that unwinds the fiber (node death, cancellation) passes
//    through untouched.
//
// Note [decoded state cache]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The backend keeps exactly one entry: the last version it saw (read or wrote) and the
// state decoded from it, shared read-only (shared_ptr<const>). Versions only rise, and a node only
// ever asks about the newest version it can see, so older entries would never be hit again: one
// entry bounds the memory to one state per node whatever the churn. With N nodes each reading each
// version once, a version is decoded at most once per node (N decodes, not N per read); a writer
// decodes nothing for the version it wrote, since it holds the state it encoded.
//
// Below that cache, one pool per OS thread interns decoded states by their bytes: a backend that
// misses its own cache takes the state another backend of the same thread decoded from the same
// bytes, while any of them still holds it. decode() is a pure function of the bytes and the state
// is immutable, so sharing changes nothing any node observes; it only spares the simulator, whose
// thousand nodes share one thread, decoding every version a thousand times (and freeing it as
// often): at 1,000 nodes that was two thirds of a formation's wall time. Over TCP a thread holds
// one node and the pool holds what its cache holds. decodes() still counts this backend's misses.
//
// Threading: the calling node's fibers; calls block on the store.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/rendezvous/rendezvous_state.h"
#include "core/store/store.h"

namespace dagsim::rendezvous {

// The store key one run's state lives under: PyTorch's "torch.rendezvous.<run_id>".
inline std::string state_key(const std::string& run_id) { return "torch.rendezvous." + run_id; }
// The key a node bumps after a decisive write (Note [decisive changes] in rendezvous_executor.h),
// which waiters watch instead of the state. No run's state key can spell it ('_' after
// "torch.rendezvous", not '.').
inline std::string changes_key(const std::string& run_id) { return "torch.rendezvous_changes." + run_id; }

// A version of the state key: what a compare-and-set must name to write. 0: no state yet.
using Token = uint64_t;

// One version of the shared state, decoded.
struct FetchedState {
  std::shared_ptr<const RendezvousState> state;  // never null
  Token token = 0;
};

struct SetStateOutcome {
  FetchedState current;  // the key after the call: ours if written, else whoever won
  bool written = false;
};

class RendezvousBackend {
 public:
  // REQUIRES: run_id is not empty (settings were validated). `store` outlives this.
  RendezvousBackend(store::Store& store, std::string run_id);

  const std::string& run_id() const { return run_id_; }
  const std::string& key() const { return key_; }
  store::Store& store() { return store_; }

  // The state now and its token; nullopt while no node has written one. Never waits.
  std::optional<FetchedState> get_state();

  // Writes `state` if the key's version is still `token`. Either way returns the key as it is
  // after the call (an empty state with token 0 if the key is absent).
  SetStateOutcome set_state(const RendezvousState& state, Token token);
  // The same, for a state already shared (the holder's copy): a write that lands caches it as it
  // is instead of a copy. REQUIRES: state is not null.
  SetStateOutcome set_state(std::shared_ptr<const RendezvousState> state, Token token);

  // The changes key (Note [decisive changes]): its version now (0: never bumped), waiting until
  // it differs from `known` or `timeout` passes, and bumping it.
  uint64_t changes_version();
  uint64_t watch_changes(uint64_t known, runtime::Duration timeout);
  void announce_change();

  // How many times this backend decoded a state (for the cache's tests and benchmarks).
  uint64_t decodes() const { return decodes_; }

 private:
  // The state a versioned value holds, from the cache when its version is the cached one.
  FetchedState decoded(const store::Versioned& value);
  // Runs a store call, turning store failures into rendezvous_connection_failed.
  template <typename F>
  auto guarded(const char* what, const std::string& key, F&& call) -> decltype(call());

  store::Store& store_;
  const std::string run_id_;
  const std::string key_;
  const std::string changes_key_;
  FetchedState cached_;  // see Note [decoded state cache]; token 0 until the first version is seen
  uint64_t decodes_ = 0;
};

}  // namespace dagsim::rendezvous
