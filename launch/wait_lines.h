// WaitLines: what an agent of `dagsim launch` says while it waits, so an operator is never left
// without a word for long: in the rendezvous (its first, or a re-rendezvous after a restart) and at
// the exit barrier, and while a member of its round is silent, a line every `every` (5 s) of the wait saying for whom or what it waits and
// until when, on the wall clock of the launcher's dated lines (launch_log.h):
//
//   waiting for the rendezvous of run job, round 3: 1 more agent needed (have 2 of 3..4:
//     node1_40_0, node2_41_0); joining times out at 08:55:12
//   waiting for the rendezvous of run job, round 3: have 3 of 3..4 agents; more may join until the
//     last call ends at 08:45:40 (joining times out at 08:55:12)
//   waiting to join run job: round 3 is complete (4 agents) and trains; this agent joins at its next
//     re-rendezvous (joining times out at 08:55:12)
//   waiting at the exit barrier of round 3 (group rank 1 of 4) for the other agents' workers to
//     finish, until 08:50:02
//   no heartbeat from member node2_41_0 (group rank 1) of round 3 since 08:44:10; the rendezvous
//     declares it dead at 08:44:25 (the keep-alive expiry), and the round re-forms without it
//
// The last is said while the group trains, from the state the monitor syncs each interval: a
// member that died (its agent or its host) is otherwise silent until its heartbeat expires.
// It reads what the agent and its handler already know (the last synced state, the deadlines the
// wait runs under: RendezvousHandler::join_deadline, ElasticAgent::exit_barrier_deadline) and never
// calls the store, so a line costs nothing and changes nothing.
//
// Threading: the agent's thread; tick() from a fiber of its own between the agent's waits.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/runtime/clock.h"

namespace dagsim::launch {

class WaitLines {
 public:
  WaitLines(runtime::Clock& clock, const rendezvous::RendezvousHandler& handler, const elastic::ElasticAgent& agent,
            std::function<void(const std::string&)> say, runtime::Duration every = std::chrono::seconds(5));

  // Says the line for the wait in progress when it has lasted `every` since it began or since its
  // last line (a silent member: when found, then every `every`); forgets a wait that ended.
  void tick();
  // The line for the wait in progress now, or "" when the agent waits for nothing.
  std::string describe() const;

 private:
  // While the group trains: a member silent past two keep-alive intervals, and when it expires.
  std::string silent_member() const;

  runtime::Clock& clock_;
  const rendezvous::RendezvousHandler& handler_;
  const elastic::ElasticAgent& agent_;
  std::function<void(const std::string&)> say_;
  const runtime::Duration every_;
  std::optional<runtime::TimePoint> due_;  // when the wait in progress is next said
};

}  // namespace dagsim::launch
