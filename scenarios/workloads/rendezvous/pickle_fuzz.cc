// scenarios/workloads/rendezvous/pickle_fuzz.cc: the libFuzzer target for the pickle reader of
// `dagsim judge` (restricted_unpickler.h, and pytorch_state.h reading its values as a state),
// built and run by scripts/fuzz.sh (target "pickle"). Any client of a store may write the pickle,
// so the reader trusts nothing. It promises to report (abort, so libFuzzer saves the input) any
// of:
//  - unpickle, decode_pytorch_pickle or decode_stored_state throwing anything but
//    Error(protocol_error), or crashing, leaking, overflowing its stack, or tripping ASan, UBSan or
//    an assert, on any bytes;
//  - a message holding a control character (every name a pickle chose goes through printable());
//  - a value read past the header's bounds: deeper than kMaxPickleDepth, a decoded size past
//    decoded_budget(input), or a container whose counted size is less than its items';
//  - a state read whose node names are longer than a host name.
// Input: the pickle's bytes. An input whose byte 0 is 0x00 (no pickle opcode) is instead what the
// state key holds, after that byte: base64 of a pickle, PyTorch's sentinel, or dagsim's own
// encoding.
#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "scenarios/workloads/rendezvous/pytorch_state.h"
#include "scenarios/workloads/rendezvous/restricted_unpickler.h"

namespace {

using namespace dagsim;
using namespace dagsim::scenarios;

constexpr std::string_view kModule = "torch.distributed.elastic.rendezvous.dynamic_rendezvous";
constexpr PickleAllowedGlobal kAllowed[] = {{kModule, "_RendezvousState"}, {kModule, "_NodeDesc"}};

void check_message(const Error& e) {
  if (e.code() != ErrorCode::protocol_error) net::fuzz::fail("threw another error than protocol_error", e.what());
  for (const char c : e.detail()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) net::fuzz::fail("a control character in a message", e.what());
  }
}

// Every value within the bounds, its size at least its items' (so the budget counted them).
size_t check_value(const PickleValue& v, uint32_t depth_left) {
  DAGSIM_FUZZ_CHECK(v.depth <= kMaxPickleDepth);
  size_t items = 0;
  const auto item = [&](const PickleRef& r) {
    DAGSIM_FUZZ_CHECK(r != nullptr && r->placed);
    DAGSIM_FUZZ_CHECK(r->depth < v.depth);
    items += depth_left > 0 ? check_value(*r, depth_left - 1) : r->size;
  };
  if (const auto* list = std::get_if<PickleItems>(&v.v)) {
    for (const PickleRef& r : *list) item(r);
  } else if (const auto* dict = std::get_if<PickleDict>(&v.v)) {
    for (const auto& [k, x] : *dict) {
      item(k);
      item(x);
    }
  } else if (const auto* object = std::get_if<PickleObject>(&v.v)) {
    for (const auto& [name, x] : object->attrs) item(x);
  }
  DAGSIM_FUZZ_CHECK(v.size >= items);
  return v.size;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  if (size > 0 && data[0] == 0x00) {
    try {
      const auto state = decode_stored_state(in.subspan(1), 1'700'000'000'000'000'000);
      if (state) {
        for (const auto& [node, rank] : state->participants) DAGSIM_FUZZ_CHECK(node.addr.size() <= rendezvous::kMaxNodeAddr);
      }
    } catch (const Error& e) {
      check_message(e);
    }
    return 0;
  }
  try {
    size_t decoded = 0;
    const PickleRef root = unpickle(in, kAllowed, &decoded);
    DAGSIM_FUZZ_CHECK(decoded <= decoded_budget(size));
    // Walked to a bounded depth (the reader's own bound is what is under test), items beyond it
    // counted by their sizes.
    DAGSIM_FUZZ_CHECK(check_value(*root, 8) <= decoded_budget(size));
  } catch (const Error& e) {
    check_message(e);
  }
  try {
    const rendezvous::RendezvousState s = decode_pytorch_pickle(in, 0);
    for (const auto& [node, hb] : s.last_heartbeats) DAGSIM_FUZZ_CHECK(node.addr.size() <= rendezvous::kMaxNodeAddr);
  } catch (const Error& e) {
    check_message(e);
  }
  return 0;
}
