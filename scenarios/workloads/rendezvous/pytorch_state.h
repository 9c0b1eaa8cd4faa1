// PyTorch 1.13's rendezvous state as its c10d backend stores it, read into dagsim's
// RendezvousState, so that `dagsim judge` can hold PyTorch's own elastic stack to the invariants
// (issue 24 item 6). The store key torch.rendezvous.<run_id> holds, in turn: the sentinel
// "Y2FuaW1hZGFt" (no state yet), then base64 of pickle.dumps(_RendezvousState). A dagsim handler
// on the same TCPStore writes its own canonical encoding there (rendezvous_state.h); both are read.
//
// Promises:
//  - No code runs and nothing is imported: the pickle is read by the restricted unpickler
//    (restricted_unpickler.h), which accepts exactly three classes (_RendezvousState, _NodeDesc,
//    datetime.datetime, naive, as PyTorch's utcnow() writes them). Any other global (os.system in
//    a hostile pickle) is refused by name.
//  - Bounded: the input is at most kMaxStateBytes; the unpickler bounds the nesting, the memo and
//    the decoded size by the input's (restricted_unpickler.h), so a value cannot make its reader
//    build much more than its own length.
//  - A value that is not such a state throws protocol_error naming what is wrong, never a crash.
//  - Times: a datetime is PyTorch's naive UTC; it is returned as nanoseconds since the Unix epoch
//    less `origin`, the judge's time zero (the store's start); one too far from it to subtract
//    is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/rendezvous/rendezvous_state.h"
#include "scenarios/workloads/rendezvous/restricted_unpickler.h"

namespace dagsim::scenarios {

inline constexpr size_t kMaxStateBytes = size_t{64} << 20;
// What PyTorch's C10dRendezvousBackend writes before any state exists.
inline constexpr std::string_view kPyTorchNullSentinel = "Y2FuaW1hZGFt";

// The state in pickle.dumps(_RendezvousState) (the bytes, not their base64).
rendezvous::RendezvousState decode_pytorch_pickle(std::span<const uint8_t> pickle, int64_t origin_ns);

// What the state key holds, in whichever form: nullopt for PyTorch's sentinel, else the state
// (base64 of a pickle, as PyTorch's c10d backend writes, or dagsim's canonical encoding).
// `format` is set to "pytorch" or "dagsim".
std::optional<rendezvous::RendezvousState> decode_stored_state(std::span<const uint8_t> value, int64_t origin_ns,
                                                               std::string* format = nullptr);

}  // namespace dagsim::scenarios
