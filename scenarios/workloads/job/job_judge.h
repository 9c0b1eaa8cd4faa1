// The judge side of a [job] scenario (job_spec.h): its check kinds, judged from a job run's
// records alone (job_spec.h's layout), and its results and spans for the report.
//
// Check kinds ([[checks]] kind = ..., docs/scenarios.md, "[job]"):
//   rendezvous_invariants  S1-S10 and L1-L6 where the store's record shows them (job.store),
//                          L6 by `l6 = "dagsim" | "pytorch"` (default: [job] rerendezvous_on_expiry)
//   job_succeeded          every agent exited 0, but those a fault ended; `expect_failure = true`:
//                          the job must fail instead (`message` a fragment of some agent's log)
//   no_orphans             nothing the run started was alive after it (job.orphans)
//   reformed_within        `ms = N`: after each fault that struck an agent, a worker or the store,
//                          a round formed within N ms (rounds from the store's record)
//   restarts               `max = N` and/or `min = N`: worker-group restarts, as torchrun counts them
//   command                `run = ["prog", "arg", ...]` executed at the run's end (by the runner)
//                          with JOB_DIR (and REFERENCE_DIR when `reference_run = true`); its exit
//                          status is the verdict, its output the detail (job.commands)
#pragma once

#include <memory>
#include <span>

#include "scenarios/format/scenario.h"
#include "scenarios/run/records.h"
#include "scenarios/workloads/registry.h"
#include "scenarios/workloads/workload.h"

namespace dagsim::scenarios {

// The table of the job workload's check kinds (the registry entry lists it).
std::span<const CheckKind> job_check_kinds();

// The judge of one job run, from its records.
std::unique_ptr<Judge> make_job_judge(const Scenario& scenario, const RunRecords& records);

}  // namespace dagsim::scenarios
