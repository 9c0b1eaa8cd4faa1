// dagsim: the command line (DESIGN.md, "The CLI contract").
//   dagsim run FILE [--seed N] [--transport sim] [--json] [--trace OUT.json [--trace-level L]] [--check-determinism]
//        [--records DIR] [--max-wall-time S] [--max-memory MIB] [--full-tensors]
//   dagsim judge DIR [--json] [--full-tensors]
//   dagsim report PATH [-o OUT.html]
//   dagsim validate FILE
//   dagsim shrink FILE --seed N [--check KIND] [--max-runs R] [--max-wall-time S] [-o OUT.toml] [--dagsim PATH]
//                 [--json] [--no-progress]   (a smaller scenario that fails the same way)
//   dagsim check FILE [--seeds A..B] [--jobs N] [--json] [--junit OUT.xml] [--html OUT.html] [--no-progress]
//                [--max-wall-time S] [--max-memory MIB] [--probes] [--shard I/N|N --results FILE]
//   dagsim merge SHARD.json... [--json] [--junit OUT.xml] [--html OUT.html] [--probes]
//   dagsim node --scenario FILE --name NODE --peers FILE --records DIR --control HOST:PORT
//        (one node of a TCP run on its host)
//   dagsim store [--port P] [--host H]   (the built-in store for PyTorch's TCPStore clients)
//   dagsim launch [torchrun's flags] SCRIPT ARGS   (torchrun's interface on dagsim's agent)
//   dagsim help [COMMAND]   (the commands; with COMMAND, the same as dagsim COMMAND --help)
// Exit codes: 0 passed, 1 a check failed, 2 bad usage or an invalid scenario, 3 an internal error
// (an assert, an uncaught exception: a bug in dagsim, never a verdict on the scenario), 4 a host
// limit (wall time, memory) stopped the run before it had a verdict.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <malloc.h>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <thread>
#include <unistd.h>

#include "core/base/printable.h"
#include "compute/kernels/vector_math.h"
#include "launch/launch_flags.h"
#include "launch/launch_log.h"
#include "launch/launcher.h"
#include "launch/slurm_env.h"
#include "scenarios/cli/build_info.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/help_command.h"

namespace {

// An assert aborts; the contract says an internal error exits 3. The message is already on
// stderr (DAGSIM_ASSERT prints it with the replay command first).
extern "C" void on_fatal_signal(int signal) {
  const char text[] = "dagsim: internal error (fatal signal); this is a bug in dagsim\n";
  (void)!write(STDERR_FILENO, text, sizeof(text) - 1);
  std::_Exit(dagsim::cli::kInternalError + 0 * signal);
}

std::string self_path(const char* argv0) {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n > 0) return std::string(buffer, static_cast<size_t>(n));
  return argv0;
}

// `dagsim launch`: torchrun's command line (launch/launch_flags.h), Slurm's defaults for what it
// left out (launch/slurm_env.h), then the Launcher. Every refusal exits 2 before anything starts.
int launch_main(int argc, char** argv) {
  namespace launch = dagsim::launch;
  launch::ParsedLaunch parsed;
  try {
    parsed = launch::parse_launch_flags(std::vector<std::string>(argv + 2, argv + argc), launch::process_environment());
    if (parsed.help) {
      std::cout << launch::launch_help();
      return dagsim::cli::kPassed;
    }
    for (const std::string& line : launch::apply_slurm_defaults(parsed.args, parsed.given, launch::slurm_environment())) {
      launch::say(line);  // dated, as every line of a launch that runs (launch_log.h)
    }
  } catch (const dagsim::Error& e) {
    std::cerr << "dagsim launch: " << dagsim::printable(e.detail(), 1000) << "\nRun dagsim launch --help for the flags.\n";
    return dagsim::cli::kBadInput;
  }
  try {
    return launch::Launcher(std::move(parsed.args)).run();
  } catch (const std::exception& e) {
    std::cerr << "dagsim: internal error: " << e.what() << "\n";
    return dagsim::cli::kInternalError;
  }
}

