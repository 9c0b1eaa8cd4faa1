// ProcessWorkerGroup: the WorkerGroup of `dagsim launch`, real worker processes started as
// PyTorch 1.13's LocalElasticAgent starts them for torchrun: one process per local rank running
// the user's command with torchrun's environment (worker_environment), per-rank logs and an error
// file in torchrun's layout, polled without blocking, stopped with SIGTERM then SIGKILL after the
// grace.
//
// Layout (torchrun's): <run log dir>/attempt_<restart count>/<local rank>/ holds stdout.log and
// stderr.log (for the streams redirected to files) and error.json (TORCHELASTIC_ERROR_FILE, where
// torch.distributed.elastic's @record writes a failed worker's exception). The run log dir is
// <log dir>/<run id>_<random>, made once per agent (make_run_log_dir).
//
// What it promises beyond WorkerProcesses:
//  - A failed worker's error names its local and global rank, how it ended, and the message of
//    its error file when it wrote one (read within bounds, worker_error_file.h; a file that is not
//    torchelastic's JSON is quoted as text, cut). When the group fails, every worker of it that
//    failed by then is recorded in `failures` (pid, ranks, exit, error file, when), replacing the
//    records of an earlier failed group: what a root-cause report is made from.
//  - --tee: the streams teed are copied, line by line with torchrun's "[<role><local rank>]:"
//    prefix, to the agent's own standard output or error at each poll() and at stop().
//  - Destroyed while its workers run (the agent unwinding from SIGTERM), it hands them to
//    `orphans` when given, for the launcher to stop with the grace once the agent has unwound;
//    otherwise they are killed at once.
//
// Threading: the agent's fibers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/elastic/worker_group.h"
#include "core/runtime/clock.h"
#include "net/worker_error_file.h"
#include "net/worker_processes.h"

namespace dagsim::net {

// torchrun's Std: which of a worker's streams go to files (--redirects) or are copied to the
// console (--tee). "0" none, "1" stdout, "2" stderr, "3" both, for every local rank; or
// "<local rank>:<n>,..." per rank (ranks not named get none).
struct StdStreams {
  static constexpr uint8_t kOut = 1;
  static constexpr uint8_t kErr = 2;
  uint8_t all = 0;
  std::map<uint32_t, uint8_t> per_rank;
  bool per_rank_given = false;
  uint8_t of(uint32_t local_rank) const;
};
// Throws invalid_argument naming `flag` and the text when it is neither form.
StdStreams parse_std_streams(const std::string& flag, const std::string& text);

struct ProcessWorkerConfig {
  std::vector<std::string> argv;  // the command and its arguments
  elastic::Environment agent_env;  // what every worker inherits (launcher_environment applied)
  std::string run_log_dir;        // <log dir>/<run id>_<random>
  StdStreams redirects;
  StdStreams tee;
  runtime::Duration grace = std::chrono::seconds(30);  // torchrun's
  // Where workers still running when their group is destroyed go (see above); may be null.
  std::shared_ptr<std::vector<std::unique_ptr<WorkerProcesses>>> orphans;
  // The failures of the last group that failed (see above); may be null.
  std::shared_ptr<std::vector<WorkerFailureRecord>> failures;
};

// Makes <log dir>/<run id>_<6 random characters> (and <log dir> itself); throws invalid_argument
// naming the folder when it cannot, and naming the id when it is empty or holds a '/' (the folder
// must be inside <log dir>: "../../x" is refused before anything is made).
std::string make_run_log_dir(const std::string& log_dir, const std::string& run_id);

class ProcessWorkerGroup final : public elastic::WorkerGroup {
 public:
  // Starts the workers; throws invalid_argument naming what could not be made or started.
  ProcessWorkerGroup(runtime::Clock& clock, const ProcessWorkerConfig& config, const elastic::WorkerGroupSpec& spec);
  ~ProcessWorkerGroup() override;

  elastic::WorkerGroupStatus poll() override;
  void stop() override;

  const std::vector<elastic::Environment>& environments() const { return environments_; }
  std::vector<pid_t> pids() const { return processes_ ? processes_->pids() : std::vector<pid_t>{}; }

 private:
  struct Tee;
  void copy_tees();

  runtime::Clock& clock_;
  const ProcessWorkerConfig& config_;
  const elastic::WorkerGroupSpec spec_;
  std::string attempt_dir_;
  std::vector<elastic::Environment> environments_;
  std::vector<Tee> tees_;
  std::unique_ptr<WorkerProcesses> processes_;
};

// A factory for ElasticAgent over `config` (which outlives the agent).
elastic::WorkerGroupFactory process_worker_group(runtime::Clock& clock, const ProcessWorkerConfig& config);

}  // namespace dagsim::net
