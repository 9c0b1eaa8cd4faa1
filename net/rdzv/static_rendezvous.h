// The "static" rendezvous backend, torchrun 1.13's default (static_tcp_rendezvous.py), on dagsim's
// rendezvous: `--nnodes N --node_rank R --master_addr A --master_port P`.
//
// torchrun's rules, kept:
//  - the group rank is the node rank (the rendezvous option "rank", which torchrun sets from
//    --node_rank; "rank is absent" is refused as there); the world size is max_nodes;
//  - the store is a TCPStore at the endpoint, which torchrun makes MASTER_ADDR:MASTER_PORT when
//    --rdzv_endpoint is empty; node rank 0 serves it, every other node is its client (is_host is
//    the node rank's to decide, not the conf's); a port is required ("Port is absent in endpoint");
//  - its "timeout" option (600 s) bounds the wait for every node: it is the join timeout here;
//  - the agents give workers MASTER_ADDR:MASTER_PORT, the agents' own store, and
//    TORCHELASTIC_USE_AGENT_STORE=True (the launcher's part, launch_plan.h).
// How: the dynamic handler (core/rendezvous) with min = max = N, whose ranks follow the node order,
// over nodes whose address begins with the zero-padded node rank (static_node()): rank R is the
// R-th node. Ranks and the world size never change. Departures, each said where it bites:
//  - MIN:MAX with MIN != MAX is refused (torchrun's static silently waits for MAX);
//  - port 0 is refused (node rank 0 would serve a port the others cannot know);
//  - a restart re-forms the same round with every agent (the others' workers restart with it, not
//    counted); torchrun's static agents restart alone, and the others find out when a collective
//    with the restarted workers fails;
//  - two agents given the same node rank form a round whose ranks cannot all match their node
//    ranks: the launcher refuses to start workers then, naming it, and closes the job so the others
//    stop (torchrun hangs or fails to bind).
#pragma once

#include <memory>

#include "core/rendezvous/rendezvous_parameters.h"
#include "net/rdzv/rendezvous_registry.h"

namespace dagsim::net {

// What a static rendezvous will be, checked without I/O: its store (is_host: node rank 0) and rank.
struct StaticTarget {
  RendezvousTarget store;
  uint32_t rank = 0;
};
// Throws invalid_argument in PyTorch's words where it has them.
StaticTarget check_static_parameters(const rendezvous::RendezvousParameters& params);

// This node as the static rendezvous orders it: its address prefixed by the node rank, padded so
// that the order of addresses is the order of ranks.
rendezvous::NodeDesc static_node(const rendezvous::NodeDesc& node, uint32_t rank);

std::unique_ptr<Rendezvous> create_static_handler(const rendezvous::RendezvousParameters& params,
                                                  const RendezvousContext& context);

}  // namespace dagsim::net
