#include "core/rendezvous/rendezvous_ops.h"

#include "core/base/assert.h"
#include "core/base/probe.h"

namespace dagsim::rendezvous {

namespace {

// PyTorch's _mark_rendezvous_complete: ranks 0..n-1 in node order (S2). The map iterates in
// node order, which is the order PyTorch's sorted() gives.
void mark_complete(RendezvousState& state) {
  DAGSIM_ASSERT(!state.complete);
  DAGSIM_ASSERT(!state.participants.empty());
  state.complete = true;
  state.deadline.reset();  // S4
  uint32_t rank = 0;
  for (auto& [node, node_rank] : state.participants) node_rank = rank++;
  DAGSIM_ASSERT_EQ(size_t{rank}, state.participants.size());
  state.world_size = rank;
#ifdef DAGSIM_PLANTED_RANK_BUG
  // Never in a real build: conformance/CMakeLists.txt compiles this file once more with the define
  // into the planted-bug test, which shows the invariant checker catches ranks in reverse node
  // order (unique, so no assert here notices; only S2 does).
  for (auto& [node, node_rank] : state.participants) node_rank = rank - 1 - node_rank;
#endif
}

void keep_alive(RendezvousState& state, const NodeDesc& node, TimePoint wall_now) {
  state.last_heartbeats[node] = wall_now;
}

}  // namespace

std::string_view action_name(Action action) {
  switch (action) {
    case Action::keep_alive: return "KEEP_ALIVE";
    case Action::add_to_participants: return "ADD_TO_PARTICIPANTS";
    case Action::add_to_wait_list: return "ADD_TO_WAIT_LIST";
    case Action::add_to_redundancy_list: return "ADD_TO_REDUNDANCY_LIST";
    case Action::remove_from_participants: return "REMOVE_FROM_PARTICIPANTS";
    case Action::remove_from_wait_list: return "REMOVE_FROM_WAIT_LIST";
    case Action::remove_from_redundancy_list: return "REMOVE_FROM_REDUNDANCY_LIST";
    case Action::mark_rendezvous_complete: return "MARK_RENDEZVOUS_COMPLETE";
    case Action::mark_rendezvous_closed: return "MARK_RENDEZVOUS_CLOSED";
    case Action::sync: return "SYNC";
    case Action::error_closed: return "ERROR_CLOSED";
    case Action::error_timeout: return "ERROR_TIMEOUT";
    case Action::finish: return "FINISH";
    case Action::error_graceful_exit: return "ERROR_GRACEFUL_EXIT";
  }
  DAGSIM_UNREACHABLE();
}

std::ostream& operator<<(std::ostream& out, Action action) { return out << action_name(action); }

bool changes_state(Action action) {
  return action >= Action::keep_alive && action <= Action::mark_rendezvous_closed;
}

bool should_keep_alive(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
                       TimePoint wall_now) {
  const auto it = state.last_heartbeats.find(node);
  if (it == state.last_heartbeats.end()) return false;
  // Non-strict, as PyTorch's `last_heartbeat <= now - keep_alive_interval`: a heartbeat exactly
  // one interval old is due. The heartbeat stands alone on its side, so a forged one cannot
  // overflow the arithmetic.
  return it->second <= wall_now - settings.keep_alive_interval;
}

Action join_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
               ClockReading clock, TimePoint deadline) {
  const bool is_participant = state.participants.contains(node);
  const bool is_waiting = state.wait_list.contains(node);
  const bool is_redundant = state.redundancy_list.contains(node);
  const size_t participants = state.participants.size();

  // S5 as the ops rely on it: a node is on one list at most.
  DAGSIM_ASSERT(int{is_participant} + int{is_waiting} + int{is_redundant} <= 1);

  // 1. A closed rendezvous takes no one (S7); a spare leaves without an error.
  if (state.closed) {
    if (is_redundant) {
      DAGSIM_PROBE("rendezvous.spare_exits_gracefully_on_close");
      return Action::error_graceful_exit;
    }
    DAGSIM_PROBE("rendezvous.closed_while_joining");
    return Action::error_closed;
  }

  // 2. A spare waits, without a timeout (L3), for as long as the round is full; once there is
  //    room it leaves the redundancy list (and the executor resets its deadline) to join again.
  //    Checked before any timeout, as in PyTorch.
  if (is_redundant) {
    if (participants == settings.max_nodes) {
      return should_keep_alive(state, node, settings, clock.wall_now) ? Action::keep_alive : Action::sync;
    }
    DAGSIM_PROBE("rendezvous.spare_leaves_for_room");
    return Action::remove_from_redundancy_list;
  }

  // 3. Already part of the complete round: done (S8).
  if (state.complete && is_participant) return Action::finish;

  // 4. Past the op's deadline (local time): within the rollback window, take ourselves out of
  //    what we joined so others need not wait for our heartbeat to expire; then time out.
  if (clock.now > deadline) {
    if (clock.now <= deadline + kRollbackPeriod) {
      if (is_participant) {
        DAGSIM_PROBE("rendezvous.join_rolled_back_participant");
        return Action::remove_from_participants;
      }
      if (is_waiting) {
        DAGSIM_PROBE("rendezvous.join_rolled_back_wait_list");
        return Action::remove_from_wait_list;
      }
    }
    DAGSIM_PROBE("rendezvous.join_timed_out");
    return Action::error_timeout;
  }

  if (state.complete) {
    // 5. The round formed without us: wait for the next one if it has room, else be a spare.
    //    (`!is_redundant` always holds here, step 2 having returned for spares; it is kept so
    //    the condition reads as the reference's.)
    if (participants < settings.max_nodes && !is_waiting) {
      DAGSIM_PROBE("rendezvous.join_wait_list");
      return Action::add_to_wait_list;
    }
    if (participants >= settings.max_nodes && !is_waiting && !is_redundant) {
      DAGSIM_PROBE("rendezvous.join_redundancy_list");
      return Action::add_to_redundancy_list;
    }
  } else if (is_participant) {
    // 6. Enough of us, and the last call is over (wall time, strict `<`, with PyTorch's guard
    //    against a missing deadline): complete the round.
    if (settings.min_nodes <= participants && participants <= settings.max_nodes && state.deadline &&
        *state.deadline < clock.wall_now) {
      DAGSIM_PROBE("rendezvous.last_call_timeout_formed");
      return Action::mark_rendezvous_complete;
    }
  } else {
    // 7. The round is forming and we are not in it: join it.
    return Action::add_to_participants;
  }

  // 8. Nothing to change: heartbeat if one is due, else wait for others.
  return should_keep_alive(state, node, settings, clock.wall_now) ? Action::keep_alive : Action::sync;
}

