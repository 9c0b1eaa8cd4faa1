// What the transport conformance suites share (transport_equivalence_test.cc,
// hand_started_nodes_test.cc): the examples, `dagsim run --json` on either transport, comparing
// reports, the node processes of a run, and free ports for nodes started by hand.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "scenarios/cli/cli_test_util.h"

namespace dagsim::cli::testing {

using nlohmann::json;
using namespace std::chrono_literals;

inline std::string example(const std::string& name) { return std::string(DAGSIM_EXAMPLES) + "/" + name + ".toml"; }

inline json run_json(const std::string& file, const std::string& transport, int expected_exit = 0,
                     const std::string& flags = "") {
  const Output o = dagsim("run " + file + " --json --transport " + transport + flags);
  EXPECT_EQ(o.exit_code, expected_exit) << transport << " " << file << "\n" << o.out << o.err;
  const json j = json::parse(o.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << o.out;
  return j;
}

// Nested lists of numbers, equal up to `rtol` (summation order may differ between transports:
// gradients from several workers are accumulated in the order they arrive).
inline void expect_close(const json& a, const json& b, const std::string& where, double rtol = 1e-12) {
  ASSERT_EQ(a.type(), b.type()) << where;
  if (a.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    EXPECT_LE(std::abs(x - y), rtol * std::max(std::abs(x), std::abs(y)) + 1e-300) << where << ": " << x << " vs " << y;
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (size_t i = 0; i < a.size(); ++i) expect_close(a[i], b[i], where + "[" + std::to_string(i) + "]", rtol);
  } else if (a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (const auto& [key, value] : a.items()) {
      ASSERT_TRUE(b.contains(key)) << where << "." << key;
      expect_close(value, b[key], where + "." + key, rtol);
    }
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

inline std::vector<std::pair<std::string, bool>> verdicts(const json& j) {
  std::vector<std::pair<std::string, bool>> out;
  for (const json& c : j["checks"]) out.emplace_back(c["name"].get<std::string>(), c["passed"].get<bool>());
  return out;
}

// Processes (not zombies) whose command line contains `token`.
inline std::vector<int> processes_with(const std::string& token) {
  std::vector<int> out;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string cmdline = slurp(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(token) == std::string::npos) continue;
    const std::string stat = slurp(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') continue;
    out.push_back(std::stoi(name));
  }
  return out;
}

inline std::vector<int> wait_for_processes(const std::string& token, size_t n) {
  for (int i = 0; i < 400; ++i) {
    std::vector<int> found = processes_with(token);
    if (found.size() >= n) return found;
    std::this_thread::sleep_for(50ms);
  }
  return processes_with(token);
}

// A port nobody listens on right now, below Linux's ephemeral range (32768 and up): a port the OS
// picked would be free for the next outgoing connection of any test running beside this one.
inline uint16_t free_port() {
  static uint16_t next = static_cast<uint16_t>(20000 + (::getpid() % 600) * 20);
  for (int tries = 0; tries < 2000; ++tries) {
    const uint16_t port = next++;
    if (next >= 32000) next = 20000;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return port;
  }
  ADD_FAILURE() << "no free port in 20000..31999";
  return 0;
}

}  // namespace dagsim::cli::testing
