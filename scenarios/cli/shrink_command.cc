// `dagsim shrink FILE --seed N`: from a failing run, a smaller scenario that fails the same check
// the same way (scenarios/shrink/shrink_search.h), written as a scenario file with a header saying
// what it was shrunk from, and its before and after sizes on stdout (--json: one object).
//
// Each candidate is a real run in a child process (`dagsim run CAND --seed N --json`, this binary
// or --dagsim PATH's; that binary's `dagsim validate` then also judges each candidate's validity,
// since an older loader may take keys this one does not), written next to FILE so that a [job]'s relative paths resolve the same; the
// child gets a wall limit (--max-wall-time) of ten times the original run's, 30 s at least, and at
// most what is left of the search's own.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/commands.h"
#include "scenarios/format/scenario_loader.h"
#include "scenarios/shrink/candidate_run.h"
#include "scenarios/shrink/shrink_header.h"
#include "scenarios/shrink/shrink_search.h"
#include "scenarios/shrink/toml_edits.h"

namespace dagsim::cli {
namespace {

namespace fs = std::filesystem;

constexpr double kMinRunLimitS = 30;
constexpr double kRunLimitFactor = 10;

std::string default_output(const std::string& file, uint64_t seed) {
  return fs::path(file).stem().string() + ".seed" + std::to_string(seed) + ".shrunk.toml";
}

// Candidates go beside FILE (a [job] resolves its paths from its scenario's folder); where that
// folder cannot be written, under $TMPDIR.
std::string work_dir_of(const std::string& file) {
  std::string dir = fs::absolute(fs::path(file)).parent_path().string();
  if (::access(dir.c_str(), W_OK) == 0) return dir;
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

}  // namespace

int shrink_command(const ShrinkArgs& args, std::string* written) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  // Another binary (--dagsim, perhaps of an older commit) judges validity with its own loader.
  const bool other_binary = !args.dagsim.empty();
  if (!other_binary) {
    const int valid = validate_command_quiet(args.file);
    if (valid != kPassed) return valid;
  }
  const std::string dagsim = other_binary ? args.dagsim : args.self_path;
  if (::access(dagsim.c_str(), X_OK) != 0) {
    std::cerr << "dagsim shrink: --dagsim " << printable(dagsim, kPathMax) << ": not an executable file\n";
    return kBadInput;
  }
  const std::string text = scenarios::read_scenario_text(args.file);
  const std::string work_dir = work_dir_of(args.file);
  shrink::CandidateRunner runner(dagsim, work_dir, fs::path(args.file).stem().string(), args.seed);
  if (other_binary && !runner.validate(text)) {
    std::cerr << "dagsim shrink: " << printable(dagsim, kPathMax) << " validate " << printable(args.file, kPathMax)
              << " refuses it\n";
    return kBadInput;
  }
  auto left_s = [&] {
    return args.max_wall_time_s - std::chrono::duration<double>(Clock::now() - start).count();
  };
  if (args.progress) std::cerr << "dagsim shrink: running " << printable(args.file, kPathMax) << " seed " << args.seed << "\n";
  const shrink::RunOutcome original = runner.run(text, left_s());
  std::string why;
  const std::optional<shrink::FailureSignature> signature = shrink::signature_of(original, args.check, &why);
  if (!signature) {
    if (original.exit_code == kPassed) {
      std::cerr << "dagsim shrink: seed " << args.seed << " passes: nothing to shrink\n";
    } else {
      std::cerr << "dagsim shrink: seed " << args.seed << " of " << printable(args.file, kPathMax) << ": " << why
                << ": nothing to shrink\n";
    }
    return kBadInput;
  }
  if (args.progress) std::cerr << "dagsim shrink: seed " << args.seed << " fails " << signature->describe() << "; shrinking\n";
  const double run_limit_s = std::max(kMinRunLimitS, kRunLimitFactor * original.wall_ms / 1000);

  shrink::SearchEnv env;
  const std::string candidate_name = runner.candidate_path();
  env.validate = [&](const std::string& candidate) -> std::optional<uint32_t> {
    std::optional<uint32_t> nodes;
    try {
      nodes = scenarios::parse_scenario(candidate, candidate_name).cluster.nodes;
    } catch (const Error&) {
      if (!other_binary) return std::nullopt;
    }
    if (!other_binary) return nodes;
    if (!runner.validate(candidate)) return std::nullopt;
    // What this binary's loader could not read: [cluster] nodes as written, else its default.
    if (!nodes) nodes = static_cast<uint32_t>(shrink::parse_toml(candidate, candidate_name)["cluster"]["nodes"].value_or(int64_t{2}));
    return nodes;
  };
  env.run = [&](const std::string& candidate) { return runner.run(candidate, std::max(1.0, std::min(run_limit_s, left_s()))); };
  shrink::SearchOptions options;
  options.max_runs = args.max_runs;
  options.out_of_time = [&] { return left_s() <= 0; };
  if (args.progress) options.progress = [](const std::string& line) { std::cerr << "dagsim shrink: " << line << "\n"; };

  shrink::ShrinkReport report;
  report.original = args.file;
  report.seed = args.seed;
  report.output = args.out.empty() ? default_output(args.file, args.seed) : args.out;
  report.signature = *signature;
  report.max_runs = args.max_runs;
  report.swarm_mix = original.swarm;
  report.result = shrink::shrink_search(text, original, *signature, env, options);

  {
    std::ofstream out(report.output, std::ios::binary | std::ios::trunc);
    out << shrink::shrunk_file_text(report);
    if (!out.flush()) {
      std::cerr << "dagsim shrink: cannot write " << printable(report.output, kPathMax) << "\n";
      return kBadInput;
    }
  }
  if (written != nullptr) *written = report.output;
  if (args.quiet) return kPassed;
  if (args.json) {
    std::cout << shrink::summary_json(report).dump(2) << "\n";
  } else {
    std::cout << shrink::summary_text(report);
  }
  return kPassed;
}

}  // namespace dagsim::cli
