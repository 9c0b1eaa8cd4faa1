// Slurm's environment as `dagsim launch`'s defaults: under `srun`, an agent takes from the job
// what a torchrun user would otherwise copy into its flags by hand (docs/cli.md, docs/torchrun.md).
//
// The defaults, each applied only where its flag was not given (neither on the command line nor as
// PET_<FLAG>, torchrun's environment, which also wins over Slurm's):
//  - --nnodes: the agents the job runs. Inside an srun step every task runs one agent, so the
//    step's task count, SLURM_STEP_NUM_TASKS; outside a step (sbatch's script, salloc's shell),
//    one agent per node of the job, SLURM_JOB_NUM_NODES (or SLURM_NNODES). With torchrun's layout,
//    `srun --ntasks-per-node=1`, the two are the same number; a step with more tasks than nodes
//    gets a note saying so.
//  - --rdzv_id: SLURM_JOB_ID (or SLURM_JOBID), so every agent of the job joins one rendezvous.
//  - --rdzv_endpoint: the first host of the step's nodes (SLURM_STEP_NODELIST), or outside a step
//    of the job's (SLURM_JOB_NODELIST, or SLURM_NODELIST), with the backend's default port (29400
//    for c10d). That host runs an agent, which serves the store there.
//  - --rdzv_backend: c10d on the first node, unless --node_rank, --master_addr or --master_port
//    was given: that is torchrun's static recipe, kept as it is (static's endpoint is the master's).
// Nothing applies outside a Slurm job (no SLURM_JOB_ID) or with --standalone (one host, by request).
//
// A node list is Slurm's compressed host list: names and bracketed ranges, `node[01-04,07],gpu5`.
// parse_hostlist reads it within fixed bounds and refuses anything else as invalid_argument naming
// the variable it came from, so a malformed value stops the launch before anything starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/error.h"
#include "launch/launch_args.h"

namespace dagsim::launch {

// Bounds: a node list longer than this is refused, as is one that names more hosts, a range
// number of more digits, or a host name longer than a DNS name may be.
inline constexpr size_t kMaxHostlistChars = 64 * 1024;
inline constexpr uint64_t kMaxHostlistHosts = uint64_t{1} << 20;
inline constexpr size_t kMaxRangeDigits = 9;
inline constexpr size_t kMaxHostNameChars = 253;

struct Hostlist {
  std::vector<std::string> hosts;  // the first min(count, limit) hosts, in Slurm's order
  uint64_t count = 0;              // every host the list names (at least 1)
};

// Reads a host list: comma-separated items, each of name characters ([A-Za-z0-9._-]) and bracket
// groups `[R,R,...]` where R is N or LO-HI (LO <= HI), numbers written with the width of their
// range's first number (`[08-10]`: 08 09 10). Several groups in one item expand as nested loops,
// the last fastest (`r[1-2]n[1-2]`: r1n1 r1n2 r2n1 r2n2). Expands only the first `limit` hosts but
// checks the whole list. Throws invalid_argument naming `variable` and saying what is wrong.
Hostlist parse_hostlist(std::string_view text, std::string_view variable, size_t limit = 1);

// Which of the flags the Slurm defaults fill were given (on the command line or as PET_*).
struct GivenFlags {
  bool nnodes = false;
  bool rdzv_backend = false;
  bool rdzv_endpoint = false;
  bool rdzv_id = false;
  // torchrun's static recipe under Slurm (--node_rank $SLURM_NODEID --master_addr HEAD
  // --master_port P): any of these given keeps the static backend and its endpoint, as torchrun
  // honours them, rather than Slurm's c10d on the first node.
  bool static_flags = false;
};

// Fills the flags not given from Slurm's variables in `env`, as above. Returns one line per value
// taken from Slurm (and a note when a step runs more agents than nodes), for the launch's log;
// none outside a Slurm job. Throws invalid_argument naming the variable when one it reads is
// malformed.
std::vector<std::string> apply_slurm_defaults(LaunchArgs& args, const GivenFlags& given,
                                              const std::map<std::string, std::string>& env);

// The SLURM_* variables of this process's environment.
std::map<std::string, std::string> slurm_environment();

}  // namespace dagsim::launch
