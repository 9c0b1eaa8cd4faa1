// WaitLines (wait_lines.h): a line every few seconds of a wait, from what the agent knows.
#include "launch/wait_lines.h"

#include "core/base/assert.h"
#include "core/base/printable.h"
#include "launch/launch_log.h"

namespace dagsim::launch {

namespace {

constexpr size_t kNamedAgents = 4;

WallTime wall_of_state(runtime::TimePoint wall) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(wall.since_epoch));
}

std::string agents(size_t n) { return std::to_string(n) + (n == 1 ? " agent" : " agents"); }

}  // namespace

WaitLines::WaitLines(runtime::Clock& clock, const rendezvous::RendezvousHandler& handler, const elastic::ElasticAgent& agent,
                     std::function<void(const std::string&)> say, runtime::Duration every)
    : clock_(clock), handler_(handler), agent_(agent), say_(std::move(say)), every_(every) {
  DAGSIM_ASSERT(say_ != nullptr);
  DAGSIM_ASSERT(every_ > runtime::Duration::zero());
}

std::string WaitLines::describe() const {
  if (const std::optional<runtime::TimePoint>& barrier = agent_.exit_barrier_deadline()) {
    std::string line = "waiting at the exit barrier";
    if (const std::optional<elastic::WorkerGroupSpec>& group = agent_.group_spec()) {
      line += " of round " + std::to_string(group->info.round) + " (group rank " + std::to_string(group->info.rank) + " of " +
              std::to_string(group->info.world_size) + ")";
    }
    return line + " for the other agents' workers to finish, until " + wall_clock(wall_time_of(clock_, *barrier));
  }
  const std::optional<runtime::TimePoint>& join = handler_.join_deadline();
  if (!join) return silent_member();
  const rendezvous::RendezvousState& state = handler_.last_state();
  const rendezvous::RendezvousSettings& settings = handler_.settings();
  const std::string run = printable(settings.run_id);
  const std::string times_out = "joining times out at " + wall_clock(wall_time_of(clock_, *join));
  const std::string range = std::to_string(settings.min_nodes) + ".." + std::to_string(settings.max_nodes);
  const size_t have = state.participants.size();
  if (state.complete && state.participants.count(handler_.node()) == 0) {
    return "waiting to join run " + run + ": round " + std::to_string(state.round) + " is complete (" + agents(have) +
           ") and trains; this agent joins at its next re-rendezvous (" + times_out + ")";
  }
  std::string line = "waiting for the rendezvous of run " + run + ", round " + std::to_string(state.round) + ": ";
  if (have < settings.min_nodes) {
    line += std::to_string(settings.min_nodes - have) + " more " + (settings.min_nodes - have == 1 ? "agent" : "agents") +
            " needed (have " + std::to_string(have) + " of " + range;
    size_t named = 0;
    for (const auto& [node, rank] : state.participants) {
      if (named == kNamedAgents) {
        line += ", ...";
        break;
      }
      line += (named++ == 0 ? ": " : ", ") + rendezvous::to_string(node);
    }
    return line + "); " + times_out;
  }
  line += "have " + std::to_string(have) + " of " + range + " agents";
  if (state.deadline) line += "; more may join until the last call ends at " + wall_clock(wall_of_state(*state.deadline));
  return line + " (" + times_out + ")";
}

std::string WaitLines::silent_member() const {
  // While the group trains: a member whose heartbeat is older than two keep-alive intervals has
  // likely died (its host, its agent); the rendezvous declares it dead at the expiry, and its
  // round then re-forms. Until then the agent would otherwise say nothing.
  const std::optional<elastic::WorkerGroupSpec>& group = agent_.group_spec();
  if (!group || !elastic::is_running(agent_.state())) return "";
  const rendezvous::RendezvousState& state = handler_.last_state();
  const rendezvous::RendezvousSettings& settings = handler_.settings();
  const runtime::TimePoint now = clock_.wall_now();
  for (size_t rank = 0; rank < group->members.size(); ++rank) {
    const rendezvous::NodeDesc& member = group->members[rank];
    const auto heartbeat = state.last_heartbeats.find(member);
    if (member.addr.empty() || member == handler_.node() || heartbeat == state.last_heartbeats.end()) continue;
    if (now - heartbeat->second <= 2 * settings.keep_alive_interval) continue;
    return "no heartbeat from member " + rendezvous::to_string(member) + " (group rank " + std::to_string(rank) + ") of round " +
           std::to_string(group->info.round) + " since " + wall_clock(wall_of_state(heartbeat->second)) +
           "; the rendezvous declares it dead at " + wall_clock(wall_of_state(heartbeat->second + settings.expiry())) +
           " (the keep-alive expiry), and the round re-forms without it";
  }
  return "";
}

void WaitLines::tick() {
  const std::string line = describe();
  if (line.empty()) {
    due_.reset();
    return;
  }
  const runtime::TimePoint now = clock_.now();
  if (!due_) {
    // A wait is said once it has lasted `every`; a silent member at once, as it is found two
    // keep-alive intervals late already.
    due_ = now + every_;
    if (agent_.exit_barrier_deadline() || handler_.join_deadline()) return;
    say_(line);
    return;
  }
  if (now < *due_) return;
  due_ = now + every_;
  say_(line);
}

}  // namespace dagsim::launch
