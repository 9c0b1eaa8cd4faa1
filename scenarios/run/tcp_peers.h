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

// Throws Error(invalid_argument) naming the file and what is wrong: unreadable, malformed, a port
// out of range, nodes that are not `scenario`'s in its order.
PeersFile read_peers_file(const std::string& path, const Scenario& scenario);
// Throws Error(invalid_argument) naming the path when it cannot be written.
void write_peers_file(const std::string& path, const PeersFile& peers);

}  // namespace dagsim::scenarios
