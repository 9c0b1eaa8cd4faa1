// LaunchPlan: what `dagsim launch` will do, from torchrun's flags (LaunchArgs), checked before
// anything starts: the rendezvous's settings and store, the agent's options, the workers' command
// and streams. A pure function, so every flag's meaning is tested without a process.
//
// torchrun 1.13's rules, kept:
//  - --nnodes N or MIN:MAX; --nproc_per_node a number, or auto/cpu (this host's cores; torchrun's
//    auto counts GPUs first, and there are none to count here);
//  - --standalone: a c10d rendezvous this agent hosts on a free port, with a fresh run id;
//  - --rdzv_endpoint HOST[:PORT], port 29400 by default for c10d (torchrun's) and 2379 for etcd;
//  - --rdzv_conf keys: join_timeout (600 s), last_call_timeout (30 s), close_timeout (30 s),
//    read_timeout (60 s, the store's), is_host (true/false/1/0/yes/no; unset: inferred from the
//    endpoint's host), store_type (tcp only); and dagsim's keep_alive_interval (5 s),
//    keep_alive_max_attempt (3);
//  - the command: `python3 -u [-m] SCRIPT ARGS`, or SCRIPT ARGS with --no_python.
// Backends: c10d and dagsim (the same: a TCPStore server, PyTorch's or `dagsim store` or hosted
// here), etcd and etcd-v2 (an etcd server, v3 API). static is refused with what to use instead.
// Every refusal is invalid_argument naming the flag and the value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/elastic/elastic_agent.h"
#include "core/rendezvous/rendezvous_settings.h"
#include "net/process_worker_group.h"
#include "scenarios/cli/commands.h"

namespace dagsim::launch {

enum class StoreKind : uint8_t { tcp_store, etcd };

struct LaunchPlan {
  rendezvous::RendezvousSettings settings;
  StoreKind store = StoreKind::tcp_store;
  std::string host;
  uint16_t port = 0;             // 0 with standalone: the OS picks
  std::optional<bool> is_host;   // unset: this host serves the store when the endpoint names it
  runtime::Duration read_timeout = std::chrono::seconds(60);
  elastic::ElasticAgentOptions agent;  // no master_endpoint yet: the launcher adds it
  std::vector<std::string> argv;
  net::StdStreams redirects;
  net::StdStreams tee;
  runtime::Duration grace = std::chrono::seconds(30);
  std::string log_dir;
  std::vector<std::string> warnings;  // rdzv_conf keys torchrun takes and dagsim ignores
};

// `cores`: what auto and cpu mean here.
LaunchPlan plan_launch(const cli::LaunchArgs& args, uint32_t cores);

// torchrun's _matches_machine_hostname: localhost, a loopback address, or this host's name.
bool names_this_host(const std::string& host);

}  // namespace dagsim::launch
