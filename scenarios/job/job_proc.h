// The processes of a job run as /proc shows them: every process carrying the run's marker
// (DAGSIM_JOB_RUN=<token> in its environment), with its parent, its LOCAL_RANK and RANK, and its
// command line; and a program run to its end with its output captured (`ip`, a `command` check).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "net/process/process.h"

namespace dagsim::scenarios::job {

inline constexpr const char* kMarkerVariable = "DAGSIM_JOB_RUN";

struct MarkedProcess {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::optional<uint32_t> local_rank;  // LOCAL_RANK of its environment
  std::optional<uint32_t> rank;        // RANK
  std::string cmdline;                 // arguments joined by spaces, printable
};

// Every live process (zombies excluded) whose environment holds DAGSIM_JOB_RUN=token. Reads every
// process's environment on the host: for the run's final orphan sweep only (once).
std::vector<MarkedProcess> marked_processes(const std::string& token);

// The marked processes (as marked_processes) among `roots` and every process below them, found
// through /proc/PID/task/TID/children (or, where the kernel lacks it, the parent field of every
// /proc/PID/stat); only those processes' environments are read. What the run scans every 100 ms.
std::vector<MarkedProcess> marked_descendants(const std::vector<pid_t>& roots, const std::string& token);

// The pids below `pid` (not itself), children before grandchildren.
std::vector<pid_t> descendants_of(pid_t pid);

// When `pid` started (/proc/PID/stat's field 22, clock ticks since boot); nullopt when it is gone.
std::optional<uint64_t> start_time_of(pid_t pid);

// Whether the live process `pid` carries DAGSIM_JOB_RUN=token and started at `start_time`: the pid
// is still the process the run saw, not a reused one.
bool same_marked_process(pid_t pid, uint64_t start_time, const std::string& token);

// A TCP port below /proc/sys/net/ipv4/ip_local_port_range's start (so no outgoing connection is
// given it while its server is down) that binds now on every address; 0 when none was found.
uint16_t port_below_ephemeral_range();

// Whether a TCP listener could bind `port` on every address now (SO_REUSEADDR, as servers do).
bool port_free(uint16_t port);

// The parent of `pid` (0 when it is gone).
pid_t parent_of(pid_t pid);

// Whether `pid` has `ancestor` above it (or is it), following parents in `parents` (pid -> ppid).
bool descends_from(pid_t pid, pid_t ancestor, const std::map<pid_t, pid_t>& parents);

// A fresh random token (hex).
std::string random_token();

struct CommandResult {
  int exit_code = -1;   // -1: killed by a signal (signal says which)
  int signal = 0;
  std::string output;   // stdout and stderr together, at most max_output bytes
  bool timed_out = false;
};

// Runs argv to its end (at most `limit`), stdout and stderr captured into `output_path` and read
// back (at most max_output bytes). Throws Error(invalid_argument) when it cannot start.
CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string& directory, const std::string& output_path,
                          std::chrono::milliseconds limit, size_t max_output = size_t{64} << 10);

// Sleeps the calling thread (the runner is a plain thread of real processes, not a fiber).
void sleep_ms(int64_t ms);

// SIGTERM to the program's group, up to `grace`, then SIGKILL; reaped when it returns.
void stop_process(net::Process& process, std::chrono::milliseconds grace);

// "SIGKILL", "SIGTERM", ... or "signal N".
std::string signal_name(int sig);

}  // namespace dagsim::scenarios::job
