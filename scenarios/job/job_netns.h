// The network namespaces of a job run (JobSpec::namespaces): one per agent, each with a veth pair
// whose other end is on a bridge in the root namespace, addresses 10.249.N.I/24 (N free on this
// machine, the bridge .254, agent I .I+1); the store listens on the bridge's address. A partition
// is blackhole routes in each namespace towards the agents of the other groups (only `ip` is
// needed: no iptables or nft on every host), healed by deleting them. Each agent's processes see
// a host of their own: a hostname (a UTS namespace) and an /etc/hosts naming every agent's host,
// as on a cluster, so torchrun's MASTER_ADDR (the master agent's hostname) resolves everywhere.
//
// Needs root and iproute2's `ip`: create() throws Error(invalid_argument) saying which is missing.
// Everything made is removed by the destructor (namespaces, links, bridge, /etc/netns/NS and
// /etc/netns itself when it made it), also on an exception. Names carry the run's whole pid
// (dj<pid>n<i>, dj<pid>h<i>, dj<pid>br); create() first removes what runs whose pid is dead left
// behind (killed with SIGKILL), and chooses its /24 and makes its links under a host-wide lock
// (/run/dagsim-netns.lock, else /tmp's), so two runs at once never take the same one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dagsim::scenarios::job {

// How many partitions hold each (from, to) pair blocked: the route is added by the first and
// deleted by the last, so overlapping partitions neither clash (EEXIST) nor heal each other.
class BlockCounts {
 public:
  // True when the pair was not blocked before (the route must be added).
  bool add(uint32_t from, uint32_t to) { return ++counts_[{from, to}] == 1; }
  // True when this was its last hold (the route must be deleted); false, and nothing changes,
  // for a pair not held.
  bool remove(uint32_t from, uint32_t to) {
    const auto it = counts_.find({from, to});
    if (it == counts_.end()) return false;
    if (--it->second > 0) return false;
    counts_.erase(it);
    return true;
  }
  uint32_t count(uint32_t from, uint32_t to) const {
    const auto it = counts_.find({from, to});
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> counts_;
};

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
  // Counted (BlockCounts): a pair stays blocked until every block of it is unblocked. Neither
  // throws: a route `ip` could not add or delete is reported in the returned text ("" if fine).
  std::string block(uint32_t from, uint32_t to);
  std::string unblock(uint32_t from, uint32_t to);

 private:
  Netns() = default;
  // `ip ARGS`: throws when it fails and `check`; returns its exit code and output.
  std::pair<int, std::string> ip(const std::vector<std::string>& args, bool check = true) const;
  void teardown();
  void write_hosts();

  std::string tag_;
  std::string prefix_;  // "10.249.N."
  std::string bridge_addr_;
  uint32_t agents_ = 0;
  uint32_t made_ = 0;  // namespaces made so far (for teardown)
  bool bridge_made_ = false;
  uint32_t hosts_written_ = 0;  // /etc/netns/NS/ folders made so far (for teardown)
  bool etc_netns_made_ = false;  // /etc/netns did not exist before this run
  BlockCounts blocked_;
};

}  // namespace dagsim::scenarios::job
