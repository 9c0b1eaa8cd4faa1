#include "core/rendezvous/rendezvous_backend.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/base/assert.h"
#include "core/base/buggify.h"
#include "core/base/probe.h"
#include "core/base/error.h"
#include "core/base/hash.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::rendezvous {

namespace {

const std::shared_ptr<const RendezvousState>& empty_state() {
  static const std::shared_ptr<const RendezvousState> empty = std::make_shared<const RendezvousState>();
  return empty;
}

// Note [decoded state cache]'s pool: decoded states by their bytes, while someone holds them.
// Iteration order never matters (it only sweeps out expired entries).
struct PoolEntry {
  std::vector<uint8_t> bytes;
  std::weak_ptr<const RendezvousState> state;
};
thread_local std::unordered_multimap<size_t, PoolEntry> t_pool;
thread_local size_t t_sweep_at = 64;
// The state this thread decoded last, while someone holds it: the next decode shares its chunks
// (chunked_sorted.h). Versions arrive in about the order they were written, so the last one is
// a join or two away from the next.
thread_local std::weak_ptr<const RendezvousState> t_last_decoded;

std::shared_ptr<const RendezvousState> pooled_decode(std::span<const uint8_t> bytes) {
  // XXH3: a 100 KB state hashes at memory speed (std::hash's was a visible cost at 1,000 nodes).
  const size_t hash = xxh3_64(bytes);
  const auto [first, last] = t_pool.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (!std::ranges::equal(it->second.bytes, bytes)) continue;
    if (std::shared_ptr<const RendezvousState> held = it->second.state.lock()) return held;
  }
  const std::shared_ptr<const RendezvousState> base = t_last_decoded.lock();
  auto state = std::make_shared<const RendezvousState>(decode(bytes, base.get()));
  t_last_decoded = state;
  if (t_pool.size() >= t_sweep_at) {
    std::erase_if(t_pool, [](const auto& entry) { return entry.second.state.expired(); });
    t_sweep_at = std::max<size_t>(64, 2 * t_pool.size());
  }
  t_pool.emplace(hash, PoolEntry{std::vector<uint8_t>(bytes.begin(), bytes.end()), state});
  return state;
}

}  // namespace

RendezvousBackend::RendezvousBackend(store::Store& store, std::string run_id)
    : store_(store), run_id_(std::move(run_id)), key_(state_key(run_id_)), changes_key_(changes_key(run_id_)) {
  DAGSIM_ASSERT(!run_id_.empty());
  cached_.state = empty_state();
}

template <typename F>
auto RendezvousBackend::guarded(const char* what, const std::string& key, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    // PyTorch's RendezvousConnectionError: the caller learns the store failed, and which.
    if (e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed ||
        e.code() == ErrorCode::broken_promise) {
      DAGSIM_PROBE("rendezvous.store_call_failed");
      throw errors::rendezvous_connection_failed("rendezvous run " + printable(run_id_, 80) + ": " + what + " of key " +
                                                 printable(key, 120) + " failed: " + e.what());
    }
    throw;
  }
}

FetchedState RendezvousBackend::decoded(const store::Versioned& value) {
  if (value.version == 0) return {empty_state(), 0};
  if (value.version == cached_.token) {
    DAGSIM_ASSERT(cached_.state != nullptr);
    return cached_;
  }
  // Versions only rise: an older one than the cached can only come from a reply that was
  // overtaken by a newer one; it is decoded but does not evict the newer entry.
  std::shared_ptr<const RendezvousState> state;
  try {
    state = pooled_decode(value.value);
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    DAGSIM_PROBE("rendezvous.corrupt_state_read");
    throw errors::protocol_error("rendezvous run " + printable(run_id_, 80) + ": the state under key " +
                                 printable(key_, 120) + " (version " + std::to_string(value.version) +
                                 ") is corrupt: " + e.detail());
  }
  ++decodes_;
  if (value.version < cached_.token) DAGSIM_PROBE("rendezvous.reply_older_than_cached");
  FetchedState out{std::move(state), value.version};
  if (value.version > cached_.token) cached_ = out;
  // The cache holds the newest version this backend has seen, read or written.
  DAGSIM_ASSERT(cached_.token >= out.token);
  DAGSIM_ASSERT_EQ(out.token, value.version);
  return out;
}

std::optional<FetchedState> RendezvousBackend::get_state() {
  const store::Versioned value = guarded("reading the state", key_, [&] { return store_.get_versioned(key_); });
  if (value.version == 0) return std::nullopt;
  return decoded(value);
}

SetStateOutcome RendezvousBackend::set_state(const RendezvousState& state, Token token) {
  return set_state(std::make_shared<const RendezvousState>(state), token);
}

SetStateOutcome RendezvousBackend::set_state(std::shared_ptr<const RendezvousState> shared, Token token) {
  DAGSIM_ASSERT(shared != nullptr);
  const RendezvousState& state = *shared;
  if (DAGSIM_BUGGIFY("rendezvous.cas_answered_lost")) {
    // A lost race without the write: nothing of this node's state lands and the store's current
    // state comes back, as PyTorch's set_state answers has_set = False. The holder decides afresh
    // on what it gets, as after any lost race (and when the state did not change, retries).
    const store::Versioned now = guarded("reading the state", key_, [&] { return store_.get_versioned(key_); });
    return {decoded(now), false};
  }
  store::CasOutcome outcome =
      guarded("writing the state", key_, [&] { return store_.compare_set_version(key_, token, encode(state)); });
  if (!outcome.written) {
    // The token was stale (someone wrote since this node read: the holder's lost_cas), or from a
    // store that has since lost the state. Refused, the store answers with what it holds now;
    // nothing of this node's write landed (S1).
    if (outcome.current.version < token) DAGSIM_PROBE("rendezvous.token_ahead_of_store_refused");
    if (outcome.current.version == 0) DAGSIM_PROBE("rendezvous.write_refused_on_missing_key");
    return {decoded(outcome.current), false};
  }
  // Our own bytes at the new version: the state we encoded is what they decode to (encode is
  // canonical), so the cache takes it without decoding.
  // The version comes from the store (etcd or a TCPStore over the network): a store that says it
  // wrote at a version not past the token broke its contract, which is its error, not an assert.
  if (outcome.current.version <= token) {
    throw errors::protocol_error("rendezvous run " + printable(run_id_, 80) + ": the store says it wrote key " +
                                 printable(key_, 120) + " at version " + std::to_string(outcome.current.version) +
                                 ", not past the version " + std::to_string(token) + " it replaced (a faulty store)");
  }
  FetchedState mine{std::move(shared), outcome.current.version};
  if (mine.token > cached_.token) cached_ = mine;
  DAGSIM_ASSERT(cached_.token >= mine.token);
  DAGSIM_ASSERT(mine.token > token);
  return {std::move(mine), true};
}

uint64_t RendezvousBackend::changes_version() {
  return guarded("reading the changes", changes_key_, [&] { return store_.get_versioned(changes_key_).version; });
}

uint64_t RendezvousBackend::watch_changes(uint64_t known, runtime::Duration timeout) {
  DAGSIM_ASSERT(timeout >= runtime::Duration::zero());
  return guarded("watching the changes", changes_key_, [&] { return store_.watch_at_most(changes_key_, known, timeout).version; });
}

void RendezvousBackend::announce_change() {
  guarded("announcing a change", changes_key_, [&] { return store_.add(changes_key_, 1); });
}

}  // namespace dagsim::rendezvous
