// Worker ranks and environment: what torchrun's agent (PyTorch 1.13's SimpleElasticAgent and
// LocalElasticAgent) gives each worker process of a round, as pure functions, so that `dagsim
// launch` and the simulated agent compute them one way and a test can hold them to torchrun's.
//
// Ranks (SimpleElasticAgent._assign_worker_ranks): after rendezvous every agent publishes its role
// and local world size (nproc_per_node); indexed by group rank, they give
//  - WORLD_SIZE: the sum of all agents' local world sizes;
//  - RANK: the sum over the agents of lower group rank, plus the local rank;
//  - ROLE_WORLD_SIZE and ROLE_RANK: the same among the agents of the worker's role, ordered by
//    (role, group rank).
//
// Environment (LocalElasticAgent._start_workers): a worker inherits the agent's whole environment
// and gets, over it, LOCAL_RANK, RANK, GROUP_RANK, ROLE_RANK, ROLE_NAME, LOCAL_WORLD_SIZE,
// WORLD_SIZE, GROUP_WORLD_SIZE, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT (restarts counted against max_restarts so far),
// TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE ("True" or "False",
// Python's spelling), NCCL_ASYNC_ERROR_HANDLING (the agent's, else "1") and
// TORCHELASTIC_ERROR_FILE (<attempt dir>/<local rank>/error.json). OMP_NUM_THREADS and
// TORCHELASTIC_TIMER_FILE pass through from the agent's environment like any other variable
// (torchrun sets OMP_NUM_THREADS=1 in its own when it is unset and there are several workers per
// node: launcher_environment() does that here).
//
// Errors: the agents' infos come from the store, written by other processes: a list whose group
// ranks are not 0..n-1 in order, a local world size of 0 or over kMaxLocalWorldSize, or a total
// past kMaxWorldSize is invalid_argument naming the agent.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace dagsim::elastic {

inline constexpr uint32_t kMaxLocalWorldSize = 1u << 16;
// torchrun's --role is one word; longer ones are refused where the agent starts, so what it
// publishes (encode_role_info) is always what every agent's decode accepts.
inline constexpr size_t kMaxRoleBytes = 256;
inline constexpr uint64_t kMaxWorldSize = uint64_t{1} << 31;

// One agent of a round, as it published itself (PyTorch's _RoleInstanceInfo).
struct AgentRoleInfo {
  std::string role = "default";
  uint32_t group_rank = 0;
  uint32_t local_world_size = 1;
  friend bool operator==(const AgentRoleInfo&, const AgentRoleInfo&) = default;
};

// PyTorch's _RoleInstanceInfo.compare: by role, then by group rank (the order role ranks follow).
bool role_order(const AgentRoleInfo& a, const AgentRoleInfo& b);

// A role info as an agent publishes it in the round's store: "<local world size> <role>" (the
// group rank is the key's). decode trusts nothing: anything else, a size of 0 or over
// kMaxLocalWorldSize, or a role over kMaxRoleBytes is invalid_argument naming the group rank.
std::string encode_role_info(const AgentRoleInfo& info);
AgentRoleInfo decode_role_info(std::span<const uint8_t> bytes, uint32_t group_rank);

// One local worker's ranks (PyTorch's Worker).
struct WorkerRanks {
  uint32_t local_rank = 0;
  uint64_t global_rank = 0;
  uint64_t role_rank = 0;
  uint64_t world_size = 0;
  uint64_t role_world_size = 0;
};

// The ranks of the local workers of the agent at `group_rank`, given every agent of the round
// indexed by group rank.
std::vector<WorkerRanks> assign_worker_ranks(std::span<const AgentRoleInfo> agents, uint32_t group_rank);

// What the agent knows of its round and job, beyond the ranks.
struct WorkerRound {
  std::string role = "default";
  std::string run_id = "none";
  uint32_t group_rank = 0;
  uint32_t group_world_size = 1;
  uint32_t local_world_size = 1;
  std::string master_addr;
  uint16_t master_port = 0;
  uint32_t restart_count = 0;  // restarts counted against max_restarts so far
  uint32_t max_restarts = 0;
  bool use_agent_store = false;  // true only for a static rendezvous, whose store the agents host
  std::string attempt_dir;       // <log dir>/<run id>_<random>/attempt_<restart count>
};

using Environment = std::map<std::string, std::string>;

// A worker's whole environment: the agent's, with the worker's variables over it.
Environment worker_environment(const Environment& agent, const WorkerRound& round, const WorkerRanks& worker);

// The agent's own environment as torchrun leaves it: OMP_NUM_THREADS=1 when it is unset and there
// is more than one worker per node; the rest unchanged.
Environment launcher_environment(Environment agent, uint32_t local_world_size);

// A process environment (environ) as a map, and back (for execve).
Environment environment_of(char** environ);
std::vector<std::string> environ_strings(const Environment& env);

}  // namespace dagsim::elastic
