// A store wait's life: see store_wait.h.
#include "core/store/store_wait.h"

#include <string>

#include "core/base/assert.h"

namespace dagsim::store {

std::string_view wait_state_name(WaitState state) {
  switch (state) {
    case WaitState::pending: return "pending";
    case WaitState::satisfied: return "satisfied";
    case WaitState::timed_out: return "timed_out";
    case WaitState::cancelled: return "cancelled";
  }
  DAGSIM_UNREACHABLE();
}

void transition(WaitState& state, WaitState to, const WaitFacts& after) {
  DAGSIM_ASSERT_MSG(state == WaitState::pending && to != WaitState::pending,
                    "store wait " + std::string(wait_state_name(state)) + " -> " + std::string(wait_state_name(to)));
  switch (to) {
    case WaitState::pending:
      break;
    case WaitState::satisfied:
      DAGSIM_ASSERT(after.condition_holds);
      break;
    case WaitState::timed_out:
      DAGSIM_ASSERT(!after.condition_holds);
      DAGSIM_ASSERT(after.had_deadline);  // a wait without one cannot time out
      break;
    case WaitState::cancelled:
      // Its client left (or gave up): the condition may hold by now (a TCPStore connection that
      // closes while its wait's last key is being written), so only the leaving is asserted.
      DAGSIM_ASSERT(after.abandoned);
      break;
  }
  state = to;
}

}  // namespace dagsim::store
