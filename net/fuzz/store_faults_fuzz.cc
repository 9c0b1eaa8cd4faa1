// net/fuzz/store_faults_fuzz.cc: the libFuzzer target for net/tcpstore/store_faults.{h,cc}, the
// reader of the fault file `dagsim store --faults FILE` reads again on every SIGUSR1 (whoever can
// write the file chose its bytes), built and run by scripts/fuzz.sh (target "store_faults"). It
// promises to report (abort, so libFuzzer saves the input) any of:
//  - parse_store_faults throwing anything but Error(invalid_argument), or crashing, leaking, or
//    tripping ASan, UBSan or an assert, on any bytes;
//  - rules it accepts that break the header's bounds: more than kMaxFaultRules, a probability
//    outside [0, 1], a delay outside 1 .. kMaxFaultDelayMs for a delay (or any for another kind),
//    a query bit past the last query type;
//  - deciding a query of any type under the accepted rules crashing, or hitting with a rule that
//    does not match it or has probability 0.
// Input: the file's text.
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "net/tcpstore/store_faults.h"

namespace {

using namespace dagsim;
using namespace dagsim::net::tcpstore;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<StoreFaultRule> rules;
  try {
    rules = parse_store_faults(text);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) net::fuzz::fail("threw another error than invalid_argument", e.what());
    if (net::fuzz::tracing()) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  DAGSIM_FUZZ_CHECK(rules.size() <= kMaxFaultRules);
  for (const StoreFaultRule& r : rules) {
    DAGSIM_FUZZ_CHECK(r.probability >= 0 && r.probability <= 1);
    DAGSIM_FUZZ_CHECK((r.ops >> (kLastQueryType + 1)) == 0);
    if (r.kind == StoreFaultRule::Kind::delay) {
      DAGSIM_FUZZ_CHECK(r.delay.count() >= 1 && r.delay.count() <= kMaxFaultDelayMs);
    } else {
      DAGSIM_FUZZ_CHECK(r.delay.count() == 0);
    }
  }
  if (net::fuzz::tracing()) std::fprintf(stderr, "accepted %zu rule(s)\n", rules.size());
  StoreFaults faults(size);
  faults.set(rules);
  for (int round = 0; round < 4; ++round) {
    for (uint8_t t = 0; t <= kLastQueryType; ++t) {
      const QueryType type = static_cast<QueryType>(t);
      if (const FaultDecision hit = faults.decide(type)) {
        DAGSIM_FUZZ_CHECK(hit.rule->matches(type));
        DAGSIM_FUZZ_CHECK(hit.rule->probability > 0);
      }
    }
  }
  return 0;
}
