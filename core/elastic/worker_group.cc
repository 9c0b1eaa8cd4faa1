// WorkerGroup (worker_group.h): PyTorch's state names, the fiber group, and a failed worker's error.
#include "core/elastic/worker_group.h"

#include <cstring>

#include "core/base/assert.h"
#include "core/runtime/cancel_scope.h"

namespace dagsim::elastic {

const char* worker_state_name(WorkerState state) {
  switch (state) {
    case WorkerState::unknown: return "UNKNOWN";
    case WorkerState::init: return "INIT";
    case WorkerState::healthy: return "HEALTHY";
    case WorkerState::unhealthy: return "UNHEALTHY";
    case WorkerState::stopped: return "STOPPED";
    case WorkerState::succeeded: return "SUCCEEDED";
    case WorkerState::failed: return "FAILED";
  }
  DAGSIM_UNREACHABLE();
}

namespace {

// One fiber in a scope of its own. The fiber writes its end into `status`, which it shares: the
// group may be gone (a restart, a node that died) by the time a cancelled fiber unwinds.
class FiberWorkerGroup final : public WorkerGroup {
 public:
  FiberWorkerGroup(runtime::Env& env, const WorkerFn& worker, const WorkerGroupSpec& spec)
      : scope_("worker group, round " + std::to_string(spec.info.round), env.spawner) {
    env.spawner.spawn(scope_, scope_.name(), [status = status_, worker, spec] {
      try {
        worker(spec);
        status->state = WorkerState::succeeded;
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        status->state = WorkerState::failed;
        status->failure = e;
      }
    });
  }
  ~FiberWorkerGroup() override { scope_.cancel(); }  // never joins: the caller may be unwinding

  WorkerGroupStatus poll() override { return *status_; }
  void stop() override {
    scope_.cancel();
    scope_.join();  // no fiber of the group runs past this point
  }

 private:
  std::shared_ptr<WorkerGroupStatus> status_ = std::make_shared<WorkerGroupStatus>();
  runtime::CancelScope scope_;
};

}  // namespace

WorkerGroupFactory fiber_worker_group(runtime::Env& env, WorkerFn worker) {
  DAGSIM_ASSERT(worker != nullptr);
  return [&env, worker = std::move(worker)](const WorkerGroupSpec& spec) -> std::unique_ptr<WorkerGroup> {
    return std::make_unique<FiberWorkerGroup>(env, worker, spec);
  };
}

std::string describe_exit(int exit_code, int signal) {
  if (signal != 0) {
    const char* name = ::strsignal(signal);
    return "was killed by signal " + std::to_string(signal) + (name != nullptr ? std::string(" (") + name + ")" : "");
  }
  return "exited with code " + std::to_string(exit_code);
}

Error worker_failure(const WorkerGroupSpec& spec, uint32_t local_rank, const std::string& how, const std::string& message) {
  DAGSIM_ASSERT(local_rank < spec.workers.size());
  std::string text = "worker " + std::to_string(local_rank) + " (rank " + std::to_string(spec.workers[local_rank].global_rank) +
                     ") of round " + std::to_string(spec.info.round) + " " + how;
  if (!message.empty()) text += ": " + message;
  return errors::worker_group_failed(text);
}

}  // namespace dagsim::elastic