// The handlers run on their own stack: a fiber that overflows its stack hits the guard page,
// and a handler on the overflowed stack would fault again and die by the signal (exit 139).
void install_fatal_handlers() {
  static char alternate_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alternate_stack;
  ss.ss_size = sizeof(alternate_stack);
  sigaltstack(&ss, nullptr);
  struct sigaction action{};
  action.sa_handler = on_fatal_signal;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(signal, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  install_fatal_handlers();
  // Tensor and frame buffers stay on the heap instead of being mapped and unmapped per
  // allocation (glibc's default for blocks over 128 KiB), which costs a page fault per page.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  CLI::App app{"dagsim: deterministic simulator and conformance harness for distributed autograd and elastic rendezvous"};
  app.require_subcommand(1);
  app.set_version_flag("--version", dagsim::cli::version_line());

  dagsim::cli::RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "Run one scenario with one seed and report which checks passed");
  run_cmd->add_option("FILE", run.file, "Scenario file (TOML; see docs/scenarios.md)")->required();
  // Taken as text and parsed strictly (parse_seed): CLI11 would wrap "-1" to 2^64 - 1.
  std::string seed_text = std::to_string(run.seed);
  run_cmd->add_option("--seed", seed_text, "Seed of every random choice (0 .. 2^64-1); the same seed replays the same run")
      ->capture_default_str();
  run_cmd->add_option("--transport", run.transport,
                      "sim (the deterministic simulator) or tcp (one local process per node, over loopback TCP)")
      ->check(CLI::IsMember({"sim", "tcp"}))
      ->capture_default_str();
  run_cmd->add_flag("--json", run.json, "Print one JSON object instead of text");
  CLI::Option* trace_option =
      run_cmd->add_option("--trace", run.trace_path, "Write Chrome trace-event JSON (Perfetto, chrome://tracing) here");
  run_cmd->add_option("--trace-level", run.trace_level,
                      "What --trace shows: workload (spans of rounds, steps, backward passes; workload events; faults), "
                      "rpc (also every message and autograd function) or network (also timers: everything)")
      ->check(CLI::IsMember({"workload", "rpc", "network"}))
      ->needs(trace_option)
      ->capture_default_str();
  run_cmd->add_flag("--check-determinism", run.check_determinism,
                    "Run the seed twice and fail unless both runs give the same trace hash");
  run_cmd->add_option("--records", run.records_dir,
                      "Write the run's records here (one file per node incarnation, the fault history, the "
                      "scenario) for `dagsim judge`");
  run_cmd->add_option("--max-wall-time", run.max_wall_time_s,
                      "Stop the run after this many seconds of wall time (outcome wall_time_limit, exit 4); "
                      "overrides the scenario's max_wall_time_ms")
      ->check(CLI::Range(1e-3, 1e7));
  run_cmd->add_option("--max-memory", run.max_memory_mib,
                      "Limit the process's address space to this many MiB (outcome memory_limit, exit 4); "
                      "overrides the scenario's max_memory_mib")
      ->check(CLI::Range(uint64_t{64}, uint64_t{1} << 20));
  run_cmd->add_flag("--full-tensors", run.full_tensors,
                    "Report every value of every tensor; by default tensors of more than 1000 elements are summarised");
  run_cmd->add_option("--peers", run.peers_file,
                      "tcp: nodes on other hosts (a peers file; docs/tcp.md): start none here, wait for each to connect");
  run_cmd->add_option("--control-port", run.control_port, "tcp with --peers: the port nodes connect to (default: the OS picks)");
  run_cmd->add_option("--gpus", run.gpus,
                      "What the nodes' GPUs ([devices]) are: sim (the simulated GPU, running each op's CPU code), "
                      "sim-kernels (the same through the kernel table the cuda backend runs) or cuda (this machine's "
                      "GPUs; docs/devices.md)")
      ->check(CLI::IsMember({"sim", "sim-kernels", "cuda"}))
      ->capture_default_str();
  run_cmd->add_flag("--trusted-network", run.trusted_network,
                    "tcp: no per-frame MACs after the authenticated handshake (only on a network nobody else can reach)");

  dagsim::cli::JudgeArgs judge;
  CLI::App* judge_cmd = app.add_subcommand(
      "judge", "Judge from records alone, on any host. DIR is one of two kinds:\n"
               "  a run's records (dagsim run --records DIR; the nodes/ of several hosts gathered into one): the "
               "same checks and report as the run printed;\n"
               "  a store's record: store.jsonl (dagsim store --record FILE) beside a job.json naming the run_id "
               "and the rendezvous' settings: the rendezvous of torchrun's or dagsim launch's agents, held to "
               "S1-S7, S10, L1, L2, L5, L6 (docs/cli.md, \"A rendezvous judged from its store's record\")");
  judge_cmd->add_option("DIR", judge.dir, "A run's records directory, or a folder with store.jsonl and job.json")
      ->required();
  judge_cmd->add_flag("--json", judge.json, "Print one JSON object instead of text");
  judge_cmd->add_flag("--full-tensors", judge.full_tensors,
                      "A run's records: report every value of every tensor; by default tensors of more than 1000 "
                      "elements are summarised");

  dagsim::cli::ReportArgs report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "Render a run's records (dagsim run --records DIR) or a sweep (dagsim check --json > FILE) as one HTML page");
  report_cmd->add_option("PATH", report.path, "Records directory, or a dagsim check --json summary")->required();
  report_cmd->add_option("-o,--output", report.out, "Where to write the page")->capture_default_str();

  std::string validate_file;
  CLI::App* validate_cmd = app.add_subcommand("validate", "Check a scenario file without running it");
  validate_cmd->add_option("FILE", validate_file, "Scenario file")->required();

  dagsim::cli::CheckArgs check;
  check.jobs = std::max(1u, std::thread::hardware_concurrency());
  CLI::App* check_cmd = app.add_subcommand("check", "Run many seeds of a scenario, each in its own process");
  check_cmd->add_option("FILE", check.file, "Scenario file")->required();
  check_cmd->add_option("--seeds", check.seeds, "Seeds to run: A..B (inclusive) or one seed")->capture_default_str();
  check_cmd->add_option("--jobs,-j", check.jobs, "Seeds run at once")->capture_default_str()->check(CLI::Range(1u, 1024u));
  check_cmd->add_flag("--json", check.json, "Print one JSON summary instead of text");
  check_cmd->add_option("--junit", check.junit, "Also write JUnit XML to FILE: one test case per seed and check");
  check_cmd->add_option("--html", check.html, "Also write the sweep's HTML page to FILE (as dagsim report draws --json's summary)");
  check_cmd->add_flag("!--no-progress", check.progress, "No progress line on stderr");
  check_cmd->add_flag("--shrink", check.shrink, "After the sweep, shrink the first failing seed (dagsim shrink) and print the file's path");
  check_cmd->add_option("--max-wall-time", check.max_wall_time_s,
                        "Stop each seed's run after this many seconds of wall time (reported as LIMIT)")
      ->check(CLI::Range(1e-3, 1e7));
  check_cmd->add_option("--max-memory", check.max_memory_mib,
                        "Limit each seed's run to this many MiB of address space (reported as LIMIT)")
      ->check(CLI::Range(uint64_t{64}, uint64_t{1} << 20));
  check_cmd->add_flag("--probes", check.probes,
                      "After the summary, every code probe with how many seeds hit it, then those never hit");
  check_cmd->add_option("--shard", check.shard,
                        "Run one shard of the seeds, dealt round-robin: I/N, or N with I from SLURM_ARRAY_TASK_ID "
                        "(a job array's task) or JOB_COMPLETION_INDEX (a Kubernetes Indexed Job)");
  check_cmd->add_option("--results", check.results,
                        "Write the seeds' results as data to FILE for dagsim merge (%i: the shard's index, %n: the "
                        "shard count)");

  dagsim::cli::MergeArgs merge;
  CLI::App* merge_cmd = app.add_subcommand(
      "merge", "Report the shards of a sweep (dagsim check --shard --results) as one, as the unsharded check would");
  merge_cmd->add_option("SHARD", merge.shards, "Every shard's results file")->required()->expected(1, -1);
  merge_cmd->add_flag("--json", merge.json, "Print one JSON summary instead of text");
  merge_cmd->add_option("--junit", merge.junit, "Also write JUnit XML to FILE: one test case per seed and check");
  merge_cmd->add_option("--html", merge.html, "Also write the sweep's HTML page to FILE");
  merge_cmd->add_flag("--probes", merge.probes,
                      "After the summary, every code probe with how many seeds hit it, then those never hit");

  dagsim::cli::ShrinkArgs shrink;
  std::string shrink_seed_text;
  CLI::App* shrink_cmd = app.add_subcommand(
      "shrink", "Shrink a failing seed to a smaller scenario that fails the same way (docs/cli.md)");
  shrink_cmd->add_option("FILE", shrink.file, "Scenario file")->required();
  shrink_cmd->add_option("--seed", shrink_seed_text, "The failing seed")->required();
  shrink_cmd->add_option("--check", shrink.check, "The failing check to keep failing (default: the first that failed)");
  shrink_cmd->add_option("--max-runs", shrink.max_runs, "Candidate runs at most")->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  shrink_cmd->add_option("--max-wall-time", shrink.max_wall_time_s, "The search's wall time at most, in seconds")
      ->capture_default_str()->check(CLI::Range(1e-3, 1e7));
  shrink_cmd->add_option("-o,--output", shrink.out, "The shrunk file (default: FILE's stem.seedN.shrunk.toml here)");
  shrink_cmd->add_option("--dagsim", shrink.dagsim, "The dagsim binary that runs the candidates (default: this one)");
  shrink_cmd->add_flag("--json", shrink.json, "Print the before and after sizes as one JSON object");
  shrink_cmd->add_flag("!--no-progress", shrink.progress, "No line per accepted step on stderr");

  dagsim::cli::NodeArgs node;
  CLI::App* node_cmd = app.add_subcommand(
      "node", "Run one node of a scenario over TCP (started by `dagsim run --transport tcp`; docs/tcp.md). Its "
              "credentials come from DAGSIM_CREDENTIALS (or a shared secret from DAGSIM_SECRET or DAGSIM_SECRET_FILE), "
              "never the command line");
  node_cmd->add_option("--scenario", node.scenario_file,
                       "This host's copy of the launcher's scenario (needed with --control; refused unless its "
                       "SHA-256 is the launcher's)");
  node_cmd->add_option("--name", node.node_name, "Which of the scenario's nodes this process is")->required();
  std::string node_seed_text;
  node_cmd->add_option("--seed", node_seed_text, "Optional: the node runs the launcher's seed, and refuses another one given here");
  node_cmd->add_option("--peers", node.peers_file, "Peers file: the cluster id and every node's address (JSON)")->required();
  node_cmd->add_option("--records", node.records_dir, "Where this node writes its records, log and incarnation")->required();
  node_cmd->add_option("--listen-fd", node.listen_fd, "An inherited listening socket (the launcher's)");
  node_cmd->add_option("--control-fd", node.control_fd, "A local launcher's control socket (it passes this itself)");
  node_cmd->add_option("--control", node.control_address, "HOST:PORT of the launcher's control port (dagsim run --peers)");
  node_cmd->add_option("--gpus", node.gpus, "What this node's GPUs ([devices]) are: sim, sim-kernels or cuda (as dagsim run's)")
      ->check(CLI::IsMember({"sim", "sim-kernels", "cuda"}))
      ->capture_default_str();
  node_cmd->add_flag("--trusted-network", node.trusted_network, "Plain frames after the authenticated handshake");

  dagsim::cli::StoreArgs store;
  CLI::App* store_cmd = app.add_subcommand(
      "store", "Serve the built-in store over PyTorch 1.13's TCPStore protocol until SIGTERM or SIGINT; prints the "
               "bound port alone on the first line of standard output");
  store_cmd->add_option("--port", store.port, "Port to listen on (0: the OS picks)")->capture_default_str();
  store_cmd->add_option("--host", store.host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  store_cmd->add_option("--max-connections", store.max_connections,
                        "Connections served at once (default: the file-descriptor limit, raised to its hard "
                        "limit, less 64)");
  store_cmd->add_option("--record", store.record,
                        "Write every client operation to FILE, one JSON line each (docs/cli.md; dagsim judge reads it)");
  store_cmd->add_option("--record-max-bytes", store.record_max_bytes,
                        "The record's cap: at this size it ends with a cut line and recording stops (at least 4096)")
      ->capture_default_str();
  store_cmd->add_option("--record-value-bytes", store.record_value_bytes,
                        "Values longer than this are recorded as their length and SHA-256, except the rendezvous "
                        "states clients write (at most 16 MiB)")
      ->capture_default_str();
  store_cmd->add_option("--faults", store.faults,
                        "The fault layer's rules, a JSON file re-read on SIGUSR1 (delay, drop or reset queries; "
                        "docs/cli.md); absent: no faults");
  store_cmd->add_option("--seed", store.seed, "Seed of the fault layer's draws")->capture_default_str();
  store_cmd->add_option("--restore", store.restore,
                        "Records of earlier stores (--record), replayed in order into the table before it listens")
      ->expected(1, -1);

  dagsim::cli::CredentialsArgs credentials;
  CLI::App* credentials_cmd = app.add_subcommand(
      "credentials", "Make a run's CA and its nodes' credentials, for nodes started by hand (docs/tcp.md): "
                     "ca --ca DIR; issue --ca DIR --out DIR NAME...; revoke --ca DIR NAME...");
  credentials_cmd->add_option("action", credentials.action, "ca, issue or revoke")
      ->required()
      ->check(CLI::IsMember({"ca", "issue", "revoke"}));
  credentials_cmd->add_option("names", credentials.names, "Node names (as in the peers file), or launcher");
  credentials_cmd->add_option("--ca", credentials.ca_dir, "The CA's directory (ca.crt, ca.key)")->required();
  credentials_cmd->add_option("--out", credentials.out_dir, "issue: one directory per name is made here");
  credentials_cmd->add_option("--days", credentials.days, "How long certificates are valid")
      ->check(CLI::Range(1, 3650))
      ->capture_default_str();

  CLI::App* launch_cmd = app.add_subcommand(
      "launch", "torchrun's interface on dagsim's elastic agent: run a training script's worker processes on this "
                "host, in an elastic job with the other hosts' agents (docs/cli.md, docs/torchrun.md)");
  // Listed here for `dagsim --help` and `dagsim help`; its command line is read by
  // launch/launch_flags.h as torchrun's argparse reads it (prefixes, REMAINDER), before CLI11 sees it.
  launch_cmd->prefix_command();
  launch_cmd->set_help_flag();

  // Registered last, so `dagsim --help` and `dagsim help` list it after the commands it explains.
  std::string help_topic;
  CLI::App* help_cmd = app.add_subcommand("help", "List the commands, or show one command's flags: dagsim help "
                                                  "COMMAND is dagsim COMMAND --help");
  help_cmd->add_option("COMMAND", help_topic, "The command whose flags to show");

  // A first argument that is neither an option nor a command is a mistyped command: say so, with
  // the commands, rather than CLI11's "A subcommand is required".
  std::string commands;
  bool known = false;
  for (const CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    commands += (commands.empty() ? "" : ", ") + command->get_name();
    known = known || (argc > 1 && command->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "dagsim: unknown command " << dagsim::quote(argv[1]) << "; commands: " << commands << "\n"
              << "Run with --help for more information.\n";
    return dagsim::cli::kBadInput;
  }
  // `dagsim help COMMAND` becomes `dagsim COMMAND --help` before anything parses it, so a command
  // with a parser of its own (launch's torchrun flags) prints the same help either way.
  // (`dagsim help help` becomes `dagsim help --help`: CLI11's help for this command.)
  char help_flag[] = "--help";
  if (argc == 3 && std::string_view(argv[1]) == "help" && argv[2][0] != '-') {
    const std::vector<CLI::App*> all = app.get_subcommands([](CLI::App*) { return true; });
    const bool topic_known = std::any_of(all.begin(), all.end(), [&](const CLI::App* c) { return c->get_name() == argv[2]; });
    if (!topic_known) {
      std::cerr << "dagsim help: unknown command " << dagsim::quote(argv[2]) << "; commands: " << commands << "\n";
      return dagsim::cli::kBadInput;
    }
    argv[1] = argv[2];
    argv[2] = help_flag;
  }
  if (argc > 1 && std::string_view(argv[1]) == "launch") return launch_main(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    // CLI11's message may echo an argument: escape it, as every message does (printable.h).
    std::cerr << dagsim::printable(e.what(), 400) << "\nRun with --help for more information.\n";
    return dagsim::cli::kBadInput;
  }
  if (*help_cmd) {
    dagsim::cli::print_command_list(app, std::cout);
    return dagsim::cli::kPassed;
  }
  if (*run_cmd) {
    const std::optional<uint64_t> seed = dagsim::cli::parse_seed(seed_text);
    if (!seed) {
      std::cerr << "dagsim run: --seed " << dagsim::quote(seed_text)
                << ": expected a whole number in [0, 18446744073709551615]\n";
      return dagsim::cli::kBadInput;
    }
    run.seed = *seed;
  }
  if (*node_cmd && !node_seed_text.empty()) {
    const std::optional<uint64_t> seed = dagsim::cli::parse_seed(node_seed_text);
    if (!seed) {
      std::cerr << "dagsim node: --seed " << dagsim::quote(node_seed_text) << ": expected a whole number\n";
      return dagsim::cli::kBadInput;
    }
    node.seed = *seed;
  }
  // DAGSIM_CPU_CAPABILITY is read here, before any tensor op: a name this CPU cannot run is the
  // operator's input error, said up front, not an internal error in the middle of a run.
  try {
    (void)dagsim::vec::capability();
  } catch (const std::exception& e) {
    std::cerr << "dagsim: " << dagsim::printable(e.what(), 400) << "\n";
    return dagsim::cli::kBadInput;
  }
  run.self_path = self_path(argv[0]);
  int code = dagsim::cli::kBadInput;
  try {
    if (*node_cmd) code = dagsim::cli::node_command(node);
    if (*run_cmd) code = dagsim::cli::run_command(run);
    if (*judge_cmd) code = dagsim::cli::judge_command(judge);
    if (*report_cmd) code = dagsim::cli::report_command(report);
    if (*validate_cmd) code = dagsim::cli::validate_command(validate_file);
    if (*store_cmd) code = dagsim::cli::store_command(store);
    if (*credentials_cmd) code = dagsim::cli::credentials_command(credentials);
    if (*shrink_cmd) {
      const std::optional<uint64_t> seed = dagsim::cli::parse_seed(shrink_seed_text);
      if (!seed) {
        std::cerr << "dagsim shrink: --seed " << dagsim::quote(shrink_seed_text)
                  << ": expected a whole number in [0, 18446744073709551615]\n";
        return dagsim::cli::kBadInput;
      }
      shrink.seed = *seed;
      shrink.self_path = self_path(argv[0]);
      code = dagsim::cli::shrink_command(shrink);
    }
    if (*merge_cmd) code = dagsim::cli::merge_command(merge);
    if (*check_cmd) {
      check.self_path = self_path(argv[0]);
      code = dagsim::cli::check_command(check);
    }
  } catch (const std::exception& e) {
    std::cerr << "dagsim: internal error: " << e.what() << "\n";
    return dagsim::cli::kInternalError;
  }
  // The report is an output like --trace: one that could not be written (a full disk, a closed
  // pipe, /dev/full) is the environment's error, and the verdict never reached anyone.
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "dagsim: cannot write the report to standard output\n";
    return dagsim::cli::kBadInput;
  }
  return code;
}
