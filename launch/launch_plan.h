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
//  - the command: `python3 -u [-m] SCRIPT ARGS`, or SCRIPT ARGS with --no_python.
// One rule of dagsim's own: --rdzv_id may not hold a '/' (it names the log folder; torchrun's
// "../../x" writes above it).
// Backends: c10d and dagsim (the same: a TCPStore server, PyTorch's or `dagsim store` or hosted
// here), etcd and etcd-v2 (an etcd server, v3 API). static is refused with what to use instead.
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
};

// `cores`: what auto and cpu mean here.
LaunchPlan plan_launch(const LaunchArgs& args, uint32_t cores);

}  // namespace dagsim::launch
