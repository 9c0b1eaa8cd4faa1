// The static backend (static_rendezvous.h): checks torchrun's rules, then makes the c10d
// rendezvous with node rank 0 as the store's host and this node ordered by its node rank.
#include "net/rdzv/static_rendezvous.h"

#include <cstdio>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net {

namespace {

// c10d's options with the host decided by the node rank, and static's "timeout" as the join
// timeout (its TCPStore waited that long for every node).
rendezvous::RendezvousParameters as_c10d(const rendezvous::RendezvousParameters& params, const StaticTarget& target) {
  rendezvous::RendezvousParameters c10d = params;
  c10d.set("is_host", target.rank == 0 ? "true" : "false");
  c10d.erase("rank");
  if (const std::optional<std::string> timeout = params.get("timeout")) {
    if (!params.get("join_timeout")) c10d.set("join_timeout", *timeout);
    c10d.erase("timeout");
  }
  return c10d;
}

}  // namespace

StaticTarget check_static_parameters(const rendezvous::RendezvousParameters& params) {
  StaticTarget target;
  const std::optional<int64_t> rank = params.get_as_int("rank");
  if (!rank) throw errors::invalid_argument("rank is absent in RendezvousParameters.Try add --node_rank to the cmd request");
  if (params.min_nodes() != params.max_nodes()) {
    throw errors::invalid_argument("the static backend takes a fixed number of nodes, N (" + std::to_string(params.min_nodes()) +
                                   ":" + std::to_string(params.max_nodes()) +
                                   " given; torchrun's would wait for the maximum): for MIN:MAX use --rdzv_backend c10d");
  }
  if (*rank < 0 || *rank >= params.max_nodes()) {
    throw errors::invalid_argument("the node rank " + std::to_string(*rank) + " must be from 0 to " +
                                   std::to_string(params.max_nodes() - 1) + " (--nnodes " +
                                   std::to_string(params.max_nodes()) + ")");
  }
  target.rank = static_cast<uint32_t>(*rank);
  const std::string endpoint = params.endpoint();
  if (endpoint.find_first_not_of(" \t") == std::string::npos) {
    throw errors::invalid_argument("endpoint is absent in RendezvousParametersTry add --master_port and --master_addr to the cmd request");
  }
  // A port of 0 means absent here: node rank 0 would serve a port the others cannot know.
  const rendezvous::RendezvousEndpoint where = rendezvous::parse_rendezvous_endpoint(endpoint, 0);
  if (where.port == 0) {
    throw errors::invalid_argument("Port is absent in endpoint: " + printable(endpoint) + ". Try launching with --master_port");
  }
  // c10d's own checks (read_timeout, store_type) apply to the store this is.
  const rendezvous::RendezvousParameters c10d = as_c10d(params, target);
  target.store = check_rendezvous_parameters(
      rendezvous::RendezvousParameters("c10d", c10d.endpoint(), c10d.run_id(), c10d.min_nodes(), c10d.max_nodes(), c10d.config()));
  if (target.store.file_store) throw errors::invalid_argument("the static backend's store is a TCPStore (store_type tcp)");
  return target;
}

rendezvous::NodeDesc static_node(const rendezvous::NodeDesc& node, uint32_t rank) {
  static_assert(rendezvous::kMaxRendezvousNodes <= 100000, "five digits order every rank");
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%05u.", rank);
  rendezvous::NodeDesc ordered = node;
  ordered.addr = prefix + node.addr;
  return ordered;
}

std::unique_ptr<Rendezvous> create_static_handler(const rendezvous::RendezvousParameters& params,
                                                  const RendezvousContext& context) {
  const StaticTarget target = check_static_parameters(params);
  RendezvousContext ordered = context;
  ordered.node = static_node(context.node, target.rank);
  return create_c10d_handler(as_c10d(params, target), ordered);
}

}  // namespace dagsim::net
