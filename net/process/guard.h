// The guard: the small process that stands between a dagsim process and each program it starts
// (process.h), so that the program and everything it starts die when the dagsim process dies,
// however it dies (SIGKILL included), and when the program itself ends.
//
// The shape: the caller forks the guard G; G forks the worker W, which execs the program. Nothing
// here allocates or takes a lock: G and W are forks of a multithreaded process, so they run only
// system calls, over arrays the caller built before the fork (GuardPlan).
//
// What G promises (see process.h for what the caller sees):
//  1. G is in a session of its own (no terminal's signals reach it), is a child subreaper (every
//     orphan below it is reparented to it, whatever process group or session it moved to), and
//     gets SIGHUP when its parent thread dies. A SIGHUP while getppid() is still the caller's pid
//     is a thread of the caller exiting, not the caller: ignored. Otherwise the caller is gone:
//     W's process group is SIGKILLed at once.
//  2. W is a process group of its own, Q (its pid), made by both G and W (so it exists before
//     either goes on), has the default disposition for every signal and an empty mask, holds
//     exactly the descriptors of the plan's map (0, 1 and 2 are /dev/null where the map has none:
//     a program's next open must not land on its standard output) and dies with G
//     (PR_SET_PDEATHSIG SIGKILL).
//  3. G tells the caller, over the report pipe, either "started, W's pid" or "failed, at which
//     step, errno" (W's exec error travels to G over a close-on-exec pipe).
//  4. Requests come as kRequestSignal queued by the caller (sigqueue: a real-time signal, so none
//     is merged with the next) carrying the signal to send; G sends it to group Q (and to W if W
//     left Q). For SIGSTOP, G answers once W has stopped (or ended). A SIGTERM to G itself is
//     forwarded the same way.
//  5. When W ends, G SIGKILLs group Q before reaping W (so Q cannot name another group yet), then
//     SIGKILLs every process still below it, until it has no child left, and exits as W did: with
//     its exit code, or killed by the same signal (no core file). The caller's waitpid on G sees
//     W's end. "Below it" is whatever the kernel reparents to G: processes that left Q, moved to
//     a session of their own (setsid) or lost their parent (a double fork) are G's once their
//     parents are gone, so killing G's children over and over reaches the last of them. G's
//     children are read from /proc/thread-self/children, or, on a kernel without that file
//     (CONFIG_PROC_CHILDREN), found by walking /proc for the processes whose parent is G.
//  6. Before that kill, G tells the caller what W left behind: every process still alive (not a
//     zombie) below G once W has ended, as one Report::leftover message each (its pid and up to
//     kLeftoverTextMax bytes of its command line following the 16 bytes), at most
//     kLeftoversMax of them. Written without blocking: a caller that never reads loses them.
//
// What escapes: a process that is not below G (one started through another service: a login,
// systemd-run, a daemon over a socket), and W's descendants if G itself is SIGKILLed by someone
// else (W dies with G; what W started is reparented above G).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace dagsim::net::process_detail {

// One descriptor of the child: `target` in the child is the caller's `source`.
struct FdPair {
  int target = -1;
  int source = -1;
};

// Where starting the program failed (Report::stage).
enum class Stage : int32_t { none = 0, guard = 1, fork = 2, descriptors = 3, directory = 4, exec = 5 };

// What G writes to the caller: 16 bytes, so each write is one atomic pipe message.
struct Report {
  enum Kind : int32_t { started = 1, failed = 2, stopped = 3, leftover = 4 };
  int32_t kind = 0;
  int32_t stage = 0;  // Stage, when failed
  int32_t error = 0;  // errno, when failed; leftover: the bytes of command line that follow
  int32_t value = 0;  // started: W's pid; failed at descriptors: the child's descriptor; leftover: its pid
};
static_assert(sizeof(Report) == 16);

// What guard.h's 6. reports at most: processes, and bytes of each one's command line.
inline constexpr size_t kLeftoversMax = 64;
inline constexpr size_t kLeftoverTextMax = 200;

// Everything G and W read, built by the caller before fork. Pointers point into the caller's
// memory, which the forks share a copy of.
struct GuardPlan {
  const char* path = nullptr;       // the program, resolved (execve: no PATH search after fork)
  char* const* argv = nullptr;      // null-terminated
  char* const* envp = nullptr;      // null-terminated: the whole environment
  const char* directory = nullptr;  // chdir there first, or nullptr
  const FdPair* fds = nullptr;
  size_t fd_count = 0;
  int* scratch = nullptr;  // fd_count ints W may write (its copies of the sources)
  int highest_fd = 0;      // above every target and source: where W parks its copies
  int max_open_fd = 0;     // the descriptor limit, for closing by loop where close_range is missing
  pid_t caller = 0;        // the caller's pid, saved before the fork
  int report_fd = -1;      // the write end of the caller's report pipe
  int request_signal = 0;  // kRequestSignal's number (SIGRTMIN is known only at run time)
  pid_t* leftovers = nullptr;  // kLeftoversMax pids G may write (guard.h, 6)
};

// The signal the caller queues to G for a request (SIGRTMIN: real-time, so queued, never merged).
int request_signal();

// SIGKILLs every child of the calling process, found by walking /proc (each /proc/PID/stat's
// parent): G's fallback where /proc/thread-self/children is missing, public for its test. Safe
// in a fork of a multithreaded process (system calls only). A child of the caller is never reaped
// by this, so no pid it kills can name another process.
void kill_children_by_scan();

// Runs G in the child of the caller's fork. The caller's signal mask at the fork must block every
// signal (so no handler of the caller runs in G). Never returns.
[[noreturn]] void run_guard(const GuardPlan& plan);

}  // namespace dagsim::net::process_detail
