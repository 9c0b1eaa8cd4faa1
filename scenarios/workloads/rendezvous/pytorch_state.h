// PyTorch 1.13's rendezvous state as its c10d backend stores it, read into dagsim's
// RendezvousState, so that `dagsim judge` can hold PyTorch's own elastic stack to the invariants
// (issue 24 item 6). The store key torch.rendezvous.<run_id> holds, in turn: the sentinel
// "Y2FuaW1hZGFt" (no state yet), then base64 of pickle.dumps(_RendezvousState). A dagsim handler
// on the same TCPStore writes its own canonical encoding there (rendezvous_state.h); both are read.
//
// Promises:
//  - No code runs and nothing is imported: this is a restricted unpickler that knows the opcodes
//    protocols 2-5 use for such a state, builds plain values, and accepts exactly three classes
//    (_RendezvousState, _NodeDesc, datetime.datetime, naive, as PyTorch's utcnow() writes them).
//    Any other global (os.system in a hostile pickle) is refused by name.
//  - Bounded: the input is at most kMaxStateBytes; every count comes from bytes already read, so a
//    value cannot ask for more memory than its own length; nesting is at most a few levels.
//  - A value that is not such a state throws protocol_error naming what is wrong, never a crash.
//  - Times: a datetime is PyTorch's naive UTC; it is returned as nanoseconds since the Unix epoch
//    less `origin`, the judge's time zero (the store's start).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/rendezvous/rendezvous_state.h"

namespace dagsim::scenarios {

inline constexpr size_t kMaxStateBytes = size_t{64} << 20;
// What PyTorch's C10dRendezvousBackend writes before any state exists.
inline constexpr std::string_view kPyTorchNullSentinel = "Y2FuaW1hZGFt";

// Nanoseconds since the Unix epoch of a civil UTC time (proleptic Gregorian).
int64_t unix_ns(int year, unsigned month, unsigned day, unsigned hour, unsigned minute, unsigned second,
                unsigned microsecond);

// The state in pickle.dumps(_RendezvousState) (the bytes, not their base64).
rendezvous::RendezvousState decode_pytorch_pickle(std::span<const uint8_t> pickle, int64_t origin_ns);

// What the state key holds, in whichever form: nullopt for PyTorch's sentinel, else the state
// (base64 of a pickle, as PyTorch's c10d backend writes, or dagsim's canonical encoding).
// `format` is set to "pytorch" or "dagsim".
std::optional<rendezvous::RendezvousState> decode_stored_state(std::span<const uint8_t> value, int64_t origin_ns,
                                                               std::string* format = nullptr);

}  // namespace dagsim::scenarios
