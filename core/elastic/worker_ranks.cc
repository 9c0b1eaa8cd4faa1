#include "core/elastic/worker_ranks.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::elastic {

namespace {

void check_agents(std::span<const AgentRoleInfo> agents, uint32_t group_rank) {
  if (group_rank >= agents.size()) {
    throw errors::invalid_argument("worker ranks: group rank " + std::to_string(group_rank) + " is not among the " +
                                   std::to_string(agents.size()) + " agents of the round");
  }
  uint64_t total = 0;
  for (size_t i = 0; i < agents.size(); ++i) {
    const AgentRoleInfo& a = agents[i];
    const std::string who = "agent " + std::to_string(i) + " (role " + quote(a.role) + ")";
    if (a.group_rank != i) {
      throw errors::invalid_argument("worker ranks: " + who + " says it has group rank " + std::to_string(a.group_rank));
    }
    if (a.local_world_size == 0 || a.local_world_size > kMaxLocalWorldSize) {
      throw errors::invalid_argument("worker ranks: " + who + " has " + std::to_string(a.local_world_size) +
                                     " workers, outside [1, " + std::to_string(kMaxLocalWorldSize) + "]");
    }
    total += a.local_world_size;
  }
  if (total > kMaxWorldSize) {
    throw errors::invalid_argument("worker ranks: " + std::to_string(total) + " workers in all, over the limit of " +
                                   std::to_string(kMaxWorldSize));
  }
}

// PyTorch's _get_ranks: over agents[begin, end), the total of their local world sizes and the
// first rank of agents[at]'s workers (the sum before it).
struct Span {
  uint64_t total = 0;
  uint64_t first = 0;
};
Span ranks_within(const std::vector<const AgentRoleInfo*>& agents, size_t at, size_t begin, size_t end) {
  Span s;
  DAGSIM_ASSERT(begin <= at && at <= end && end <= agents.size());
  for (size_t i = begin; i < end; ++i) {
    if (i < at) s.first += agents[i]->local_world_size;
    s.total += agents[i]->local_world_size;
  }
  // The ranks before `at` are some of the span's.
  DAGSIM_ASSERT(s.first <= s.total);
  return s;
}

}  // namespace

bool role_order(const AgentRoleInfo& a, const AgentRoleInfo& b) {
  return a.role != b.role ? a.role < b.role : a.group_rank < b.group_rank;
}

std::string encode_role_info(const AgentRoleInfo& info) {
  // Paired with decode_role_info's checks: what an agent publishes, every agent can read.
  DAGSIM_ASSERT(info.local_world_size >= 1 && info.local_world_size <= kMaxLocalWorldSize);
  DAGSIM_ASSERT(!info.role.empty() && info.role.size() <= kMaxRoleBytes);
  return std::to_string(info.local_world_size) + " " + info.role;
}

AgentRoleInfo decode_role_info(std::span<const uint8_t> bytes, uint32_t group_rank) {
  const std::string text(bytes.begin(), bytes.end());
  const size_t space = text.find(' ');
  AgentRoleInfo info;
  info.group_rank = group_rank;
  uint64_t size = 0;
  bool ok = space != std::string::npos && space > 0 && space <= 6 && space + 1 < text.size() && text.size() - space - 1 <= kMaxRoleBytes;
  for (size_t i = 0; ok && i < space; ++i) {
    ok = text[i] >= '0' && text[i] <= '9';
    size = size * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (!ok || size == 0 || size > kMaxLocalWorldSize) {
    throw errors::invalid_argument("elastic agent: the agent at group rank " + std::to_string(group_rank) +
                                   " published a role info that is not \"<local world size> <role>\"");
  }
  info.local_world_size = static_cast<uint32_t>(size);
  info.role = text.substr(space + 1);
  return info;
}

std::vector<WorkerRanks> assign_worker_ranks(std::span<const AgentRoleInfo> agents, uint32_t group_rank) {
  check_agents(agents, group_rank);
  std::vector<const AgentRoleInfo*> by_rank;
  for (const AgentRoleInfo& a : agents) by_rank.push_back(&a);
  const Span world = ranks_within(by_rank, group_rank, 0, by_rank.size());

  // Within the role: agents ordered by (role, group rank), this role's run of them.
  std::vector<const AgentRoleInfo*> by_role = by_rank;
  std::stable_sort(by_role.begin(), by_role.end(), [](const AgentRoleInfo* a, const AgentRoleInfo* b) { return role_order(*a, *b); });
  const AgentRoleInfo& me = agents[group_rank];
  const auto same_role = [&](const AgentRoleInfo* a) { return a->role == me.role; };
  const size_t begin = static_cast<size_t>(std::find_if(by_role.begin(), by_role.end(), same_role) - by_role.begin());
  const size_t end = static_cast<size_t>(std::find_if_not(by_role.begin() + static_cast<ptrdiff_t>(begin), by_role.end(), same_role) -
                                         by_role.begin());
  const size_t at = static_cast<size_t>(std::find(by_role.begin(), by_role.end(), &me) - by_role.begin());
  DAGSIM_ASSERT(begin <= at && at < end);
  const Span role = ranks_within(by_role, at, begin, end);

  std::vector<WorkerRanks> workers(me.local_world_size);
  for (uint32_t local = 0; local < me.local_world_size; ++local) {
    WorkerRanks& w = workers[local];
    w.local_rank = local;
    w.global_rank = world.first + local;
    w.world_size = world.total;
    w.role_rank = role.first + local;
    w.role_world_size = role.total;
    // Each worker's ranks fall within their worlds (the global ranks of a round are 0..world-1).
    DAGSIM_ASSERT(w.global_rank < w.world_size);
    DAGSIM_ASSERT(w.role_rank < w.role_world_size && w.role_world_size <= w.world_size);
  }
  return workers;
}

Environment worker_environment(const Environment& agent, const WorkerRound& round, const WorkerRanks& worker) {
  Environment env = agent;
  env["LOCAL_RANK"] = std::to_string(worker.local_rank);
  env["RANK"] = std::to_string(worker.global_rank);
  env["GROUP_RANK"] = std::to_string(round.group_rank);
  env["ROLE_RANK"] = std::to_string(worker.role_rank);
  env["ROLE_NAME"] = round.role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(round.local_world_size);
  env["WORLD_SIZE"] = std::to_string(worker.world_size);
  env["GROUP_WORLD_SIZE"] = std::to_string(round.group_world_size);
  env["ROLE_WORLD_SIZE"] = std::to_string(worker.role_world_size);
  env["MASTER_ADDR"] = round.master_addr;
  env["MASTER_PORT"] = std::to_string(round.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(round.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(round.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = round.run_id;
  env["TORCHELASTIC_USE_AGENT_STORE"] = round.use_agent_store ? "True" : "False";
  if (!env.contains("NCCL_ASYNC_ERROR_HANDLING")) env["NCCL_ASYNC_ERROR_HANDLING"] = "1";
  env["TORCHELASTIC_ERROR_FILE"] = round.attempt_dir + "/" + std::to_string(worker.local_rank) + "/error.json";
  return env;
}

Environment launcher_environment(Environment agent, uint32_t local_world_size) {
  if (local_world_size > 1 && !agent.contains("OMP_NUM_THREADS")) agent["OMP_NUM_THREADS"] = "1";
  return agent;
}

Environment environment_of(char** environ) {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;  // not NAME=VALUE: no variable to carry
    env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

std::vector<std::string> environ_strings(const Environment& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace dagsim::elastic
