// `dagsim run` and `dagsim validate`: one scenario, one seed, judged; or a scenario checked
// without running it.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/report.h"
#include "scenarios/cli/run_limits.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/job/job_run.h"
#include "scenarios/run/runner.h"
#include "scenarios/run/fault_schedule.h"
#include "scenarios/run/tcp_launcher.h"
#include "scenarios/workloads/registry.h"

namespace dagsim::cli {

namespace {

using WallClock = std::chrono::steady_clock;


double ms_since(WallClock::time_point start) {
  return std::chrono::duration<double, std::milli>(WallClock::now() - start).count();
}

// A progress line on a terminal, for runs longer than a second; never with --json or off a TTY.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)), start_(WallClock::now()) {}
  ~ProgressLine() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }
  std::function<void(runtime::TimePoint, uint64_t)> callback() {
    if (!enabled_) return nullptr;
    return [this](runtime::TimePoint now, uint64_t steps) {
      const auto wall = WallClock::now();
      if (wall - start_ < std::chrono::seconds(1) || wall - last_ < std::chrono::milliseconds(200)) return;
      last_ = wall;
      shown_ = true;
      std::fprintf(stderr, "\r\033[K  running: %.3f s virtual, %.1f s wall, %llu steps",
                   static_cast<double>(now.ns()) / 1e9, ms_since(start_) / 1000.0,
                   static_cast<unsigned long long>(steps));
      std::fflush(stderr);
    };
  }

 private:
  bool enabled_;
  bool shown_ = false;
  WallClock::time_point start_;
  WallClock::time_point last_;
};

// An output that is the scenario file itself (compared by filesystem identity, so "./a.toml",
// a hard link or a symlink count): writing it would destroy the input. "" when there is none.
std::string output_clash(const RunArgs& args) {
  namespace fs = std::filesystem;
  auto same = [&](const fs::path& output) {
    std::error_code ignored;  // a path that does not exist is no clash
    return fs::equivalent(output, args.file, ignored);
  };
  if (!args.trace_path.empty() && same(args.trace_path)) {
    return "--trace " + printable(args.trace_path, kPathMax) + ": is the scenario file; it would be overwritten";
  }
  if (!args.records_dir.empty()) {
    const fs::path dir(args.records_dir);
    std::error_code ignored;
    const bool in_nodes = fs::equivalent(dir / "nodes", fs::path(args.file).parent_path().empty()
                                                            ? fs::path(".")
                                                            : fs::path(args.file).parent_path(), ignored);
    if (same(dir) || same(dir / "scenario.toml") || same(dir / "run.json") || same(dir / "faults.json") || in_nodes) {
      return "--records " + printable(args.records_dir, kPathMax) +
             ": would overwrite the scenario file; write the records elsewhere";
    }
  }
  return "";
}

// A [job] run's stop request (JobRunOptions::stop_requested): the first of SIGINT, SIGTERM,
// SIGHUP, or the wall-time watchdog's SIGALRM. The run polls it, stops everything it started and
// removes its namespaces, then the CLI reports the limit or dies of the signal: a job's processes
// and namespaces must never outlive a run that died without unwinding.
std::atomic<int> job_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_job_stop_signal(int sig) {
  int none = 0;
  job_stop_signal.compare_exchange_strong(none, sig);
}

void job_stops_on_signals() {
  struct sigaction action{};
  action.sa_handler = on_job_stop_signal;
  action.sa_flags = SA_RESTART | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction before{};
    sigaction(sig, nullptr, &before);
    if (before.sa_handler != SIG_IGN) sigaction(sig, &action, nullptr);  // nohup's SIG_IGN stays
  }
  wall_watchdog_requests_stop(&job_stop_signal);
}

}  // namespace

std::string replay_flags(const RunArgs& args) {
  std::ostringstream flags;
  if (args.transport != "sim") flags << " --transport " << args.transport;
  if (args.trusted_network) flags << " --trusted-network";
  if (!args.peers_file.empty()) flags << " --peers " << args.peers_file;
  if (args.control_port != 0) flags << " --control-port " << args.control_port;
  if (args.gpus != "sim") flags << " --gpus " << args.gpus;
  if (args.max_wall_time_s > 0) flags << " --max-wall-time " << args.max_wall_time_s;
  if (args.max_memory_mib > 0) flags << " --max-memory " << args.max_memory_mib;
  return flags.str();
}

