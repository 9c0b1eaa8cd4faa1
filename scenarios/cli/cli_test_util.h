// What the CLI tests share: a scratch directory per test process, the `dagsim` binary run through
// the shell or with exact arguments, and its exit code, standard output and standard error.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace dagsim::cli::testing {

namespace fs = std::filesystem;

struct Output {
  int exit_code = -1;  // 128 + the signal when one ended it
  std::string out;
  std::string err;
};

// One scratch directory per test process, removed when the process exits.
inline fs::path temp_dir() {
  struct ScratchDir {
    fs::path path = fs::temp_directory_path() / ("dagsim-cli-test-" + std::to_string(::getpid()));
    ScratchDir() { fs::create_directories(path); }
    ~ScratchDir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static const ScratchDir dir;
  return dir.path;
}

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// `dagsim ARGS` through the shell (so ARGS may quote and redirect), standard output captured.
inline Output dagsim(const std::string& args) {
  const fs::path err_file = temp_dir() / "stderr.txt";
  const std::string command = std::string(DAGSIM_BINARY) + " " + args + " 2>" + err_file.string();
  Output result;
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  result.exit_code = exit_code_of(pclose(pipe));
  result.err = slurp(err_file);
  return result;
}

// `dagsim` with exactly these arguments (no shell: they reach it byte for byte), standard output
// written to `out` and read back.
inline Output dagsim_argv(std::vector<std::string> args, const std::string& out = "/dev/null") {
  const fs::path err = temp_dir() / "stderr.txt";
  args.insert(args.begin(), DAGSIM_BINARY);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, DAGSIM_BINARY, &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  Output result;
  result.exit_code = exit_code_of(status);
  result.err = slurp(err);
  return result;
}

// A shell command's exit code, with its standard output and error together in `out`.
inline Output shell(const std::string& command) {
  Output result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  result.exit_code = exit_code_of(pclose(pipe));
  return result;
}

inline fs::path write_scenario(const std::string& name, const std::string& text) {
  const fs::path path = temp_dir() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace dagsim::cli::testing
