// `dagsim node`: one node process of a TCP run (scenarios/run/tcp_node.h). Bad input (a scenario
// that does not load, an unknown node name, a malformed peers file, no shared secret) exits 2 with
// a message naming it.
#include <iostream>

#include "core/base/error.h"
#include "scenarios/cli/commands.h"
#include "scenarios/run/tcp_node.h"

namespace dagsim::cli {

int node_command(const NodeArgs& args) {
  scenarios::TcpNodeOptions options;
  options.scenario_file = args.scenario_file;
  options.node_name = args.node_name;
  options.seed = args.seed;
  options.peers_file = args.peers_file;
  options.records_dir = args.records_dir;
  options.listen_fd = args.listen_fd;
  options.control_fd = args.control_fd;
  options.control_address = args.control_address;
  options.trusted_network = args.trusted_network;
  options.gpus = args.gpus;
  options.make_cuda_gpu = cuda_gpu_maker();
  try {
    return scenarios::run_tcp_node(options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument && e.code() != ErrorCode::invalid_scenario) throw;
    std::cerr << "dagsim node " << args.node_name << ": " << e.detail() << "\n";
    return kBadInput;
  }
}

}  // namespace dagsim::cli
