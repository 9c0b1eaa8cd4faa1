// PeersFile: where a TCP run's nodes listen, and which run they belong to (issue 10). The launcher
// writes one for its local processes (ports the OS chose); an operator writes one by hand for a
// run across hosts (docs/tcp.md). JSON:
//   {"cluster_id": "0x0123456789abcdef",
//    "nodes": [{"name": "worker0", "host": "10.0.0.1", "port": 7001}, ...]}
// The nodes are the scenario's, in its order. cluster_id tells this run's connections from any
// other's on the same hosts (the handshake refuses another cluster's peers): a fresh random number
// per run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/format/scenario.h"

namespace dagsim::scenarios {

struct PeerAddress {
  std::string name;
  std::string host;
  uint16_t port = 0;
};

struct PeersFile {
  uint64_t cluster_id = 0;
  std::vector<PeerAddress> nodes;
};

// A peers file lists a few nodes per line: 4 MiB is room for the largest cluster and bounds
// what /dev/zero or a wrong path can make us read.
inline constexpr size_t kMaxPeersFileBytes = 4u << 20;

// Throws Error(invalid_argument) naming the file and what is wrong: not a regular file, over
// kMaxPeersFileBytes, malformed, a cluster id that is not 1-16 hex digits, a host that is no
// address or host name, a port out of range, two nodes at one host and port, nodes that are not
// `scenario`'s in its order. Names and values from the file are printed escaped and cut.
PeersFile read_peers_file(const std::string& path, const Scenario& scenario);

// Why `host` is no IPv4 or IPv6 address and no host name ("is empty", "is not an IPv4
// address"), or nullopt when it is fine.
std::optional<std::string> host_problem(const std::string& host);

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// Splits "HOST:PORT" ("[::1]:PORT" for IPv6) and checks both; throws invalid_argument starting
// with `what` (the flag: "--control") and the text, escaped.
HostPort parse_host_port(const std::string& text, const std::string& what);
// Throws Error(invalid_argument) naming the path when it cannot be written.
void write_peers_file(const std::string& path, const PeersFile& peers);

}  // namespace dagsim::scenarios
