// `dagsim check FILE --seeds A..B [--jobs N]`: many seeds of one scenario, each in its own
// process, so a crash or an assert in one seed is that seed's failure and the rest still run.
// Prints each failing seed with the command that replays it, and a summary line.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include <chrono>
#include <csignal>
#include <thread>

#include "scenarios/cli/commands.h"
#include "scenarios/cli/report.h"
#include "scenarios/cli/run_limits.h"
#include "scenarios/format/scenario_loader.h"

extern char** environ;

namespace dagsim::cli {

namespace {

struct SeedRange {
  uint64_t first = 0;
  uint64_t last = 0;
};

std::optional<SeedRange> parse_seeds(const std::string& text) {
  auto parse = [](std::string_view s, uint64_t& out) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
  };
  SeedRange range;
  const size_t dots = text.find("..");
  if (dots == std::string::npos) {
    if (!parse(text, range.first)) return std::nullopt;
    range.last = range.first;
  } else if (!parse(std::string_view(text).substr(0, dots), range.first) ||
             !parse(std::string_view(text).substr(dots + 2), range.last) || range.last < range.first) {
    return std::nullopt;
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
};

// A seed's run stops itself at its wall-time limit (run_limits.h); one still running this long
// after it (stuck where even the watchdog cannot act) is killed and reported as stopped.
constexpr std::chrono::seconds kWatchdogGrace{10};

struct SeedOutcome {
  uint64_t seed;
  int exit_code;  // 0, 1, 2, 3, 4; a signal counts as 3
  std::string summary;
};

// Why a seed failed, in one line: the failing checks' names and first lines.
std::string summarise(const std::string& stdout_text, const std::string& stderr_text, int exit_code) {
  if (exit_code == kBadInput) return stderr_text.substr(0, stderr_text.find('\n'));
  if (exit_code != kPassed && exit_code != kCheckFailed && exit_code != kResourceLimit) {
    std::string first = stderr_text.substr(0, stderr_text.find('\n'));
    std::string assertion;
    const size_t at = stderr_text.find("assertion failed");
    if (at != std::string::npos) assertion = stderr_text.substr(at, stderr_text.find('\n', at) - at);
    return "internal error (exit " + std::to_string(exit_code) + "): " + (assertion.empty() ? first : assertion);
  }
  try {
    const nlohmann::json report = nlohmann::json::parse(stdout_text);
    std::string out;
    for (const auto& check : report.at("checks")) {
      if (check.at("passed").get<bool>()) continue;
      const std::string detail = check.at("detail").get<std::string>();
      out += (out.empty() ? "" : "; ") + check.at("name").get<std::string>() + ": " + detail.substr(0, detail.find('\n'));
    }
    return out;
  } catch (const std::exception& e) {
    return std::string("unreadable report: ") + e.what();
  }
}

}  // namespace

int check_command(const CheckArgs& args) {
  const int valid = validate_command_quiet(args.file);
  if (valid != kPassed) return valid;
  const std::optional<SeedRange> range = parse_seeds(args.seeds);
  if (!range) {
    std::cerr << "dagsim check: --seeds " << args.seeds << ": expected A..B (A <= B) or one seed\n";
    return kBadInput;
  }
  // The limits every seed's run gets: the flags, else the scenario's keys (validated above).
  const HostLimits limits =
      effective_limits(scenarios::load_scenario_file(args.file), args.max_wall_time_s, args.max_memory_mib);
  char dir_template[] = "/tmp/dagsim-check-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::cerr << "dagsim check: cannot create a temporary directory\n";
    return kInternalError;
  }
  const unsigned jobs = std::max(1u, args.jobs);
  std::map<pid_t, Child> running;
  std::vector<SeedOutcome> outcomes;
  // Counted, not compared, so a range ending at the largest seed cannot wrap around.
  const uint64_t count = range->last - range->first + 1;  // 0 only for the full 2^64 range
  uint64_t started = 0;
  auto more = [&] { return count == 0 || started < count; };
  bool spawn_failed = false;
  auto finish = [&](pid_t pid, int status) {
    Child child = running.at(pid);
    running.erase(pid);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kInternalError;
    std::string summary;
    if (code != kPassed) summary = summarise(read_file(child.out_path), read_file(child.err_path), code);
    outcomes.push_back({child.seed, code, summary});
    std::remove(child.out_path.c_str());
    std::remove(child.err_path.c_str());
  };
  while ((more() && !spawn_failed) || !running.empty()) {
    while (more() && running.size() < jobs && !spawn_failed) {
      const uint64_t seed = range->first + started++;
      Child child{seed, std::string(dir) + "/" + std::to_string(seed) + ".json",
                  std::string(dir) + "/" + std::to_string(seed) + ".err", std::chrono::steady_clock::now()};
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, child.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, child.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const std::string seed_text = std::to_string(seed);
      std::vector<std::string> argv_s = {args.self_path, "run", args.file, "--seed", seed_text, "--json"};
      if (args.max_wall_time_s > 0) {
        std::ostringstream s;
        s.precision(17);
        s << args.max_wall_time_s;
        argv_s.insert(argv_s.end(), {"--max-wall-time", s.str()});
      }
      if (args.max_memory_mib > 0) argv_s.insert(argv_s.end(), {"--max-memory", std::to_string(args.max_memory_mib)});
      std::vector<char*> argv;
      for (std::string& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      pid_t pid = 0;
      const int rc = posix_spawn(&pid, args.self_path.c_str(), &actions, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&actions);
      if (rc != 0) {
        std::cerr << "dagsim check: cannot start " << args.self_path << ": " << std::strerror(rc) << "\n";
        spawn_failed = true;
        break;
      }
      running.emplace(pid, child);
    }
    if (running.empty()) break;
    int status = 0;
    if (!limits.wall_s) {
      const pid_t pid = waitpid(-1, &status, 0);
      if (pid > 0 && running.count(pid)) finish(pid, status);
      continue;
    }
    // With a wall-time limit, poll, so a seed that outlives its own watchdog is not waited on.
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      finish(pid, status);
      continue;
    }
    const auto deadline = std::chrono::duration<double>(*limits.wall_s) + kWatchdogGrace;
    for (auto& [child_pid, child] : running) {
      if (std::chrono::steady_clock::now() - child.started < deadline) continue;
      kill(child_pid, SIGKILL);
      waitpid(child_pid, &status, 0);
      const uint64_t seed = child.seed;
      std::remove(child.out_path.c_str());
      std::remove(child.err_path.c_str());
      running.erase(child_pid);
      outcomes.push_back({seed, kResourceLimit,
                          "run_completed: still running " + std::to_string(kWatchdogGrace.count()) +
                              " s past its wall-time limit; killed"});
      break;  // the map changed under the loop
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  rmdir(dir);
  if (spawn_failed) return kInternalError;

  std::sort(outcomes.begin(), outcomes.end(), [](const SeedOutcome& a, const SeedOutcome& b) { return a.seed < b.seed; });
  size_t failed = 0, crashed = 0, invalid = 0, limited = 0;
  nlohmann::json failing = nlohmann::json::array();
  for (const SeedOutcome& o : outcomes) {
    if (o.exit_code == kPassed) continue;
    ++failed;
    if (o.exit_code == kBadInput) ++invalid;
    if (o.exit_code == kResourceLimit) ++limited;
    if (o.exit_code != kCheckFailed && o.exit_code != kBadInput && o.exit_code != kResourceLimit) ++crashed;
    const char* verdict = o.exit_code == kCheckFailed     ? "FAILED"
                          : o.exit_code == kBadInput      ? "INVALID"
                          : o.exit_code == kResourceLimit ? "LIMIT"
                                                          : "CRASHED";
    if (!args.json) {
      std::cout << "seed " << o.seed << ": " << verdict << ": " << o.summary
                << "\n  replay: " << replay_command(args.file, o.seed) << "\n";
    }
    failing.push_back({{"seed", o.seed}, {"exit_code", o.exit_code}, {"verdict", verdict}, {"summary", o.summary},
                       {"replay", replay_command(args.file, o.seed)}});
  }
  const size_t total = outcomes.size();
  if (args.json) {
    std::cout << nlohmann::json{{"file", args.file}, {"seeds", args.seeds}, {"runs", total}, {"passed", total - failed},
                                {"failed", failing}, {"provenance", provenance()}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << args.file << ": " << (total - failed) << "/" << total << " seeds passed (" << args.seeds << ")"
              << (crashed > 0 ? ", " + std::to_string(crashed) + " crashed" : "")
              << (limited > 0 ? ", " + std::to_string(limited) + " stopped by a limit" : "") << "\n";
  }
  if (crashed > 0) return kInternalError;
  if (invalid > 0) return kBadInput;  // e.g. the file changed or vanished mid-check
  // A seed that failed a check is a finding; one stopped by a limit has no verdict, which matters
  // only when no seed found anything.
  if (failed > limited) return kCheckFailed;
  return limited > 0 ? kResourceLimit : kPassed;
}

}  // namespace dagsim::cli
