#include "core/rendezvous/rendezvous_backend.h"

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::rendezvous {

namespace {

const std::shared_ptr<const RendezvousState>& empty_state() {
  static const std::shared_ptr<const RendezvousState> empty = std::make_shared<const RendezvousState>();
  return empty;
}

}  // namespace

RendezvousBackend::RendezvousBackend(store::Store& store, std::string run_id)
    : store_(store), run_id_(std::move(run_id)), key_(state_key(run_id_)) {
  DAGSIM_ASSERT(!run_id_.empty());
  cached_.state = empty_state();
}

template <typename F>
auto RendezvousBackend::guarded(const char* what, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    // PyTorch's RendezvousConnectionError: the caller learns the store failed, and which.
    if (e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed ||
        e.code() == ErrorCode::broken_promise) {
      throw errors::rendezvous_connection_failed("rendezvous run " + printable(run_id_, 80) + ": " + what + " of key " +
                                                 printable(key_, 120) + " failed: " + e.what());
    }
    throw;
  }
}

FetchedState RendezvousBackend::decoded(const store::Versioned& value) {
  if (value.version == 0) return {empty_state(), 0};
  if (value.version == cached_.token) return cached_;
  // Versions only rise: an older one than the cached can only come from a reply that was
  // overtaken by a newer one; it is decoded but does not evict the newer entry.
  RendezvousState state;
  try {
    state = decode(value.value);
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    throw errors::protocol_error("rendezvous run " + printable(run_id_, 80) + ": the state under key " +
                                 printable(key_, 120) + " (version " + std::to_string(value.version) +
                                 ") is corrupt: " + e.detail());
  }
  ++decodes_;
  FetchedState out{std::make_shared<const RendezvousState>(std::move(state)), value.version};
  if (value.version > cached_.token) cached_ = out;
  return out;
}

std::optional<FetchedState> RendezvousBackend::get_state() {
  const store::Versioned value = guarded("reading the state", [&] { return store_.get_versioned(key_); });
  if (value.version == 0) return std::nullopt;
  return decoded(value);
}

SetStateOutcome RendezvousBackend::set_state(const RendezvousState& state, Token token) {
  store::CasOutcome outcome =
      guarded("writing the state", [&] { return store_.compare_set_version(key_, token, encode(state)); });
  if (!outcome.written) return {decoded(outcome.current), false};
  // Our own bytes at the new version: the state we encoded is what they decode to (encode is
  // canonical), so the cache takes it without decoding.
  DAGSIM_ASSERT(outcome.current.version > token);
  FetchedState mine{std::make_shared<const RendezvousState>(state), outcome.current.version};
  if (mine.token > cached_.token) cached_ = mine;
  return {std::move(mine), true};
}

FetchedState RendezvousBackend::watch(Token token, runtime::Duration timeout) {
  DAGSIM_ASSERT(timeout >= runtime::Duration::zero());
  const store::Versioned value =
      guarded("watching the state", [&] { return store_.watch_at_most(key_, token, timeout); });
  return decoded(value);
}

}  // namespace dagsim::rendezvous
