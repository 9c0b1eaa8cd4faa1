// AgentLife (agent_life.h): run, after_run, then leave, or close, shut down and depart.
#include "core/elastic/agent_life.h"

#include "core/base/assert.h"
#include "core/base/probe.h"

namespace dagsim::elastic {

bool closes_job(const AgentResult& result) {
#if defined(DAGSIM_PLANTED_CLOSE_RULE) && DAGSIM_PLANTED_CLOSE_RULE == 1
  return false;  // planted for conformance/agent_life_planted_test.cc: a job that is never closed
#elif defined(DAGSIM_PLANTED_CLOSE_RULE) && DAGSIM_PLANTED_CLOSE_RULE == 2
  return true;  // planted: PyTorch's launcher, which closes on every end but a signal
#endif
  switch (result.outcome) {
    case AgentOutcome::succeeded: return true;
    case AgentOutcome::failed: return result.error.has_value() && result.error->code() == ErrorCode::worker_group_failed;
    case AgentOutcome::closed:         // someone closed it already
    case AgentOutcome::graceful_exit:  // a spare that found it closed
      return false;
  }
  DAGSIM_UNREACHABLE();
}

AgentLife::AgentLife(runtime::Env& env, ElasticAgent& agent, rendezvous::RendezvousHandler& handler, store::Store& store,
                     AgentLifeOptions options)
    : env_(env), agent_(agent), handler_(handler), store_(store), options_(options) {
  DAGSIM_ASSERT(options_.linger >= runtime::Duration::zero());
  DAGSIM_ASSERT(options_.depart_timeout > runtime::Duration::zero());
  DAGSIM_ASSERT(options_.linger_poll > runtime::Duration::zero());
}

std::string AgentLife::departed_key(const std::string& run_id, uint64_t round) {
  return "torchelastic/agent/" + run_id + "/round/" + std::to_string(round) + "/departed";
}

AgentLifeEnd AgentLife::live(runtime::CancelScope& scope, const std::function<void()>& after_run) {
  AgentLifeEnd end;
  try {
    runtime::CancelScope::Enter in(scope);
    end.result = agent_.run();
  } catch (const Error& e) {
    // Only this scope's cancel is a SIGTERM; a death of the node (or of a scope above) unwinds on.
    if (e.code() != ErrorCode::cancelled || !scope.cancelled() || scope.state()->node_dead()) throw;
  }
  if (after_run) after_run();
  const auto shut_down = [&] {
    try {
      end.shut_down = handler_.shutdown();
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      DAGSIM_PROBE("elastic.shutdown_failed");
      env_.log.event("elastic.shutdown_failed", e.what());
    }
  };
  if (!end.result) {
    DAGSIM_PROBE("elastic.agent_leaves_on_signal");
    end.left = true;
    shut_down();  // leave; the others re-form without this node
    // Leaving never closes the job nor counts a departure (PyTorch #67742).
    DAGSIM_ASSERT(!end.closed_job && !end.close_failed);
    DAGSIM_ASSERT_EQ(end.departed, int64_t{0});
    return end;
  }
  if (closes_job(*end.result)) {
    end.closed_job = agent_.close_job();
    end.close_failed = !end.closed_job;
  }
  // The close rule: only an end that closes_job() tries to close, and it either closed or failed.
  DAGSIM_ASSERT(!(end.closed_job && end.close_failed));
  if (end.closed_job || end.close_failed) DAGSIM_ASSERT(closes_job(*end.result));
  shut_down();
  end.departed = depart();
  return end;
}

int64_t AgentLife::depart() {
  if (!agent_.group_spec()) return 0;  // never in a round: nobody counts on it
  const WorkerGroupSpec& group = *agent_.group_spec();
  const std::string key = departed_key(group.round.run_id, group.info.round);
  store_.set_timeout(options_.depart_timeout);
  int64_t departed = 0;
  try {
    departed = store_.add(key, 1);
    const runtime::TimePoint until = env_.clock.now() + options_.linger;
    while (options_.serves_store && departed < static_cast<int64_t>(group.info.world_size) && env_.clock.now() < until) {
      env_.clock.sleep(options_.linger_poll);
      departed = store_.add(key, 0);
    }
    if (options_.serves_store && departed < static_cast<int64_t>(group.info.world_size)) {
      DAGSIM_PROBE("elastic.store_host_linger_ran_out");
    }
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);  // a store already gone: nothing to wait for
    DAGSIM_PROBE("elastic.depart_failed");
    env_.log.event("elastic.depart_failed", e.what());
  }
  return departed;
}

}  // namespace dagsim::elastic
