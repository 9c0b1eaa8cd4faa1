// `dagsim check FILE --seeds A..B [--jobs N] [--junit OUT.xml]`: many seeds of one scenario, each
// in its own process, so a crash or an assert in one seed is that seed's failure and the rest still
// run. Prints each failing seed with the command that replays it, and a summary line; shows its
// progress on stderr; writes JUnit XML for CI when asked. Interrupted (SIGINT, SIGTERM, SIGHUP), it
// stops its seeds, prints the partial summary of those that finished, and dies of the signal.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "scenarios/cli/commands.h"
#include "core/base/printable.h"
#include "net/crypto.h"
#include "net/process/process.h"
#include "scenarios/cli/check_report.h"
#include "scenarios/cli/shard_plan.h"
#include "scenarios/cli/shard_results.h"
#include "scenarios/cli/report.h"
#include "scenarios/cli/run_limits.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/format/scenario_text.h"

namespace dagsim::cli {

std::optional<uint64_t> parse_seed(std::string_view text) {
  uint64_t out = 0;
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return std::nullopt;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;  // out of range
  return out;
}

namespace {

struct SeedRange {
  uint64_t first = 0;
  uint64_t last = 0;
};

std::optional<SeedRange> parse_seeds(const std::string& text) {
  SeedRange range;
  const size_t dots = text.find("..");
  const std::string_view first = std::string_view(text).substr(0, dots);
  const std::optional<uint64_t> a = parse_seed(first);
  if (!a) return std::nullopt;
  range.first = range.last = *a;
  if (dots != std::string::npos) {
    const std::optional<uint64_t> b = parse_seed(std::string_view(text).substr(dots + 2));
    if (!b || *b < *a) return std::nullopt;
    range.last = *b;
  }
  return range;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct Child {
  uint64_t seed;
  std::string out_path;
  std::string err_path;
  std::chrono::steady_clock::time_point started;
  net::Process process;  // started through net/process: nothing it starts outlives the check
};

// A seed's run stops itself at its wall-time limit (run_limits.h); one still running this long
// after it (stuck where even the watchdog cannot act) is killed and reported as stopped.
constexpr std::chrono::seconds kWatchdogGrace{10};

// The temporary directory of the seeds' outputs: under $TMPDIR (default /tmp).
std::string temp_template() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string base = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  return base + "/dagsim-check-XXXXXX";
}

// The signals that end a check early: they are blocked while it runs and taken with sigwaitinfo
// (no handler, so nothing runs at an unsafe moment), together with SIGCHLD for finished seeds.
// On one, the check stops its children, removes its temporary directory, prints a partial summary, and dies of the signal.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, signal);
  return set;
}

// The check's progress on stderr: on a terminal one line rewritten as seeds finish; otherwise (a
// CI log) a line every kLogEvery at most, so a long sweep shows it is alive without flooding.
class Progress {
 public:
  static constexpr std::chrono::seconds kLogEvery{10};

  Progress(bool enabled, uint64_t count)
      : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1), count_(count), start_(Clock::now()), last_(start_) {}

  void seed_done(bool failed) {
    ++done_;
    failed_ += failed ? 1 : 0;
    if (!enabled_) return;
    const Clock::time_point now = Clock::now();
    if (!tty_ && now - last_ < kLogEvery) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
    std::ostringstream line;
    line.setf(std::ios::fixed);
    line.precision(rate < 10 ? 2 : 1);
    line << "check: " << done_ << "/" << (count_ == 0 ? std::string("2^64") : std::to_string(count_)) << " seeds, "
         << failed_ << " failed, " << rate << " seeds/s";
    if (count_ > done_ && rate > 0) line << ", about " << static_cast<uint64_t>(static_cast<double>(count_ - done_) / rate + 0.5) << " s left";
    if (tty_) {
      std::cerr << "\r\033[K" << line.str() << std::flush;
      shown_ = true;
    } else {
      std::cerr << line.str() << "\n" << std::flush;
    }
  }

  // Before the summary: a terminal's progress line is erased so the summary starts clean.
  void clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const bool enabled_;
  const bool tty_;
  const uint64_t count_;
  const Clock::time_point start_;
  Clock::time_point last_;
  uint64_t done_ = 0;
  uint64_t failed_ = 0;
  bool shown_ = false;
};

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &utc);
  return buffer;
}

}  // namespace

