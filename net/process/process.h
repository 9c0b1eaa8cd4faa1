// Process: the one way dagsim starts a program (workers of `dagsim launch`, etcd, the seeds of
// `dagsim check --jobs`, the nodes of `dagsim run --transport tcp`), and the handle that owns it
// until it has ended and been reaped.
//
// What it promises:
//  - The program runs with exactly the argv, the whole environment and the descriptors the
//    ProcessSpec gives: the fd map is the child's whole table (0, 1 and 2 are /dev/null where the
//    map has none; everything else is closed, close-on-exec or not), in its directory, with every
//    signal at its default disposition and an empty mask, in a process group of its own whose id
//    is pid().
//  - Nothing it starts outlives it or its caller (guard.h): the program is started by a guard
//    process, a child subreaper, that SIGKILLs the program's group and everything below it when
//    the program ends, and at once when the caller dies, SIGKILL included. So a SIGKILLed dagsim
//    leaves none of its children running, and none of theirs (a DataLoader's workers, a shell's
//    background jobs, a process that moved to another group or session: all are below the guard).
//    What escapes: processes started through another service (not below the guard), and the
//    program's descendants if the guard itself is SIGKILLed by someone else.
//  - A program that cannot start fails spawn() with a dagsim::Error naming it and why (code
//    invalid_argument: no such program, not executable, an output file or a directory that cannot
//    be used, a descriptor of the map that is not open; internal_error where the system refused a
//    fork or a pipe), after anything already started for it has been reaped.
//  - The exit seen (poll, wait, stop) is the program's own: its exit code, or the signal that
//    ended it.
//  - What the program left behind is known once it is reaped (leftovers()): the processes still
//    alive below it when it ended (its guard found them before killing them: a launcher that
//    exited before its workers, a daemon it double-forked), each with its pid and command line.
//    A group a kill struck may still be dying then: a program ended by a signal may list those.
//  - signal() reaches the program's group; signal(SIGSTOP) returns once the program has stopped,
//    or after 10 s if it cannot (a program waiting on a vfork child that stopped before its exec).
//    stop() is SIGTERM, then up to `grace` on the caller's clock (a fiber sleeps; no thread
//    blocks), then SIGKILL; the destructor SIGKILLs and reaps whatever still runs.
//
// Threading: a Process is used by one thread at a time. Reaps only its own guard, by pid: a
// caller that reaps with waitpid(-1) takes exits from under it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "core/runtime/clock.h"

namespace dagsim::net {

struct ProcessSpec {
  // argv[0] is the program: looked up on the environment's PATH as execvp does, unless it names a
  // path (has a slash).
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=VALUE: the whole environment (current_environment())
  // The child's descriptors: {child fd, this process's fd}. By default the standard three.
  std::vector<std::pair<int, int>> fds = {{0, 0}, {1, 1}, {2, 2}};
  std::string directory;    // "": this process's
  std::string stdout_path;  // "": as the fd map says; else appended to (created 0644)
  std::string stderr_path;
  // How errors name the program ("worker 1", "etcd"); "" for argv[0].
  std::string name;
};

// This process's environment, as NAME=VALUE strings.
std::vector<std::string> current_environment();

// A process still alive below a program when the program ended (Process::leftovers()).
struct Leftover {
  pid_t pid = 0;
  std::string cmdline;  // its argv joined by spaces, at most 200 bytes ("" if it could not be read)
};

// How a program ended, as waitpid reported it.
struct ProcessExit {
  int status = 0;
  bool exited() const;  // with an exit code (else killed by a signal)
  int exit_code() const;  // -1 when a signal ended it
  int signal() const;     // 0 when it exited
  bool success() const { return exited() && exit_code() == 0; }
  std::string describe() const;  // "exited with code 3", "was killed by signal 9 (Killed)"
};

class Process {
 public:
  Process() = default;  // no program
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // The program's pid, which is also its process group's id; 0 for an empty handle. Stays the same
  // after the program ended (for messages); only its guard's pid is safe to signal directly.
  pid_t pid() const { return pid_; }
  // Started and not yet reaped.
  bool running() const { return guard_ > 0; }
  const std::optional<ProcessExit>& exit() const { return exit_; }
  // Once reaped: what was alive below the program when it ended, which its guard then killed (at
  // most 64; see above). Empty before.
  const std::vector<Leftover>& leftovers() const { return leftovers_; }

  // Reaps without blocking: the exit once the program has ended (every later call returns it too).
  std::optional<ProcessExit> poll();
  // Blocks until the program has ended and everything below it is gone.
  ProcessExit wait();
  // Sends `sig` to the program's group (no-op once reaped). SIGSTOP returns once it has stopped
  // (at most 10 s: see above); SIGKILL once the program is dead (at most 2 s), as a direct kill
  // would: the guard's hop must not let it run on past the call.
  void signal(int sig);
  void kill();  // signal(SIGKILL)
  // SIGTERM, up to `grace` on `clock`, then SIGKILL; reaped when it returns.
  ProcessExit stop(runtime::Clock& clock, runtime::Duration grace);

 private:
  friend Process spawn(const ProcessSpec& spec);
  void reaped(int status);
  void release();
  // Reads what the guard has written so far, without blocking, and takes in each whole report.
  // True once the pipe is at its end (the guard has exited).
  bool read_reports();

  pid_t guard_ = 0;
  pid_t pid_ = 0;
  int report_fd_ = -1;  // the guard's reports (SIGSTOP's answer, leftovers); closed once reaped
  std::string reports_;  // bytes read from report_fd_ not yet taken in
  int stops_answered_ = 0;
  std::vector<Leftover> leftovers_;
  std::optional<ProcessExit> exit_;
};

// Starts spec's program. Throws dagsim::Error (see above) when it cannot start.
Process spawn(const ProcessSpec& spec);

// Stops several at once: SIGTERM to each, one shared grace on `clock`, then SIGKILL to those left;
// all reaped when it returns.
void stop_all(const std::vector<Process*>& processes, runtime::Clock& clock, runtime::Duration grace);

}  // namespace dagsim::net
