// A store wait's life (issue 52, item 4): one state and one asserted transition for every wait a
// built-in store serves (KeyValueTable::wait_for_keys for get / wait / multi_get, and
// wait_for_change for watch; net/tcpstore's TCPStore server waits through the same table).
//
//   pending --the keys are there / the version moved--> satisfied
//   pending --its deadline passed first-------------> timed_out
//   pending --its client left or gave up (abandon())--> cancelled
//
// Each end is final, and the transition asserts what the end means, read under the table's
// mutex: satisfied only with the condition holding, timed_out only without it and only for a
// wait that had a deadline, cancelled only when its client left or gave up. A wait unwound by its node's death or its
// fiber's cancellation (an exception from block_until) ends pending: nobody reads it then.
#pragma once

#include <cstdint>
#include <string_view>

namespace dagsim::store {

enum class WaitState : uint8_t { pending, satisfied, timed_out, cancelled };

// What holds when a wait ends, for transition()'s postconditions.
struct WaitFacts {
  bool condition_holds = false;  // every key present, or the key's version moved
  bool had_deadline = false;
  bool abandoned = false;        // its abandon() held
};

std::string_view wait_state_name(WaitState state);

// Ends a pending wait. REQUIRES: `state` is pending, `to` is not, and `after` fits `to`.
void transition(WaitState& state, WaitState to, const WaitFacts& after);

}  // namespace dagsim::store
