// What the `dagsim launch` process tests share (launch_cli_test.cc, launch_failures_cli_test.cc): a
// free loopback port, and one `dagsim launch` process started with its own environment and its
// standard error in a file, killed and reaped if a test leaves it running.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <map>
#include <regex>
#include <thread>
#include <string>
#include <vector>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli {

using namespace testing;

inline uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// One `dagsim launch` process, started with extra environment variables and its own stderr file.
class Launch {
 public:
  Launch(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
    static int counter = 0;
    err_ = temp_dir() / ("launch_" + std::to_string(++counter) + ".err");
    args.insert(args.begin(), {DAGSIM_BINARY, "launch"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).starts_with("PET_")) continue;  // only what a test sets
      envs.emplace_back(*e);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (std::string& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_EQ(posix_spawn(&pid_, DAGSIM_BINARY, &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Launch() {
    if (pid_ > 0 && code_ < 0) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
  }
  int wait() {
    if (code_ < 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      code_ = exit_code_of(status);
    }
    return code_;
  }
  std::string err() const { return slurp(err_); }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  // Waits (polling, without blocking past `within`) until the process exited: true with its exit
  // code in wait(), false if it still runs.
  bool exits_within(std::chrono::milliseconds within) {
    const auto until = std::chrono::steady_clock::now() + within;
    while (code_ < 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        code_ = exit_code_of(status);
        break;
      }
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  // Waits until standard error holds `text` (or a match of `pattern`): true, or false once
  // `within` passed or the process exited without it.
  bool says_within(const std::string& text, std::chrono::milliseconds within) {
    return said_within([&](const std::string& err) { return err.find(text) != std::string::npos; }, within);
  }
  bool says_within(const std::regex& pattern, std::chrono::milliseconds within) {
    return said_within([&](const std::string& err) { return std::regex_search(err, pattern); }, within);
  }

 private:
  bool said_within(const std::function<bool(const std::string&)>& said, std::chrono::milliseconds within) {
    const auto until = std::chrono::steady_clock::now() + within;
    for (;;) {
      if (said(err())) return true;
      if (std::chrono::steady_clock::now() >= until || exits_within(std::chrono::milliseconds(0))) return said(err());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  pid_t pid_ = -1;
  int code_ = -1;
  fs::path err_;
};

}  // namespace dagsim::cli
