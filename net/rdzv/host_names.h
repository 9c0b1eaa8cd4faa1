// Host names as torchrun reads them: this machine's fully qualified name (Python's
// socket.getfqdn(), which node descriptors and MASTER_ADDR carry) and whether an endpoint's host
// names this machine (PyTorch's _matches_machine_hostname, which decides that a c10d agent hosts
// the store), whether a host resolves at all, and the node descriptors a launcher joins as
// (PyTorch's _NodeDescGenerator); and the address a launcher names its node by when the host's
// name would send other hosts to their own loopback (node_address).
//
// These read the host's resolver (getaddrinfo, gethostbyaddr): they may block on DNS, so they
// are for launchers, before or beside the fibers' work, never inside the simulator.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "core/rendezvous/rendezvous_parameters.h"
#include "core/rendezvous/rendezvous_state.h"

namespace dagsim::net {

// The host's name resolved to an address and back: the first of that name and its aliases with a
// dot in it, else that name; the host's own name when it does not resolve ("localhost" when the
// host has no name).
std::string machine_fqdn();

// True for "localhost", a loopback address (127.0.0.0/8, ::1, in any spelling), this host's name
// or fully qualified name, the canonical name getaddrinfo gives for it, or one of the addresses
// it resolves to. May say false for a CNAME or a secondary NIC's address, as PyTorch's does.
bool matches_machine_hostname(const std::string& host);

// An empty string when `host` resolves to at least one address; otherwise the resolver's words.
std::string resolve_error(const std::string& host);

// The name a node gives the other hosts of its job (in its node descriptor, MASTER_ADDR and its
// events), and why it is not the host's name when it is not.
struct NodeAddress {
  std::string host;
  std::string warning;  // empty when `host` is the host's fully qualified name, used as torchrun does
};

// What the choice reads from the host, gathered by node_address (tests give their own).
struct NodeAddressFacts {
  std::string fqdn;                    // machine_fqdn()
  std::vector<std::string> addresses;  // what fqdn resolves to; empty when it does not resolve
  // The local address of a UDP socket connected to the endpoint (the kernel's route choice: no
  // packet is sent), or empty with route_error saying why there is none.
  std::string routed;
  std::string route_error;
};

// torchrun names a node by getfqdn(). Where that name resolves only to loopback (Debian's
// 127.0.1.1, a container's 127.0.0.1) or not at all, every other host that resolves it reaches
// itself, so a job across hosts cannot form its workers' group. Then, when the endpoint is reached
// over an interface other than loopback, the node is named by that interface's address, with a
// warning saying so; otherwise (a loopback endpoint: the job is on this host; no endpoint: a file
// store; a name with a usable address) by the name. No route to the endpoint keeps the name, with
// a warning naming the route's error. Pure: the facts say what the host would answer.
NodeAddress choose_node_address(const NodeAddressFacts& facts, const std::optional<rendezvous::RendezvousEndpoint>& endpoint);

// choose_node_address on this host's answers; `endpoint` is the rendezvous store's (nullopt for a
// file store). Reads the resolver, so it may block on DNS (see above).
NodeAddress node_address(const std::optional<rendezvous::RendezvousEndpoint>& endpoint);

// "{addr}_{pid}_{local_id}": this machine (its fully qualified name, or the address given), this
// process, and a number that counts the handlers this generator made, from 0. Safe to call from
// any thread.
class NodeDescGenerator {
 public:
  NodeDescGenerator() = default;
  explicit NodeDescGenerator(std::string addr) : addr_(std::move(addr)) {}
  rendezvous::NodeDesc generate();

 private:
  std::optional<std::string> addr_;
  std::atomic<uint64_t> local_id_{0};
};

}  // namespace dagsim::net
