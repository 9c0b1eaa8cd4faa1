// The `dagsim` subcommands (DESIGN.md, "The CLI contract"). Each returns the process exit code:
// 0 all checks passed, 1 a check failed, 2 bad usage or an invalid scenario, 3 an internal error,
// 4 a host limit (wall time, memory) stopped the run before it had a verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launch/launch_args.h"
#include "scenarios/run/runner.h"

namespace dagsim::cli {

enum ExitCode : int { kPassed = 0, kCheckFailed = 1, kBadInput = 2, kInternalError = 3, kResourceLimit = 4 };

// A seed as the command line gives it: decimal digits only, at most 2^64 - 1. "-1", "+1", "",
// " 1" and "18446744073709551616" are refused (a silent wrap or saturation would run another seed
// than the one asked for).
std::optional<uint64_t> parse_seed(std::string_view text);

struct RunArgs {
  std::string file;
  uint64_t seed = 1;
  std::string transport = "sim";
  bool json = false;
  std::string trace_path;  // Chrome trace-event JSON, when set
  std::string trace_level = "network";  // workload | rpc | network (sim/trace.h)
  bool check_determinism = false;
  std::string records_dir;  // write the run's records here, when set
  double max_wall_time_s = 0;   // > 0: overrides the scenario's max_wall_time_ms (run_limits.h)
  uint64_t max_memory_mib = 0;  // > 0: overrides the scenario's max_memory_mib
  bool full_tensors = false;    // every tensor value in the report, however large
  bool trusted_network = false; // tcp: no per-frame MACs
  std::string self_path;        // this binary, to start node processes with
  std::string peers_file;       // tcp: nodes on other hosts, which connect to control_port
  uint16_t control_port = 0;
  std::string gpus = "sim";     // the nodes' GPUs: sim | sim-kernels | cuda (RunOptions::gpus)
};
int run_command(const RunArgs& args);
// --gpus cuda (gpus.cc): a maker of this machine's GPUs for the nodes, null where the cuda backend
// is not built; and why they cannot run here ("" when they can).
scenarios::CudaGpuMaker cuda_gpu_maker();
std::string cuda_unavailable();
// The flags beyond the seed that replay_command needs to reproduce a run of `args`: the transport,
// trusted network, peers file and control port, and the host limits given as flags.
std::string replay_flags(const RunArgs& args);

struct NodeArgs {
  std::string scenario_file;
  std::string node_name;
  std::optional<uint64_t> seed;  // the launcher's seed rules; one given must equal it
  std::string peers_file;
  std::string records_dir;
  int listen_fd = -1;
  int control_fd = -1;
  std::string control_address;  // HOST:PORT of a launcher on another host
  bool trusted_network = false;
  std::string gpus = "sim";      // the node's GPUs ([devices]): sim | sim-kernels | cuda
};
// One node process of a TCP run (scenarios/run/tcp_node.h).
int node_command(const NodeArgs& args);

struct JudgeArgs {
  std::string dir;  // a records directory (dagsim run --records DIR)
  bool json = false;
  bool full_tensors = false;
};
// Judges a run from its records alone and prints the same report as the run did.
int judge_command(const JudgeArgs& args);

// A run's records directory, judged as `dagsim judge` judges it: the scenario it ran, the file it
// was given as, and the result. nullopt, with the reason on stderr after `who`, on records or a
// scenario that cannot be read.
struct JudgedRun {
  scenarios::Scenario scenario;
  std::string file;
  scenarios::RunResult result;
};
std::optional<JudgedRun> judge_records_dir(const std::string& dir, const scenarios::ReportOptions& report,
                                           const std::string& who);

// `dagsim report PATH [-o OUT.html]`: a run's records directory, or a `dagsim check --json`
// summary, as one self-contained HTML page (html_report.h).
struct ReportArgs {
  std::string path;
  std::string out = "report.html";
};
int report_command(const ReportArgs& args);

int validate_command(const std::string& file);
// The same check, printing only errors.
int validate_command_quiet(const std::string& file);

struct CheckArgs {
  std::string file;
  std::string seeds = "1..10";  // A..B inclusive, or one seed
  unsigned jobs = 1;
  bool json = false;
  std::string self_path;  // this binary, to run each seed in its own process
  double max_wall_time_s = 0;   // passed to each seed's run
  uint64_t max_memory_mib = 0;
  std::string junit;      // --junit FILE: JUnit XML, one test case per seed and check
  std::string html;       // --html FILE: the sweep's page (as `dagsim report` draws --json's summary)
  bool shrink = false;    // --shrink: after the sweep, shrink the first failing seed (shrink_command)
  // Said with the summary, on every output (text, JSON, JUnit, HTML): a [job] scenario's is that
  // the job is real and only its fault schedule is seeded. Set by check_command.
  std::string note;
  bool progress = true;   // a progress line on stderr (--no-progress: none)
  bool probes = false;    // --probes: the probe table after the summary (sweep_probes.h)
  std::string shard;      // --shard I/N, or N with the index from the scheduler (shard_plan.h); "": every seed
  std::string results;    // --results FILE: the seeds' results as data, for `dagsim merge` (shard_results.h)
};
int check_command(const CheckArgs& args);

// `dagsim merge SHARD.json...`: the results of a sharded check's shards (check --shard --results)
// as one sweep, reported as the unsharded check reports it (merge_command.cc).
struct MergeArgs {
  std::vector<std::string> shards;
  bool json = false;
  std::string junit;
  std::string html;
  bool probes = false;
};
int merge_command(const MergeArgs& args);

struct StoreArgs {
  std::string host = "127.0.0.1";  // the address to listen on (0.0.0.0: every interface)
  uint16_t port = 0;               // 0: the OS picks
  size_t max_connections = 0;      // 0: as many as the file-descriptor limit allows
  std::string record;              // --record FILE: every client operation, a JSON line each
  uint64_t record_max_bytes = uint64_t{1} << 30;  // --record-max-bytes: the record's cap
  size_t record_value_bytes = 1024;               // --record-value-bytes: longer values summarised
  std::string faults;                // --faults FILE: the fault layer's rules (net/tcpstore/store_faults.h), re-read on SIGUSR1
  uint64_t seed = 0;                 // --seed: the fault layer's draws
  std::vector<std::string> restore;  // --restore FILE...: earlier records replayed before it listens
};
// Serves the built-in store over PyTorch 1.13's TCPStore protocol until SIGTERM or SIGINT.
int store_command(const StoreArgs& args);

struct CredentialsArgs {
  std::string action;  // ca | issue | revoke
  std::string ca_dir;
  std::string out_dir;
  std::vector<std::string> names;
  int days = 30;
};
// `dagsim credentials` (credentials_command.cc).
int credentials_command(const CredentialsArgs& args);

// `dagsim shrink FILE --seed N`: a smaller scenario that fails the same way (scenarios/shrink/,
// shrink_command.cc). Exit 0: the shrunk file was written; 2: bad usage, an invalid scenario, or a
// seed that passes (nothing to shrink); 3: an internal error.
struct ShrinkArgs {
  std::string file;
  uint64_t seed = 0;
  std::string check;              // --check KIND: the failing check to keep failing ("": the first)
  uint64_t max_runs = 300;        // candidate runs at most
  double max_wall_time_s = 900;   // the search's wall time at most
  std::string out;                // -o: default FILE's stem + ".seedN.shrunk.toml" here
  std::string dagsim;             // --dagsim PATH: the binary that runs candidates ("": this one)
  bool json = false;
  bool progress = true;           // one line per accepted step on stderr
  bool quiet = false;             // no summary on stdout (check --shrink prints the path itself)
  std::string self_path;          // this binary
};
// `*written`, when given, receives the shrunk file's path once it is written.
int shrink_command(const ShrinkArgs& args, std::string* written = nullptr);

// `dagsim launch`: launch/launcher.h (its flags are launch::LaunchArgs, read by launch/launch_flags.h).
using LaunchArgs = launch::LaunchArgs;

}  // namespace dagsim::cli
