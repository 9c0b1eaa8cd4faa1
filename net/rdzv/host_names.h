// Host names as torchrun reads them: this machine's fully qualified name (Python's
// socket.getfqdn(), which node descriptors and MASTER_ADDR carry) and whether an endpoint's host
// names this machine (PyTorch's _matches_machine_hostname, which decides that a c10d agent hosts
// the store), whether a host resolves at all, and the node descriptors a launcher joins as
// (PyTorch's _NodeDescGenerator).
//
// These read the host's resolver (getaddrinfo, gethostbyaddr): they may block on DNS, so they
// are for launchers, before or beside the fibers' work, never inside the simulator.
#pragma once

#include <atomic>
#include <string>

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

// "{fqdn}_{pid}_{local_id}": this machine, this process, and a number that counts the handlers
// this generator made, from 0. Safe to call from any thread.
class NodeDescGenerator {
 public:
  rendezvous::NodeDesc generate();

 private:
  std::atomic<uint64_t> local_id_{0};
};

}  // namespace dagsim::net
