// Wall-time watchdog and memory limit of `dagsim run` (run_limits.h).
#include "scenarios/cli/run_limits.h"

#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <cblas.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/tensor/ops.h"
#include "scenarios/cli/commands.h"
#include "scenarios/cli/report.h"

namespace dagsim::cli {

namespace {

// Formatted before the run, so the handler only writes: write() and _exit() are async-signal-safe.
std::string* watchdog_report = nullptr;
std::atomic<int>* watchdog_stop_flag = nullptr;

extern "C" void on_wall_time_limit(int) {
  if (std::atomic<int>* flag = watchdog_stop_flag) {
    int none = 0;
    flag->compare_exchange_strong(none, SIGALRM);  // lock-free: async-signal-safe
    return;
  }
  if (watchdog_report != nullptr) {
    const char* p = watchdog_report->data();
    size_t left = watchdog_report->size();
    while (left > 0) {
      const ssize_t n = write(STDOUT_FILENO, p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  const char text[] = "dagsim: stopped by the wall-time limit (max_wall_time_ms / --max-wall-time)\n";
  (void)!write(STDERR_FILENO, text, sizeof(text) - 1);
  std::_Exit(kResourceLimit);
}

}  // namespace

HostLimits effective_limits(const scenarios::Scenario& scenario, double flag_wall_s, uint64_t flag_memory_mib) {
  HostLimits limits;
  if (flag_wall_s > 0) {
    limits.wall_s = flag_wall_s;
  } else if (scenario.max_wall_time) {
    limits.wall_s = static_cast<double>(scenario.max_wall_time->count()) / 1e9;
  }
  if (flag_memory_mib > 0) {
    limits.memory_mib = flag_memory_mib;
  } else {
    limits.memory_mib = scenario.max_memory_mib;
  }
  return limits;
}

std::string limit_report(const scenarios::Scenario& scenario, const std::string& file, uint64_t seed,
                         const std::string& transport, const std::string& replay_flags, const std::string& outcome,
                         const std::string& detail, bool json) {
  if (json) {
    const nlohmann::json j = {{"scenario", scenario.name},
                              {"file", file},
                              {"seed", seed},
                              {"transport", transport},
                              {"passed", false},
                              {"outcome", outcome},
                              {"checks", {{{"name", "run_completed"}, {"passed", false}, {"detail", detail}}}},
                              {"replay", replay_command(file, seed, replay_flags)},
                              {"provenance", provenance()}};
    return j.dump(2) + "\n";
  }
  std::ostringstream out;
  out << "scenario " << scenario.name << " (" << file << "), seed " << seed << ", transport " << transport << "\n"
      << "  " << outcome << "\n"
      << "  FAIL run_completed: " << detail << "\n"
      << "STOPPED (no verdict); replay with: " << replay_command(file, seed, replay_flags) << "\n";
  return out.str();
}

namespace {

// OpenBLAS maps its work buffer at its first gemm and, when that mmap fails under RLIMIT_AS,
// retries without end (blas_memory_alloc): `--max-memory 96` spun for minutes. Mapped now, before
// the limit, it is reused by every later product.
void warm_blas() {
  constexpr int n = 128;
  std::vector<double> a(n * n, 1.0), c(n * n, 0.0);
  std::vector<float> af(n * n, 1.0f), cf(n * n, 0.0f);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, a.data(), n, 0.0, c.data(), n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, af.data(), n, af.data(), n, 0.0f, cf.data(), n);
  // float32 products run on oneDNN (linalg.cc), which generates its kernels and its scratch at the
  // first one: that too before the limit.
  (void)matmul(ones({n, n}, Dtype::float32), ones({n, n}, Dtype::float32));
}

// The address space this process maps now (VmSize), in MiB; 0 if /proc says nothing.
uint64_t mapped_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) >> 10;  // kB
  }
  return 0;
}

}  // namespace

bool arm_host_limits(const HostLimits& limits, std::string wall_report) {
  if (limits.memory_mib) {
    warm_blas();
    // Below what the process maps already, plus room to run, a limit could only end in a crash
    // of its own runtime: refused, naming the least it can take on this host.
    const uint64_t least = mapped_mib() + kMemoryHeadroomMib;
    if (*limits.memory_mib < least) {
      std::cerr << "dagsim: a memory limit of " << *limits.memory_mib << " MiB is below the least a run takes here, " << least
                << " MiB: the process maps " << least - kMemoryHeadroomMib << " MiB once started (its code, libraries "
                << "and OpenBLAS's buffer) and needs " << kMemoryHeadroomMib << " MiB more to run\n";
      return false;
    }
    const rlim_t bytes = static_cast<rlim_t>(*limits.memory_mib) << 20;
    rlimit current{};
    getrlimit(RLIMIT_AS, &current);
    // Never above a limit the caller already had (an unprivileged process cannot raise it).
    const rlimit wanted{std::min(bytes, current.rlim_max), current.rlim_max};
    if (setrlimit(RLIMIT_AS, &wanted) != 0) {
      std::cerr << "dagsim: cannot limit memory to " << *limits.memory_mib << " MiB: " << std::strerror(errno) << "\n";
      return false;
    }
  }
  if (limits.wall_s) {
    delete watchdog_report;
    watchdog_report = new std::string(std::move(wall_report));
    struct sigaction action{};
    action.sa_handler = on_wall_time_limit;
    action.sa_flags = SA_ONSTACK;  // a fiber's small stack may be the one interrupted (main.cc)
    sigemptyset(&action.sa_mask);
    sigaction(SIGALRM, &action, nullptr);
    const double s = *limits.wall_s;
    itimerval timer{};
    timer.it_value.tv_sec = static_cast<time_t>(s);
    timer.it_value.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(timer.it_value.tv_sec)) * 1e6);
    if (timer.it_value.tv_sec == 0 && timer.it_value.tv_usec == 0) timer.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &timer, nullptr);
  }
  return true;
}

void wall_watchdog_requests_stop(std::atomic<int>* flag) { watchdog_stop_flag = flag; }

void disarm_wall_watchdog() {
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
}

}  // namespace dagsim::cli