int run_command(const RunArgs& args) {
  if (args.transport != "tcp" && (!args.peers_file.empty() || args.control_port != 0)) {
    std::cerr << "dagsim run: --peers and --control-port are for --transport tcp\n";
    return kBadInput;
  }
  if (args.transport == "tcp" && (!args.trace_path.empty() || args.check_determinism)) {
    std::cerr << "dagsim run: --trace and --check-determinism are the simulator's (--transport sim): a TCP run has no "
                 "virtual time and does not replay\n";
    return kBadInput;
  }
  if (args.gpus == "cuda" && args.check_determinism) {
    std::cerr << "dagsim run: --check-determinism needs --gpus sim or sim-kernels: a real GPU's timing is its own, "
                 "not the seed's\n";
    return kBadInput;
  }
  scenarios::Scenario scenario;
  std::string scenario_text;
  try {
    scenario_text = scenarios::read_scenario_text(args.file);
    scenario = scenarios::parse_scenario(scenario_text, args.file);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_scenario) throw;
    std::cerr << e.detail() << "\n";
    return kBadInput;
  }
  // A [job] is real processes (scenarios/job/job_run.h): no virtual time, no trace, no replay.
  const bool job = scenario.workload.name() == "job";
  if (job) {
    std::string refused;
    if (args.transport != "sim") refused = "--transport " + args.transport + ": the job's agents are started on this host by the run itself";
    else if (!args.trace_path.empty()) refused = "--trace: a job has no simulator trace (its agents' logs are in the run's folder)";
    else if (args.check_determinism) refused = "--check-determinism: a job's processes are real; only its fault schedule is seeded, and it does not replay";
    else if (args.max_memory_mib > 0 || scenario.max_memory_mib) refused = "--max-memory (max_memory_mib): it would limit the address space of every agent and worker the job starts";
    if (!refused.empty()) {
      std::cerr << "dagsim run: " << printable(args.file, kPathMax) << " is a [job] scenario: " << refused << "\n";
      return kBadInput;
    }
  }
  if (args.gpus == "cuda" && scenario.devices.gpus > 0) {
    if (const std::string why = cuda_unavailable(); !why.empty()) {
      std::cerr << "dagsim run: --gpus cuda: no GPU to run on: " << why << "\n";
      return kBadInput;
    }
  }
  for (const std::string& w : scenario.warnings) std::cerr << "dagsim run: warning: " << w << "\n";
  for (const std::string& w : scenarios::faults_that_cannot_fire(scenario)) std::cerr << "dagsim run: warning: " << w << "\n";
  if (const std::string clash = output_clash(args); !clash.empty()) {
    std::cerr << "dagsim run: " << clash << "\n";
    return kBadInput;
  }
  std::ofstream trace_file;
  if (!args.trace_path.empty()) {
    trace_file.open(args.trace_path);
    if (!trace_file) {
      std::cerr << "dagsim run: --trace " << printable(args.trace_path, kPathMax) << ": cannot open for writing: "
                << std::strerror(errno) << "\n";
      return kBadInput;
    }
  }
  const std::string replay = replay_flags(args);
  set_assert_context("replay: " + replay_command(args.file, args.seed, replay));

  const HostLimits limits = effective_limits(scenario, args.max_wall_time_s, args.max_memory_mib);
  std::ostringstream wall_detail;
  if (limits.wall_s) wall_detail << "stopped by the wall-time limit of " << *limits.wall_s << " s before it had a verdict";
  const std::string memory_detail =
      "stopped when memory ran out" +
      (limits.memory_mib ? " (the limit is " + std::to_string(*limits.memory_mib) + " MiB of address space)" : std::string()) +
      " before it had a verdict";
  if (job) job_stops_on_signals();
  if (!arm_host_limits(limits, limit_report(scenario, args.file, args.seed, args.transport, replay, "wall_time_limit", wall_detail.str(), args.json))) {
    return kBadInput;
  }
  auto memory_limit = [&](const std::string& detail) {
    disarm_wall_watchdog();
    std::cout << limit_report(scenario, args.file, args.seed, args.transport, replay, "memory_limit", detail, args.json);
    std::cerr << "dagsim: " << detail << "\n";
    return kResourceLimit;
  };
  // A [job] run stopped (job_stop_signal), with nothing of it left: the wall-time limit is
  // reported as such; a signal is died of, with the default disposition, so the caller (a shell,
  // `dagsim check`) sees which one, as `dagsim check` itself does.
  auto job_stopped = [&](int sig) {
    disarm_wall_watchdog();
    if (sig == SIGALRM) {
      std::cout << limit_report(scenario, args.file, args.seed, args.transport, replay, "wall_time_limit", wall_detail.str(), args.json);
      std::cerr << "dagsim: stopped by the wall-time limit (max_wall_time_ms / --max-wall-time)\n";
      return kResourceLimit;
    }
    std::cout.flush();
    std::cerr.flush();
    std::signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    std::raise(sig);
    std::_Exit(128 + sig);
  };
  // What can be counted is judged before the run, the same on every host and for every seed.
  const scenarios::WorkloadType& workload = scenarios::workload_type(scenario);
  if (limits.memory_mib && workload.counted_bytes != nullptr) {
    const uint64_t counted = workload.counted_bytes(scenario);
    if (counted > (*limits.memory_mib << 20)) {
      return memory_limit("not run: its tensors alone need " + std::to_string((counted + (1 << 20) - 1) >> 20) +
                          " MiB (leaves and parameters with their gradients, and every statement's result, in the "
                          "distributed run and the local oracle), more than the memory limit of " +
                          std::to_string(*limits.memory_mib) + " MiB");
    }
  }

  scenarios::RunResult result;
  try {
    ProgressLine progress(!args.json);
    scenarios::RunOptions options;
    options.seed = args.seed;
    options.keep_trace = !args.trace_path.empty();
    options.chrome_trace = options.keep_trace ? &trace_file : nullptr;
    options.progress = progress.callback();
    options.report.full_tensors = args.full_tensors;
    options.gpus = args.gpus;
    options.make_cuda_gpu = cuda_gpu_maker();
    scenarios::RunRecords records;
    if (job) {
      scenarios::JobRunOptions run;
      run.seed = args.seed;
      run.scenario_file = args.file;
      run.dagsim_binary = args.self_path;
      run.run_dir = args.records_dir;
      run.progress = [](std::string_view line) { std::cerr << "dagsim run: " << printable(line, 2000) << std::endl; };
      run.stop_requested = [] { return job_stop_signal.load(); };
      records = scenarios::record_job(scenario, run);
      if (const int sig = job_stop_signal.load()) return job_stopped(sig);
    } else if (args.transport == "tcp") {
      scenarios::TcpRunOptions tcp;
      tcp.seed = args.seed;
      tcp.scenario_file = args.file;
      tcp.scenario_text = scenario_text;
      tcp.dagsim_binary = args.self_path;
      tcp.records_dir = args.records_dir;
      tcp.trusted_network = args.trusted_network;
      tcp.gpus = args.gpus;
      tcp.peers_file = args.peers_file;
      tcp.control_port = args.control_port;
      tcp.on_control_port = [&](uint16_t port) {
        std::cerr << "dagsim run: waiting for " << scenario.cluster.nodes << " nodes to connect to control port " << port
                  << " (dagsim node ... --control THIS_HOST:" << port << ")" << std::endl;
      };
      if (auto cb = progress.callback()) tcp.progress = [cb](runtime::TimePoint now) { cb(now, 0); };
      records = scenarios::record_scenario_tcp(scenario, tcp);
    } else {
      records = scenarios::record_scenario(scenario, options);
    }
    // Memory that ran out inside a node's fiber failed that fiber: a limit of the host, not a
    // verdict on the scenario (which would then depend on the host's memory).
    for (const scenarios::FiberFailureRecord& f : records.failures) {
      if (f.what.find("std::bad_alloc") != std::string::npos) return memory_limit(memory_detail);
    }
    if (!args.records_dir.empty()) scenarios::write_records_dir(args.records_dir, records, scenario_text);
    result = scenarios::judge_run(scenario, records, options.report);
    if (records.trace) scenarios::write_chrome_trace(trace_file, records, result, args.trace_level);
    if (args.check_determinism) {
      // The self-check of FoundationDB's "unseed" and madsim's CHECK_DETERMINISM: run the same
      // seed again in this process and compare trace hashes.
      scenarios::RunOptions again;
      again.seed = args.seed;
      again.report = options.report;
      again.gpus = options.gpus;
      const scenarios::RunResult second = scenarios::run_scenario(scenario, again);
      scenarios::CheckResult determinism{"determinism", second.trace_hash == result.trace_hash, ""};
      determinism.detail = determinism.passed
                               ? "a second run of seed " + std::to_string(args.seed) + " gave the same trace hash " +
                                     scenarios::hash_hex(result.trace_hash)
                               : "a second run gave trace hash " + scenarios::hash_hex(second.trace_hash) + ", not " +
                                     scenarios::hash_hex(result.trace_hash) + ": nondeterminism (a dagsim bug)";
      result.checks.push_back(determinism);
      result.passed = result.passed && determinism.passed;
    }
  } catch (const scenarios::JobRunStopped& e) {
    return job_stopped(e.signal());
  } catch (const std::bad_alloc&) {
    return memory_limit(memory_detail);
  } catch (const std::filesystem::filesystem_error& e) {
    // Listing or clearing a records directory: the environment's to fix, not a bug.
    if (args.records_dir.empty()) throw;
    std::cerr << "dagsim run: --records " << printable(args.records_dir, kPathMax) << ": " << printable(e.what(), 400)
              << "\n";
    return kBadInput;
  } catch (const Error& e) {
    // Some limits are found only when the scenario is expanded (the random fault timeline); a
    // records directory that cannot be written is the caller's to fix.
    if (e.code() == ErrorCode::invalid_argument && job) {
      std::cerr << "dagsim run: " << printable(args.file, kPathMax) << ": " << e.detail() << "\n";
      return kBadInput;
    }
    if (e.code() == ErrorCode::invalid_argument && args.transport == "tcp") {
      std::cerr << "dagsim run --transport tcp: " << e.detail() << "\n";
      return kBadInput;
    }
    if (e.code() == ErrorCode::invalid_argument && !args.records_dir.empty()) {
      std::cerr << "dagsim run: --records " << printable(args.records_dir, kPathMax) << ": " << e.detail() << "\n";
      return kBadInput;
    }
    if (e.code() != ErrorCode::invalid_scenario) throw;
    std::cerr << e.detail() << "\n";
    return kBadInput;
  }
  if (job) {
    if (const int sig = job_stop_signal.load()) return job_stopped(sig);
  }
  disarm_wall_watchdog();
  if (!args.trace_path.empty()) {
    trace_file.close();
    if (!trace_file) {
      // A full disk or a device such as /dev/full: the environment's error, not dagsim's.
      std::cerr << "dagsim run: --trace " << printable(args.trace_path, kPathMax)
                << ": write failed (disk full, or not a writable file)\n";
      return kBadInput;
    }
  }
  return print_report(result, args.file, args.json, replay);
}

namespace {

int validate(const std::string& file, bool quiet) {
  try {
    const scenarios::Scenario s = scenarios::load_scenario_file(file);
    if (quiet) return kPassed;
    for (const std::string& w : s.warnings) std::cerr << "warning: " << w << "\n";
    for (const std::string& w : scenarios::faults_that_cannot_fire(s)) std::cerr << "warning: " << w << "\n";
    const scenarios::WorkloadType& type = scenarios::workload_type(s);
    std::cout << printable(file, kPathMax) << ": valid: scenario " << printable(s.name) << ", " << s.cluster.nodes << " nodes, workload "
              << type.summary(s);
    // A workload that reads [[faults]] itself counts them in its summary.
    if (!type.reads_faults) std::cout << ", " << s.faults.size() << " scheduled fault(s)";
    std::cout << (s.random_faults.any() ? " plus random faults" : "") << ", " << s.checks.size() << " check(s)\n";
    return kPassed;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_scenario) throw;
    std::cerr << e.detail() << "\n";
    return kBadInput;
  }
}

}  // namespace

int validate_command(const std::string& file) { return validate(file, false); }
int validate_command_quiet(const std::string& file) { return validate(file, true); }

}  // namespace dagsim::cli
