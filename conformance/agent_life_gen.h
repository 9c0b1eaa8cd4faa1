// RapidCheck's generator of simulated-launcher cases (agent_life_harness.h): 2 to 5 agents with
// random min/max nodes, timeouts, restarts, workers per agent and late joins; per agent up to three
// scripted groups (success, a non-zero exit, a signal, a hang, a slow start, UNHEALTHY; some
// ignoring SIGTERM); now and then a SIGTERM, an agent's death, the store host's death.
#pragma once

#include <rapidcheck.h>

#include "conformance/agent_life_harness.h"

namespace dagsim::conformance {

inline Duration gen_ms(int lo, int hi) { return std::chrono::milliseconds(*rc::gen::inRange(lo, hi + 1)); }

inline elastic::SimulatedWorker gen_worker() {
  using End = elastic::SimulatedWorker::End;
  elastic::SimulatedWorker w;
  w.run_time = gen_ms(100, 20000);
  switch (*rc::gen::inRange(0, 6)) {
    case 0: break;  // success
    case 1: w.exit_code = *rc::gen::inRange(1, 256); break;
    case 2: w.end = End::signal; w.signal = *rc::gen::element(9, 11, 15); break;
    case 3: w.end = End::hang; break;
    case 4: w.start_delay = gen_ms(1000, 10000); break;  // a slow start, then success
    default: w.end = End::unhealthy; break;
  }
  w.ignores_sigterm = *rc::gen::inRange(0, 4) == 0;
  return w;
}

inline LifeCase gen_life_case() {
  LifeCase c;
  const int agents = *rc::gen::inRange(2, 6);
  c.max_nodes = static_cast<uint32_t>(agents);
  c.min_nodes = static_cast<uint32_t>(*rc::gen::inRange(1, agents + 1));
  c.join_timeout = gen_ms(5000, 30000);
  c.last_call = gen_ms(100, 2000);
  c.keep_alive_interval = gen_ms(500, 2000);
  c.exit_barrier_timeout = gen_ms(2000, 15000);
  c.grace = gen_ms(0, 5000);
  for (int i = 0; i < agents; ++i) {
    AgentPlan a;
    a.local_world_size = static_cast<uint32_t>(*rc::gen::inRange(1, 3));
    a.max_restarts = static_cast<uint32_t>(*rc::gen::inRange(0, 4));
    if (*rc::gen::inRange(0, 4) == 0) a.join_at = gen_ms(0, 30000);
    const int groups = *rc::gen::inRange(0, 4);
    for (int g = 0; g < groups; ++g) a.groups.push_back(gen_worker());
    if (*rc::gen::inRange(0, 6) == 0) a.sigterm_at = gen_ms(0, 60000);
    if (*rc::gen::inRange(0, 6) == 0) a.kill_at = gen_ms(0, 60000);
    c.agents.push_back(std::move(a));
  }
  if (*rc::gen::inRange(0, 10) == 0) c.store_kill_at = gen_ms(0, 60000);
  return c;
}

}  // namespace dagsim::conformance