int check_command(const CheckArgs& given) {
  CheckArgs args = given;
  const int valid = validate_command_quiet(args.file);
  if (valid != kPassed) return valid;
  const std::optional<SeedRange> range = parse_seeds(args.seeds);
  if (!range) {
    std::cerr << "dagsim check: --seeds " << printable(args.seeds)
              << ": expected A..B (A <= B) or one seed, each a whole number in [0, 18446744073709551615]\n";
    return kBadInput;
  }
  // Which of the seeds this check runs: one shard of them (shard_plan.h), by default all.
  SeedShard shard;
  std::string results_path, scenario_sha256;
  try {
    shard = resolve_shard(args.shard, process_env());
    if (!args.results.empty()) {
      results_path = expand_shard_pattern(args.results, shard);
      // The text the seeds run, so a merge can tell shards of another scenario by more than its path.
      const std::string text = scenarios::detail::read_bounded_text(args.file);
      scenario_sha256 = net::sha256_hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    }
  } catch (const Error& e) {
    std::cerr << "dagsim check: " << e.detail() << "\n";
    return kBadInput;
  }
  // The limits every seed's run gets: the flags, else the scenario's keys (validated above).
  const scenarios::Scenario scenario = scenarios::load_scenario_file(args.file);
  const HostLimits limits = effective_limits(scenario, args.max_wall_time_s, args.max_memory_mib);
  if (scenario.workload.name() == "job") {
    // Each seed is the real job (processes, ports, its run folder): one at a time.
    if (args.jobs > 1) {
      std::cerr << "dagsim check: " << printable(args.file, kPathMax) << " is a [job] scenario: its seeds run one at a time "
                << "(each starts real processes and ports), not " << args.jobs << " at once\n";
    }
    args.jobs = 1;
    args.note = "each seed runs the real job: only its fault schedule is seeded; the job's own processes are not "
                "replayed by the seed";
  }
  // A job's seeds each leave a run folder (logs, the store's record, checkpoints, records). Those
  // of passing seeds go as each passes; a failing seed's stays, named in the summary, since it is
  // what an operator opens next. Interrupted seeds' go too: they have no finding.
  std::string runs_dir;
  if (scenario.workload.name() == "job") {
    std::string runs_template = temp_template();
    runs_template.replace(runs_template.rfind("dagsim-check-"), std::string("dagsim-check-").size(), "dagsim-check-runs-");
    if (const char* made = mkdtemp(runs_template.data()); made != nullptr) {
      runs_dir = made;
    } else {
      std::cerr << "dagsim check: cannot create a folder for the job's runs " << printable(runs_template) << ": "
                << std::strerror(errno) << "\n";
      return kBadInput;
    }
  }
  if (!results_path.empty()) {
    // As for the outputs below, before the seeds run; the file itself is written whole at the end.
    const std::string probe_path = results_path + ".tmp-" + std::to_string(::getpid());
    std::ofstream probe(probe_path, std::ios::binary | std::ios::trunc);
    if (!probe) {
      std::cerr << "dagsim check: --results " << printable(results_path, kPathMax) << ": cannot write: " << std::strerror(errno) << "\n";
      return kBadInput;
    }
    std::remove(probe_path.c_str());
  }
  for (const std::string* out : {&args.junit, &args.html}) {
    if (out->empty()) continue;
    // Fail before the seeds run, not after: the path is the operator's, and a sweep is long.
    std::ofstream probe(*out, std::ios::binary | std::ios::trunc);
    if (!probe) {
      std::cerr << "dagsim check: " << (out == &args.junit ? "--junit " : "--html ") << printable(*out) << ": cannot write: "
                << std::strerror(errno) << "\n";
      return kBadInput;
    }
  }
  std::string dir_template = temp_template();
  const char* dir = mkdtemp(dir_template.data());
  if (dir == nullptr) {
    std::cerr << "dagsim check: cannot create a temporary directory " << printable(dir_template) << ": "
              << std::strerror(errno) << "\n";
    return kBadInput;  // the environment's ($TMPDIR), not dagsim's
  }
  // From here until the children are reaped, a stop signal is a pending event, not a death.
  std::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap children behind our back
  sigset_t waited = stop_signals();
  sigaddset(&waited, SIGCHLD);
  sigset_t before;
  sigprocmask(SIG_BLOCK, &waited, &before);

  const unsigned jobs = std::max(1u, args.jobs);
  const std::string timestamp = utc_timestamp();
  std::map<pid_t, Child> running;
  std::vector<SeedOutcome> outcomes;
  // Counted, not compared, so a range ending at the largest seed cannot wrap around.
  bool every_seed = false;  // all 2^64, which count cannot say
  const uint64_t count = shard_seed_count(range->first, range->last, shard, &every_seed);
  uint64_t started = 0;
  auto more = [&] { return every_seed || started < count; };
  bool spawn_failed = false;
  int stopped_by = 0;
  const sigset_t stop_set = stop_signals();
  const std::vector<std::string> environment = net::current_environment();  // each seed's, whole
  Progress progress(args.progress, count);
  auto finish = [&](pid_t pid, int status) {
    Child child = std::move(running.at(pid));
    running.erase(pid);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kInternalError;
    SeedOutcome outcome{child.seed, code, "", std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count(),
                        {}, false, {}};
    // A seed that ended without a verdict while the check was being stopped, or that a stop
    // signal killed (a terminal's ^C reaches the whole process group), was interrupted: no finding.
    const bool killed_by_stop = WIFSIGNALED(status) && sigismember(&stop_set, WTERMSIG(status)) == 1;
    if (killed_by_stop || (stopped_by != 0 && code != kPassed && code != kCheckFailed)) {
      outcome.interrupted = true;
      outcome.summary = "interrupted before it finished";
    } else {
      std::string unreadable;
      if (code == kPassed || code == kCheckFailed || code == kResourceLimit) {
        outcome.checks = read_checks(read_file(child.out_path), &unreadable, &outcome.probes);
      }
      if (code != kPassed) outcome.summary = summarise(outcome.checks, unreadable, read_file(child.err_path), code);
    }
    if (!runs_dir.empty()) {
      const std::string run = runs_dir + "/seed-" + std::to_string(child.seed);
      std::error_code ignored;
      if (outcome.exit_code == kPassed || outcome.interrupted) {
        std::filesystem::remove_all(run, ignored);
      } else if (std::filesystem::exists(run, ignored)) {
        outcome.summary += (outcome.summary.empty() ? "" : "\n") + std::string("its run folder: ") + printable(run, kPathMax);
      }
    }
    progress.seed_done(outcome.exit_code != kPassed && !outcome.interrupted);
    outcomes.push_back(std::move(outcome));
    std::remove(child.out_path.c_str());
    std::remove(child.err_path.c_str());
  };
  while ((more() && !spawn_failed && stopped_by == 0) || !running.empty()) {
    while (more() && running.size() < jobs && !spawn_failed && stopped_by == 0) {
      const uint64_t seed = shard_seed(range->first, shard, started++);
      Child child{seed, std::string(dir) + "/" + std::to_string(seed) + ".json",
                  std::string(dir) + "/" + std::to_string(seed) + ".err", std::chrono::steady_clock::now(), {}};
      const std::string seed_text = std::to_string(seed);
      std::vector<std::string> argv_s = {args.self_path, "run", args.file, "--seed", seed_text, "--json"};
      if (args.max_wall_time_s > 0) {
        std::ostringstream s;
        s.precision(17);
        s << args.max_wall_time_s;
        argv_s.insert(argv_s.end(), {"--max-wall-time", s.str()});
      }
      if (args.max_memory_mib > 0) argv_s.insert(argv_s.end(), {"--max-memory", std::to_string(args.max_memory_mib)});
      if (!runs_dir.empty()) argv_s.insert(argv_s.end(), {"--records", runs_dir + "/seed-" + seed_text});
      net::ProcessSpec spec;
      spec.argv = std::move(argv_s);
      spec.env = environment;
      spec.stdout_path = child.out_path;
      spec.stderr_path = child.err_path;
      spec.name = "seed " + seed_text;
      try {
        child.process = net::spawn(spec);
      } catch (const Error& e) {
        std::cerr << "dagsim check: " << e.detail() << "\n";
        spawn_failed = true;
        break;
      }
      const pid_t pid = child.process.pid();
      running.emplace(pid, std::move(child));
    }
    if (running.empty()) break;
    // Reap every finished child (one SIGCHLD may stand for several), then wait for the next event.
    std::vector<std::pair<pid_t, int>> ended;
    for (auto& [child_pid, child] : running) {
      if (const std::optional<net::ProcessExit> exit = child.process.poll()) ended.push_back({child_pid, exit->status});
    }
    for (const auto& [child_pid, status] : ended) finish(child_pid, status);
    bool reaped = !ended.empty();
    if (reaped) continue;
    if (limits.wall_s) {
      // A seed stops itself at its wall-time limit; one that outlives its own watchdog by the
      // grace is killed, never waited on.
      const auto deadline = std::chrono::duration<double>(*limits.wall_s) + kWatchdogGrace;
      for (auto& [child_pid, child] : running) {
        if (std::chrono::steady_clock::now() - child.started < deadline) continue;
        child.process.kill();
        child.process.wait();
        const uint64_t seed = child.seed;
        std::remove(child.out_path.c_str());
        std::remove(child.err_path.c_str());
        running.erase(child_pid);
        outcomes.push_back({seed, kResourceLimit,
                            "run_completed: still running " + std::to_string(kWatchdogGrace.count()) +
                                " s past its wall-time limit; killed",
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count(), {},
                            false, {}});
        progress.seed_done(true);
        reaped = true;
        break;  // the map changed under the loop
      }
      if (reaped) continue;
    }
    siginfo_t info{};
    // With a wall-time limit, wake now and then to look at the deadlines above.
    const timespec tick{0, 100'000'000};
    const int signal = limits.wall_s ? sigtimedwait(&waited, &info, &tick) : sigwaitinfo(&waited, &info);
    if (signal > 0 && signal != SIGCHLD && stopped_by == 0) {
      stopped_by = signal;
      for (auto& [child_pid, child] : running) child.process.signal(SIGTERM);
    }
  }
  rmdir(dir);
  if (!runs_dir.empty() && ::rmdir(runs_dir.c_str()) != 0) {
    std::cerr << "dagsim check: the run folders of the seeds that did not pass are kept in " << printable(runs_dir, kPathMax) << "\n";
  }
  progress.clear();
  std::sort(outcomes.begin(), outcomes.end(), [](const SeedOutcome& a, const SeedOutcome& b) { return a.seed < b.seed; });
  SweepOrigin origin = this_origin();
  if (shard.count > 1) origin.shard = shard.text();
  int code = report_outcomes(args, outcomes, every_seed ? 0 : count, stopped_by, timestamp, origin);
  if (!results_path.empty()) {
    // The seeds' results as data, for `dagsim merge` (shard_results.h); a cut-short shard says so.
    const ShardResults results{args.file, scenario_sha256, args.seeds, range->first, range->last, shard, args.note, origin.provenance,
                         origin.probe_names, timestamp, stopped_by != 0 ? std::string("SIG") + sigabbrev_np(stopped_by) : "", outcomes};
    try {
      write_shard_results(results_path, results);
    } catch (const Error& e) {
      std::cerr << "dagsim check: " << e.detail() << "\n";
      if (code == kPassed) code = kBadInput;
    }
  }
  if (stopped_by != 0) {
    // Die of the signal, as if it had never been blocked, so the caller sees how the check ended;
    // the partial summary above is what it had found by then.
    std::cout.flush();
    std::signal(stopped_by, SIG_DFL);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    std::raise(stopped_by);
    std::_Exit(128 + stopped_by);
  }
  sigprocmask(SIG_SETMASK, &before, nullptr);
  if (spawn_failed) return kInternalError;
  if (args.shrink) {
    // --shrink: the first seed that failed with a verdict or crashed, shrunk as `dagsim shrink` does.
    for (const SeedOutcome& failed : outcomes) {
      if (failed.interrupted || failed.exit_code == kPassed || failed.exit_code == kBadInput || failed.exit_code == kResourceLimit) continue;
      ShrinkArgs shrink_args;
      shrink_args.file = args.file;
      shrink_args.seed = failed.seed;
      shrink_args.self_path = args.self_path;
      shrink_args.progress = args.progress;
      shrink_args.quiet = true;
      std::string written;
      const int shrunk = shrink_command(shrink_args, &written);
      std::ostream& out = args.json ? std::cerr : std::cout;
      if (shrunk == kPassed) {
        out << "shrunk seed " << failed.seed << ": " << printable(written, kPathMax) << "\n";
      } else {
        out << "dagsim check: seed " << failed.seed << " could not be shrunk (exit " << shrunk << ")\n";
      }
      break;
    }
  }
  return code;
}

}  // namespace dagsim::cli
