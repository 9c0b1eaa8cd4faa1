// The root-cause report of a failed job, as torchrun prints it (PyTorch 1.13's ChildFailedError,
// torch/distributed/elastic/multiprocessing/errors): the failed workers of the last group that
// failed, each with its time, host, rank and local rank, exit code and pid, error file and
// traceback, and the first observed failure (the smallest timestamp: the error file's, else when
// the agent saw the worker end) set apart as the root cause. A torchrun user finds the same
// fields in the same layout:
//
//   ============================================================
//   train.py FAILED
//   ------------------------------------------------------------
//   Failures:
//     <NO_OTHER_FAILURES>
//   ------------------------------------------------------------
//   Root Cause (first observed failure):
//   [0]:
//     time      : 2026-11-29_08:43:54
//     host      : node1
//     rank      : 1 (local_rank: 1)
//     exitcode  : 1 (pid: 4321)
//     error_file: /tmp/torchelastic_x/j_y/attempt_0/1/error.json
//     traceback : Traceback (most recent call last):
//       ...
//     ValueError: bad batch
//   ============================================================
//
// Beyond torchrun: a signal is named in the exit line (`-9 (SIGKILL)`); a traceback over
// kTracebackLines lines keeps its last ones (the exception is the last line) and says how many
// it left out; an error file that is not torchelastic's says why in place of the traceback. Every
// line of what a worker wrote is escaped (printable()): control characters never reach the
// terminal raw, and the report stays one line per line.
#pragma once

#include <string>
#include <vector>

#include "net/worker_error_file.h"

namespace dagsim::launch {

inline constexpr size_t kTracebackLines = 200;

// The report for `failures` (not empty) of the job whose entry point is `name`, on `host`.
std::string format_root_cause(const std::string& name, const std::string& host, const std::vector<net::WorkerFailureRecord>& failures);

}  // namespace dagsim::launch
