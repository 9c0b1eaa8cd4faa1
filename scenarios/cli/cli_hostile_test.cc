// Tests of the `dagsim` binary against a hostile user (issue 14): seeds that would wrap or
// saturate, unknown commands, outputs that cannot be written or that are the scenario itself,
// and a `check` stopped by a signal, which must leave no temporary directory and no seed behind.
// Every refusal is exit 2 with one line naming what was wrong; never exit 3.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.h"


namespace dagsim::cli {
namespace {

using namespace dagsim::cli::testing;

fs::path example() { return fs::path(DAGSIM_EXAMPLES) / "heartbeat_basic.toml"; }

TEST(CliHostile, SeedsAreWholeNumbersThatFitOrRefused) {
  for (const std::string seed : {"-1", "18446744073709551616", "", " 1", "1x", "+1", "0x10"}) {
    const Output o = dagsim_argv({"run", example().string(), "--seed", seed});
    EXPECT_EQ(o.exit_code, 2) << "--seed '" << seed << "'";
    EXPECT_NE(o.err.find("dagsim run: --seed \""), std::string::npos) << o.err;
  }
  EXPECT_EQ(dagsim_argv({"run", example().string(), "--seed", "18446744073709551615"}).exit_code, 0);
  for (const std::string seeds : {"-1..3", "1..18446744073709551616", "..3", "3..", "", "5..4"}) {
    const Output o = dagsim_argv({"check", example().string(), "--seeds", seeds});
    EXPECT_EQ(o.exit_code, 2) << "--seeds '" << seeds << "'";
    EXPECT_NE(o.err.find("dagsim check: --seeds"), std::string::npos) << o.err;
  }
  const Output escaped = dagsim_argv({"check", example().string(), "--seeds", "1\x1b[2J"});
  EXPECT_EQ(escaped.err.find('\x1b'), std::string::npos) << "an escape sequence reached the terminal";
  EXPECT_NE(escaped.err.find("\"1\\u001b[2J\""), std::string::npos) << escaped.err;
}

TEST(CliHostile, UnknownCommandsAreNamedWithTheCommands) {
  const Output o = dagsim_argv({"frobnicate"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_EQ(o.err.substr(0, o.err.find('\n')), "dagsim: unknown command \"frobnicate\"; commands: run, judge, report, validate, check, merge, shrink, node, store, credentials, launch, help");
  const Output newline = dagsim_argv({"run", example().string(), "--frob\nnicate"});
  EXPECT_EQ(newline.exit_code, 2);
  EXPECT_EQ(newline.err.find("--frob\n"), std::string::npos) << newline.err;
}

TEST(CliHostile, UnwritableOutputsAreTheEnvironmentsError) {
  Output o = dagsim_argv({"run", example().string(), "--trace", "/dev/full"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_EQ(o.err, "dagsim run: --trace /dev/full: write failed (disk full, or not a writable file)\n");
  o = dagsim_argv({"run", example().string(), "--trace", (temp_dir() / "no_such_dir" / "t.json").string()});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("cannot open for writing"), std::string::npos) << o.err;
  o = dagsim_argv({"validate", example().string()}, "/dev/full");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_EQ(o.err, "dagsim: cannot write the report to standard output\n");
  o = dagsim_argv({"run", example().string(), "--records", "/dev/full"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("dagsim run: --records /dev/full:"), std::string::npos) << o.err;
}

TEST(CliHostile, OutputsNeverOverwriteTheScenario) {
  const fs::path file = temp_dir() / "self.toml";
  fs::copy_file(example(), file, fs::copy_options::overwrite_existing);
  const std::string text = slurp(file);
  fs::create_directories(temp_dir() / "sub");
  const fs::path link = temp_dir() / "sub" / "link.toml";
  fs::remove(link);
  fs::create_symlink(file, link);
  // The same file by another name: a relative path through "sub/..", and a symlink.
  for (const fs::path& trace : {temp_dir() / "sub" / ".." / "self.toml", link}) {
    const Output o = dagsim_argv({"run", file.string(), "--trace", trace.string()});
    EXPECT_EQ(o.exit_code, 2) << trace;
    EXPECT_NE(o.err.find("is the scenario file"), std::string::npos) << o.err;
  }
  const fs::path records = temp_dir() / "records";
  fs::create_directories(records);
  fs::copy_file(example(), records / "run.json", fs::copy_options::overwrite_existing);
  const Output o = dagsim_argv({"run", (records / "run.json").string(), "--records", records.string()});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("would overwrite the scenario file"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(file), text);
  EXPECT_EQ(slurp(records / "run.json"), text);
}

// A check stopped by SIGTERM (or ^C) while its seeds run removes its temporary directory, its
// seeds stop with it, and it prints the partial summary (and JUnit file) of what it had by then.
TEST(CliHostile, StoppedCheckLeavesNothingBehind) {
  const fs::path tmp = temp_dir() / "tmpdir";
  fs::create_directories(tmp);
  // About a minute of simulation per seed: still running when stopped.
  const fs::path slow = temp_dir() / "slow_check.toml";
  std::ofstream(slow) << "name = \"slow\"\nmax_virtual_time_ms = 1000000000\n[cluster]\nnodes = 64\n"
                         "[heartbeat]\ninterval_ms = 1\nduration_ms = 100000000\n";
  for (int signal : {SIGTERM, SIGINT}) {
    const std::string tmpdir = "TMPDIR=" + tmp.string();
    const fs::path junit = temp_dir() / ("stopped_" + std::to_string(signal) + ".xml");
    const fs::path out = temp_dir() / ("stopped_" + std::to_string(signal) + ".txt");
    std::vector<std::string> args = {DAGSIM_BINARY, "check", slow.string(), "--seeds", "1..50", "--jobs", "2",
                                     "--junit", junit.string()};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s = {tmpdir, "PATH=/usr/bin:/bin"};
    std::vector<char*> env;
    for (std::string& e : env_s) env.push_back(e.data());
    env.push_back(nullptr);
    pid_t pid = 0;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_EQ(posix_spawn(&pid, DAGSIM_BINARY, &actions, nullptr, argv.data(), env.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    // Wait until the seeds have started (their output files exist).
    bool started = false;
    for (int i = 0; i < 500 && !started; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      for (const auto& entry : fs::directory_iterator(tmp)) started = started || !fs::is_empty(entry.path());
    }
    ASSERT_TRUE(started);
    kill(pid, signal);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal) << status;
    const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    const std::string summary = slurp(out);
    EXPECT_NE(summary.find("0/0 seeds passed (1..50)"), std::string::npos) << summary;
    EXPECT_NE(summary.find("interrupted by " + name + ": 0 of 50 seeds finished, 2 cut short"), std::string::npos)
        << summary;
    const std::string xml = slurp(junit);
    size_t skipped = 0;
    for (size_t at = xml.find("<skipped message=\"interrupted"); at != std::string::npos;
         at = xml.find("<skipped message=\"interrupted", at + 1)) {
      ++skipped;
    }
    EXPECT_EQ(skipped, 2u) << xml;
    EXPECT_TRUE(fs::is_empty(tmp)) << "the temporary directory is left behind";
    // No seed of this check still runs: no process has the scenario on its command line.
    bool alive = false;
    for (int i = 0; i < 100; ++i) {
      alive = false;
      for (const auto& proc : fs::directory_iterator("/proc")) {
        alive = alive || slurp(proc.path() / "cmdline").find(slow.string()) != std::string::npos;
      }
      if (!alive) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(alive) << "a seed outlived its check";
  }
}

}  // namespace
}  // namespace dagsim::cli
