// The network namespaces of a job run (JobSpec::namespaces): one per agent, each with a veth pair
// whose other end is on a bridge in the root namespace, addresses 10.249.N.I/24 (N free on this
// machine, the bridge .254, agent I .I+1); the store listens on the bridge's address. A partition
// is blackhole routes in each namespace towards the agents of the other groups (only `ip` is
// needed: no iptables or nft on every host), healed by deleting them. Each agent's processes see
// a host of their own: a hostname (a UTS namespace) and an /etc/hosts naming every agent's host,
// as on a cluster, so torchrun's MASTER_ADDR (the master agent's hostname) resolves everywhere.
//
// Needs root and iproute2's `ip`: create() throws Error(invalid_argument) saying which is missing.
// Everything made is removed by the destructor (namespaces, links, bridge), also on an exception.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dagsim::scenarios::job {

class Netns {
 public:
  static std::unique_ptr<Netns> create(uint32_t agents);
  ~Netns();
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;

  const std::string& store_address() const { return bridge_addr_; }
  std::string agent_address(uint32_t agent) const;
  std::string ns(uint32_t agent) const;
  // The agent's hostname in its namespace (its own UTS namespace), which every namespace's
  // /etc/hosts maps to its address.
  std::string host_name(uint32_t agent) const;
  // argv run inside agent's namespace (`ip netns exec NS ...`, which execs in place: same pid).
  std::vector<std::string> wrap(uint32_t agent, const std::vector<std::string>& argv) const;
  // Packets from `from`'s namespace to `to`'s address are dropped (and back: call both ways).
  void block(uint32_t from, uint32_t to);
  void unblock(uint32_t from, uint32_t to);

 private:
  Netns() = default;
  void ip(const std::vector<std::string>& args, bool check = true) const;
  void teardown();
  void write_hosts();

  std::string tag_;
  std::string prefix_;  // "10.249.N."
  std::string bridge_addr_;
  uint32_t agents_ = 0;
  uint32_t made_ = 0;  // namespaces made so far (for teardown)
  bool bridge_made_ = false;
  uint32_t hosts_written_ = 0;  // /etc/netns/NS/ folders made so far (for teardown)
};

}  // namespace dagsim::scenarios::job
