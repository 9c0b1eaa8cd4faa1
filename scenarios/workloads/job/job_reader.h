// The [job] workload's reader (job_reader.cc): [job], its [[job.late_joins]], the top-level
// [[faults]] in the job's vocabulary, and the job's check keys, read into JobSpec (job_spec.h) and
// refused, naming FILE:LINE: KEY, when a run could not do what they say.
//
// Private to the scenarios library (toml++ does not leak): the registry entry (job_workload.cc)
// points at these two.
#pragma once

#include "scenarios/format/scenario.h"
#include "scenarios/format/toml_reader.h"

namespace dagsim::scenarios {

// Reads [job] and [[faults]]; sets scenario.workload (a JobSpec), scenario.cluster (total_agents()
// nodes named "agent0" ..) and scenario.max_virtual_time (the job's timeout).
void read_job(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario);

// Once [[checks]] and [random_faults] are read: each check's own keys (CheckSpec::params) have the
// types and ranges the job's judge and runner take, and [random_faults] can strike this job.
void finish_job(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario);

}  // namespace dagsim::scenarios
