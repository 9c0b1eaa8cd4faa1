// The node process of a TCP run (`dagsim node`, issue 10): one node of a scenario, with the same
// workload code as in the simulator, on real time and real sockets.
//
// One OS thread runs everything: IoScheduler runs the node's fibers (NodeFibers, as in the
// simulator) and, when none is ready, its I/O and timers (RealClock, TcpTransport). The process's
// main context runs the control loop: it starts the node when the launcher says so, applies the
// faults that happen inside a process (crash: silence; partitions: blocked links), reports when
// the node's foreground work begins and ends, and finishes: it waits until the workload is
// settled and nothing it sent is still queued (at most drain_time), takes the final snapshot
// (at_end hooks), writes its record and reports its figures.
//
// Its incarnation is the next number after the last one recorded beside its records
// (DIR/incarnations/NAME), written before any connection opens, so a process restarted by anyone
// is a new incarnation (see Note [where an incarnation comes from] in transport.h). Its record is
// sent to the launcher whenever it changed, every 50 ms (the launcher writes nodes/NAME.INC.json),
// so a process killed with SIGKILL leaves what it had observed until shortly before, whichever
// host it ran on. Log lines (refused peers, failed connections) go to DIR/logs/NAME.INC.log, and
// refusals to stderr too.
//
// The launcher is local (--control-fd: a socket pair it made) or on another host (--control
// HOST:PORT: a TCP connection, authenticated with the cluster's secret; docs/tcp.md). Its first
// message is the run's setup: the scenario's bytes, their SHA-256 and the seed. The node runs
// exactly that; a node whose own copy (--scenario) has another digest, or given another --seed,
// refuses to run and tells the launcher why, naming both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "scenarios/run/node_gpus.h"

namespace dagsim::scenarios {

struct TcpNodeOptions {
  // This host's copy of the scenario: needed with control_address (the handshake names the
  // cluster's size), checked against the launcher's digest; a local node gets the launcher's bytes.
  std::string scenario_file;
  std::string node_name;
  // The run's seed is the launcher's; one given here must equal it.
  std::optional<uint64_t> seed;
  std::string peers_file;
  std::string records_dir;
  int listen_fd = -1;   // an inherited listening socket; -1: listen on the peers file's port
  int control_fd = -1;         // a local launcher's control link (control_link.h)
  std::string control_address; // or a launcher's control port on another host, HOST:PORT
  bool trusted_network = false;
  // The node's GPUs ([devices]), as RunOptions::gpus; the maker makes real ones for "cuda".
  std::string gpus = "sim";
  CudaGpuMaker make_cuda_gpu;
};

// Runs the node until the launcher says exit, or the control link closes (the launcher died).
// Returns the process's exit code: 0, or 2 for bad input (a message on stderr names it).
int run_tcp_node(const TcpNodeOptions& options);

// The incarnation this start of `node` gets in the launcher's run `run`: one more than the last
// recorded under `records_dir` for that run, 0 if none (a records folder a hand-started node
// used in an earlier run starts it at 0 again: its first life is not a restart). Persisted before
// it returns. Throws Error(invalid_argument) naming the file.
uint32_t next_incarnation(const std::string& records_dir, const std::string& node, const std::string& run);

}  // namespace dagsim::scenarios