Action exit_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings&, ClockReading clock,
               TimePoint deadline) {
  if (state.participants.contains(node)) {
    if (clock.now > deadline) {
      DAGSIM_PROBE("rendezvous.exit_timed_out");
      return Action::error_timeout;
    }
    return Action::remove_from_participants;
  }
  return Action::finish;
}

Action close_op(const RendezvousState& state, const NodeDesc&, const RendezvousSettings&, ClockReading clock,
                TimePoint deadline) {
  if (state.closed) {
    DAGSIM_PROBE("rendezvous.close_found_closed");
    return Action::finish;
  }
  if (clock.now > deadline) return Action::error_timeout;
  return Action::mark_rendezvous_closed;
}

Action keep_alive_op(const RendezvousState& state, const NodeDesc& node, const RendezvousSettings& settings,
                     ClockReading clock, TimePoint deadline) {
  if (should_keep_alive(state, node, settings, clock.wall_now)) {
    return clock.now > deadline ? Action::error_timeout : Action::keep_alive;
  }
  return Action::finish;
}

RendezvousState apply(RendezvousState state, Action action, const NodeDesc& node, const RendezvousSettings& settings,
                      TimePoint wall_now) {
  DAGSIM_ASSERT_MSG(changes_state(action), std::string(action_name(action)) + " changes no state");
  const uint64_t round_before = state.round;
  const bool closed_before = state.closed;
  switch (action) {
    case Action::keep_alive:
      // Only a node that has a heartbeat is asked to renew it (should_keep_alive), so S5 holds.
      DAGSIM_ASSERT(state.last_heartbeats.contains(node));
      keep_alive(state, node, wall_now);
      break;
    case Action::add_to_participants:
      DAGSIM_ASSERT(!state.complete);
      DAGSIM_ASSERT(!state.participants.contains(node));
      DAGSIM_ASSERT(!state.redundancy_list.contains(node));
      state.wait_list.erase(node);
      state.participants.emplace(node, 0);  // the rank comes at completion
      keep_alive(state, node, wall_now);
      if (state.participants.size() == settings.min_nodes) state.deadline = wall_now + settings.timeout.last_call;
      if (state.participants.size() == settings.max_nodes) {
        DAGSIM_PROBE("rendezvous.formed_at_max_nodes");
        mark_complete(state);
      }
      break;
    case Action::add_to_wait_list:
      DAGSIM_ASSERT(!state.participants.contains(node));
      state.redundancy_list.erase(node);
      state.wait_list.insert(node);
      keep_alive(state, node, wall_now);
      break;
    case Action::add_to_redundancy_list:
      DAGSIM_ASSERT(!state.participants.contains(node));
      DAGSIM_ASSERT(!state.wait_list.contains(node));
      state.redundancy_list.insert(node);
      keep_alive(state, node, wall_now);
      break;
    case Action::remove_from_participants:
      DAGSIM_ASSERT(state.participants.contains(node));
      state.participants.erase(node);
      state.last_heartbeats.erase(node);
      state = remove_participant_epilogue(std::move(state), settings);
      break;
    case Action::remove_from_wait_list:
      DAGSIM_ASSERT(state.wait_list.contains(node));
      state.wait_list.erase(node);
      state.last_heartbeats.erase(node);
      break;
    case Action::remove_from_redundancy_list:
      DAGSIM_ASSERT(state.redundancy_list.contains(node));
      state.redundancy_list.erase(node);
      state.last_heartbeats.erase(node);
      break;
    case Action::mark_rendezvous_complete:
      mark_complete(state);
      break;
    case Action::mark_rendezvous_closed:
      state.closed = true;
      break;
    case Action::sync:
    case Action::error_closed:
    case Action::error_timeout:
    case Action::finish:
    case Action::error_graceful_exit:
      DAGSIM_UNREACHABLE();
  }
  // Paired with decode()'s check: what apply makes, every node can read back.
  DAGSIM_ASSERT_MSG(!structural_violation(state), structural_violation(state).value_or(""));
  // S6: the round moves only forward, by one, and only when the last participant leaves; S7:
  // `closed` is sticky.
  if (action == Action::remove_from_participants) {
    DAGSIM_ASSERT(state.round == round_before || state.round == round_before + 1);
  } else {
    DAGSIM_ASSERT_EQ(state.round, round_before);
  }
  if (closed_before) DAGSIM_ASSERT(state.closed);
  return state;
}

}  // namespace dagsim::rendezvous
