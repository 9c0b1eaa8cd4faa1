// LaunchPlan: what `dagsim launch` will do, from torchrun's flags (LaunchArgs), checked before
// anything starts: the rendezvous's settings and store, the agent's options, the workers' command
// and streams. A pure function, so every flag's meaning is tested without a process.
//
// torchrun 1.13's rules, kept:
//  - --nnodes N or MIN:MAX; --nproc_per_node a number, or auto/cpu (this host's cores; torchrun's
//    auto counts GPUs first, and there are none to count here);
//  - --standalone: a c10d rendezvous this agent hosts on a free port, with a fresh run id;
//  - --rdzv_endpoint and --rdzv_conf become RendezvousParameters, read as PyTorch reads them
//    (core/rendezvous/rendezvous_parameters.h): HOST[:PORT], empty for localhost, the backend's
//    default port (29400 for c10d, 2379 for etcd); the conf's timeouts, read_timeout, is_host,
//    store_type, protocol; checked here as the backend will check them at creation
//    (net/rdzv/rendezvous_registry.h), so nothing starts with a value that would be refused;
//  - the command: `PYTHON -u [-m] SCRIPT ARGS`, or SCRIPT ARGS with --no_python, or with --run_path
//    `PYTHON -u -c <runpy.run_path> SCRIPT ARGS` (PYTHON: --python, python3 by default);
//  - static (the default backend): a fixed --nnodes N, --node_rank from 0 to N-1, the store at
//    --rdzv_endpoint or else MASTER_ADDR:MASTER_PORT (net/rdzv/static_rendezvous.h), which is also
//    the workers' master (TORCHELASTIC_USE_AGENT_STORE=True). With any other backend --node_rank,
//    --master_addr and --master_port are ignored, as torchrun ignores them, with a warning.
// One rule of dagsim's own: --rdzv_id may not hold a '/' (it names the log folder; torchrun's
// "../../x" writes above it).
// Backends: static, c10d and dagsim (a TCPStore server, PyTorch's or `dagsim store` or hosted
// here), etcd and etcd-v2 (an etcd server, v3 API).
// Every refusal is invalid_argument naming the flag and the value, then PyTorch's words.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_parameters.h"
#include "core/rendezvous/rendezvous_settings.h"
#include "net/process_worker_group.h"
#include "net/rdzv/rendezvous_registry.h"
#include "launch/launch_args.h"

namespace dagsim::launch {

struct LaunchPlan {
  // What the registry creates the rendezvous from (with --standalone: c10d on localhost, port 0,
  // is_host true, a fresh run id).
  std::optional<rendezvous::RendezvousParameters> params;
  rendezvous::RendezvousSettings settings;  // the handler's, from params
  net::RendezvousTarget target;             // the store's endpoint, read timeout and is_host
  elastic::ElasticAgentOptions agent;  // no master_endpoint yet: the launcher adds it
  std::vector<std::string> argv;
  net::StdStreams redirects;
  net::StdStreams tee;
  runtime::Duration grace = std::chrono::seconds(30);
  std::string log_dir;
  std::vector<std::string> warnings;  // rdzv_conf keys torchrun takes and dagsim ignores
  // static: the workers' MASTER_ADDR and MASTER_PORT, the agents' store.
  std::optional<rendezvous::RendezvousEndpoint> static_master;
};

// --run_path's program: sys.argv becomes SCRIPT ARGS and the script runs as __main__.
inline constexpr const char* kRunPathCode =
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

// `cores`: what auto and cpu mean here.
LaunchPlan plan_launch(const LaunchArgs& args, uint32_t cores);

}  // namespace dagsim::launch
