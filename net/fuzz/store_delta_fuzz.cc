// net/fuzz/store_delta_fuzz.cc: the libFuzzer target for core/store/value_delta.{h,cc}, the
// deltas a StoreClient rebuilds store values from (a store's reply, so bytes from the network),
// built and run by scripts/fuzz.sh. It promises to report (abort, so libFuzzer saves the input)
// any of:
//  - apply_delta on any bytes against any base throwing anything but protocol_error, crashing,
//    leaking, tripping ASan, UBSan or a DAGSIM_ASSERT, or building more than its limit;
//  - make_delta(base, target) not turning base into exactly target when applied;
//  - make_delta under a size limit returning a delta over it, or one that does not apply;
//  - a delta much longer than its target, or make_delta(x, x) costing more than a length and one
//    copy.
//
// Input layout: byte 0 picks the limit apply_delta runs under (0: 16 MiB, else 2^(byte & 15));
// u16 the length of `base`; then base; the rest is `other`, tried both as a delta against base
// and as a target to make a delta to.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "core/base/error.h"
#include "core/store/value_delta.h"
#include "net/fuzz/fuzz_util.h"

namespace dagsim::net::fuzz {
namespace {

constexpr size_t kProductionLimit = size_t{16} << 20;

void check_apply(std::span<const uint8_t> base, std::span<const uint8_t> delta, size_t limit) {
  try {
    const runtime::Bytes out = store::apply_delta(base, delta, limit);
    DAGSIM_FUZZ_CHECK(out.size() <= limit);
    if (tracing()) std::fprintf(stderr, "applied: %zu bytes\n", out.size());
  } catch (const Error& e) {
    if (e.code() != ErrorCode::protocol_error) fail("apply_delta threw other than protocol_error", e.what());
    if (tracing()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
}

void check_make(std::span<const uint8_t> base, std::span<const uint8_t> target) {
  const std::optional<runtime::Bytes> delta = store::make_delta(base, target);
  DAGSIM_FUZZ_CHECK(delta.has_value());
  const runtime::Bytes rebuilt = store::apply_delta(base, *delta, kProductionLimit);
  DAGSIM_FUZZ_CHECK(std::ranges::equal(rebuilt, target));
  // Never much longer than the target: every copy (16 bytes or more, or the tail) costs less than
  // the bytes it stands for, give or take the tail's, and each literal run one op header.
  DAGSIM_FUZZ_CHECK(delta->size() <= target.size() + 24);
  const size_t limit = target.size() / 2;
  if (const std::optional<runtime::Bytes> small = store::make_delta(base, target, limit)) {
    DAGSIM_FUZZ_CHECK(small->size() <= limit);
    DAGSIM_FUZZ_CHECK(std::ranges::equal(store::apply_delta(base, *small, kProductionLimit), target));
  }
  const std::optional<runtime::Bytes> same = store::make_delta(target, target);
  DAGSIM_FUZZ_CHECK(same.has_value() && same->size() <= 12);
}

}  // namespace
}  // namespace dagsim::net::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim::net::fuzz;
  FuzzInput in(data, size);
  const uint8_t limit_byte = in.u8();
  const size_t limit = limit_byte == 0 ? kProductionLimit : size_t{1} << (limit_byte & 15);
  // Each in a buffer of its own, so a read one byte past either is ASan's, not the next field's.
  const std::span<const uint8_t> base_bytes = in.take(in.u16());
  const dagsim::runtime::Bytes base(base_bytes.begin(), base_bytes.end());
  const std::span<const uint8_t> other_bytes = in.rest();
  const dagsim::runtime::Bytes other(other_bytes.begin(), other_bytes.end());
  check_apply(base, other, limit);
  check_make(base, other);
  return 0;
}
