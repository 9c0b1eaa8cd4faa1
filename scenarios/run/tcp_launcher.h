// The TCP launcher (`dagsim run FILE --transport tcp`, issue 10): runs a scenario's nodes as local
// processes on loopback, applies its fault timeline to them, gathers their records and hands them
// to the same judge as the simulator's.
//
// It is the runtime::Cluster of a TCP run (TcpCluster, in the .cc): `kill` is a SIGKILL of the
// node's process at its time, `restart` a fresh process (a new incarnation, counted by the node
// beside its records), `pause`/`resume` are SIGSTOP/SIGCONT, `crash` tells the process to go
// silent (its delay/drop layer holds all its traffic, so peers learn through timeouts as in the
// simulator), partitions block the directed pairs inside the senders' transports. The scenario's
// clock is the launcher's steady time since the run began.
//
// Ports are the OS's: the launcher binds one socket per node on 127.0.0.1 (a port the OS picked,
// bound by number) and hands it to that node's process, listening, when the process starts. From a
// node's death until its restart the launcher holds no socket there, so its address refuses
// connections as a dead host's does; the restart binds the same port again (docs/tcp.md's table).
// The scenario's bytes, their SHA-256 and the seed reach every node over its control link. Each node process
// holds its own certificate of a CA the launcher makes for the run (in a private temporary folder,
// gone with the run; net/credentials.h), unless DAGSIM_SECRET / DAGSIM_SECRET_FILE chose a shared
// secret. Each node process is started through net/process (process.h), in a process group
// of its own: it and all it starts die with the launcher, SIGKILL included, and are killed on
// SIGTERM, SIGINT, errors and at the end; none is left behind.
//
// A run ends as soon as its work and its cleanup are done: when every running node's foreground
// work has ended (and the workload's end time, if it has one, has passed), each node settles (its
// contexts released, its queues empty; at most the workload's drain time), takes its final
// snapshot and writes its record. max_virtual_time bounds the run's wall time.
#pragma once

#include <functional>
#include <string>

#include "scenarios/format/scenario.h"
#include "scenarios/run/records.h"

namespace dagsim::scenarios {

struct TcpRunOptions {
  uint64_t seed = 1;
  // The scenario as the launcher read it: its bytes go to every node over the control link, with
  // their SHA-256 and the seed (nodes never read the user's file again); the file name is for
  // messages. A node on another host checks its own copy against the digest.
  std::string scenario_file;
  std::string scenario_text;
  std::string dagsim_binary;  // the executable to run `dagsim node` with
  // Where the nodes write their records (and the launcher the run's); "" for a temporary folder,
  // removed at the end.
  std::string records_dir;
  bool trusted_network = false;
  // Called now and then with the scenario's time (progress lines).
  std::function<void(runtime::TimePoint now)> progress;
  // Called with each node process's pid when it starts (tests signal them).
  std::function<void(const std::string& node, int pid)> on_process;
  // Nodes on other hosts (docs/tcp.md): a peers file naming where every node listens. The launcher
  // then starts no process: each node is started on its host with `dagsim node ... --control
  // THIS_HOST:PORT` and connects to `control_port` (0: one the OS picks, told to on_control_port).
  // The launcher's credentials come from DAGSIM_CREDENTIALS (a certificate naming "launcher" of the
  // nodes' CA), or a shared secret from DAGSIM_SECRET or DAGSIM_SECRET_FILE, the same on every host. Kills,
  // crashes and partitions apply as locally; pauses and restarts need the node's host and are
  // refused before the run.
  std::string peers_file;
  uint16_t control_port = 0;
  std::function<void(uint16_t port)> on_control_port;
  // The nodes' GPUs ([devices]): passed to each node process it starts (dagsim node --gpus).
  std::string gpus = "sim";
};

// Runs `scenario` over TCP and gathers its records (written under options.records_dir when set).
// Throws Error(invalid_argument) for an environment that cannot run it (no free port, a node
// process that cannot start), naming what failed.
RunRecords record_scenario_tcp(const Scenario& scenario, const TcpRunOptions& options);

}  // namespace dagsim::scenarios
