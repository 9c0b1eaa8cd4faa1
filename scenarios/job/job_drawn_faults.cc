// [random_faults] for a job: the faults a seed draws, as JobFaults on agents (job_runner.h).
//
// The draw is the simulator's own (run/fault_schedule.h, fault_timeline): each kind a Poisson
// process at its rate from the seed, on a random agent that is neither excluded nor already
// faulted, ended after restart_after, resume_after or heal_after. So a job's fault schedule is a
// pure function of (scenario, seed), printed in the report and replayed by the same seed, while
// the job's own processes stay real. The job's scheduled faults occupy their agents as the
// simulator's do (a triggered one for the whole run), so a drawn fault never lands on one.
//
// A drawn kill or crash is a crash here: the agent comes back after restart_after_ms, as a killed
// node of the simulator does; a partition cuts one agent off from every other.
#include <algorithm>

#include "scenarios/job/job_runner.h"
#include "scenarios/run/fault_schedule.h"

namespace dagsim::scenarios::job {

namespace {

// The job's scheduled faults on agents as the simulator's, only for the draw to avoid them.
std::vector<FaultSpec> occupied(const JobSpec& spec) {
  std::vector<FaultSpec> out;
  for (const JobFault& f : spec.faults) {
    FaultSpec s;
    s.line = -1;  // not drawn: dropped from the draw's result below
    if (f.when.kind != JobTrigger::Kind::at) s.when = FaultTrigger{};
    s.at = f.when.kind == JobTrigger::Kind::at ? f.when.at : Duration{0};
    if (f.kind == JobFault::Kind::partition) {
      s.kind = FaultSpec::Kind::partition;
      s.groups = f.groups;
    } else if (f.target.kind != JobTarget::Kind::store && f.kind != JobFault::Kind::store_pause &&
               f.kind != JobFault::Kind::store_restart) {
      s.kind = FaultSpec::Kind::kill;
      s.node = f.target.agent;
    } else {
      continue;
    }
    const Duration length = f.restart_after.value_or(f.duration.value_or(spec.timeout));
    if (!s.when) s.until = s.at + length;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<JobFault> drawn_faults(const Scenario& scenario, uint64_t seed) {
  if (!scenario.random_faults.any()) return {};
  const JobSpec& spec = scenario.workload.as<JobSpec>();
  Scenario draw = scenario;
  draw.faults = occupied(spec);
  std::vector<JobFault> out;
  for (const FaultSpec& f : fault_timeline(draw, seed, runtime::TimePoint{spec.timeout})) {
    if (f.line == -1) continue;
    JobFault j;
    j.line = 0;  // drawn, not declared
    j.when.kind = JobTrigger::Kind::at;
    j.when.at = f.at;
    j.target.kind = JobTarget::Kind::agent;
    j.target.agent = f.node;
    const Duration length = f.until ? *f.until - f.at : Duration{0};
    switch (f.kind) {
      case FaultSpec::Kind::kill:
      case FaultSpec::Kind::crash:
        j.kind = JobFault::Kind::crash;
        j.restart_after = length;
        break;
      case FaultSpec::Kind::pause:
        j.kind = JobFault::Kind::pause;
        j.duration = length;
        break;
      case FaultSpec::Kind::partition:
        j.kind = JobFault::Kind::partition;
        j.groups = f.groups;
        j.duration = length;
        break;
      default:
        DAGSIM_ASSERT_MSG(false, "the draw made a fault kind it never draws: " + fault_kind_name(f.kind));
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace dagsim::scenarios::job
