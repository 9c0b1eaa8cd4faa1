// The [job] workload's registry entry (job_workload.h). A job is real processes, so it has no node
// side: `dagsim run` sees a [job] and starts it through the job runner itself; `make` exists only so
// that a caller that forgets this fails with a clear error instead of simulating nothing.
#include "scenarios/workloads/job/job_workload.h"

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/workloads/job/job_judge.h"
#include "scenarios/workloads/job/job_reader.h"
#include "scenarios/workloads/job/job_spec.h"

namespace dagsim::scenarios {
namespace {

constexpr std::string_view kKeys[] = {"job"};

// A simulated cluster, network, GPUs or scheduler would describe nothing a real job runs on.
constexpr RefusedKey kRefused[] = {
    {"cluster", "its agents are [job] agents (and late joins), named agent0 .."},
    {"network", "its network is the host's; cut it with a partition fault (namespaces = true)"},
    {"devices", "its devices are the host's own"},
    {"schedule", "its processes are real, with no simulated scheduler to order them"},
    {"max_virtual_time_ms", "a job runs in wall time; [job] timeout_ms says when the run stops it"},
};

class NoNodeSide final : public Workload {
 public:
  void node_main(NodeContext&) override {
    throw errors::invalid_argument("a [job] runs as real processes: `dagsim run` starts it itself");
  }
  std::optional<runtime::TimePoint> end_time() const override { return std::nullopt; }
};

std::string summary(const Scenario& scenario) {
  const JobSpec& spec = scenario.workload.as<JobSpec>();
  std::string out = "job: " + counted(spec.agents, "agent") + " x " + counted(spec.nproc_per_node, "worker");
  if (!spec.late_joins.empty()) out += " (+" + std::to_string(spec.late_joins.size()) + " late)";
  out += spec.launcher == JobLauncher::torchrun ? " under torchrun" : " under dagsim launch";
  return out + ", " + counted(spec.faults.size(), "fault");
}

std::unique_ptr<Workload> make(const Scenario&, uint64_t) { return std::make_unique<NoNodeSide>(); }

}  // namespace

const WorkloadType kJobWorkload = {
    .name = "job",
    .keys = kKeys,
    .required = kKeys,
    .shown = "[job]",
    .to_add = "a [job] table",
    .read = &read_job,
    .summary = &summary,
    .make = &make,
    .make_judge = &make_job_judge,
    .checks = job_check_kinds(),  // dynamic initialisation: read it after main starts, as everyone does
    .events = {},  // a job reports no simulated events: its triggers are its own (job_spec.h)
    .reads_faults = true,
    .refused = kRefused,
    .finish = &finish_job,
};

}  // namespace dagsim::scenarios
