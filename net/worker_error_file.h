// A failed worker as torchrun reports it: what its torchelastic error file says (the file
// TORCHELASTIC_ERROR_FILE names, where torch.distributed.elastic.multiprocessing.errors' @record
// writes the exception that ended the worker), and the record of one failure that a root-cause
// report is made from (launch/root_cause.h).
//
// The file is the worker's to write, so it is untrusted input: read_worker_error_file reads at most
// kWorkerErrorFileMax bytes of a regular file (a FIFO or device is refused, never waited on;
// core/base/bounded_file.h), parses JSON nested at most kWorkerErrorFileDepth deep (refused as the
// parser reaches that depth), and takes only the fields PyTorch's ProcessFailure reads, each of
// the type it expects; anything else is a `problem`, with the file's text kept (cut) in its place.
// What it returns is raw text: whoever prints it escapes it (printable()).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace dagsim::net {

inline constexpr size_t kWorkerErrorFileMax = 1 << 20;
inline constexpr size_t kWorkerErrorFileDepth = 8;

struct WorkerErrorFile {
  bool exists = false;               // a file is there (maybe unreadable; see problem)
  std::string message;               // the exception's message ("" none)
  std::string traceback;             // extraInfo.py_callstack ("" none)
  std::optional<int64_t> timestamp;  // when the worker wrote it, seconds since the epoch
  std::string problem;               // why it is not torchelastic's JSON ("" when it is, or absent)
  std::string text;                  // the file's text, cut to 4 KiB (what to show with a problem)
};

// Never throws for what the file holds; an absent file is {exists = false}.
WorkerErrorFile read_worker_error_file(const std::string& path);

// One worker's failure as the agent saw it, for a root-cause report.
struct WorkerFailureRecord {
  uint32_t global_rank = 0;
  uint32_t local_rank = 0;
  pid_t pid = 0;
  int exit_code = -1;  // -1 when a signal ended it
  int signal = 0;      // 0 when it exited
  std::string error_file;  // its path when the worker wrote one, else ""
  WorkerErrorFile error;
  std::chrono::system_clock::time_point seen;  // when the agent saw it end
  // torchrun's timestamp: the error file's, else when it was seen (seconds since the epoch).
  int64_t timestamp() const;
};

}  // namespace dagsim::net
