// ProcessWorkerGroup (process_worker_group.h): torchrun's worker processes, logs and error files.
#include "net/process_worker_group.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net {

namespace {

constexpr size_t kErrorMessageMax = 4096;

uint8_t parse_std_digit(const std::string& flag, const std::string& text, const std::string& digit) {
  if (digit.size() != 1 || digit[0] < '0' || digit[0] > '3') {
    throw errors::invalid_argument(flag + " " + quote(text) + ": expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or " +
                                   "<local rank>:<0-3>,... per local rank");
  }
  return static_cast<uint8_t>(digit[0] - '0');
}

void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw errors::invalid_argument("cannot make the log folder " + printable(path, kPathMax) + ": " + std::strerror(errno));
  }
}

// The bytes a log file holds now (0 when there is none). A worker's streams are appended to its
// files, and a restart for waiting nodes keeps the attempt's folder: its tee copies from here, so
// an earlier group's lines are not printed a second time.
std::streamoff file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::streamoff>(st.st_size) : 0;
}

}  // namespace

uint8_t StdStreams::of(uint32_t local_rank) const {
  if (!per_rank_given) return all;
  const auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? 0 : it->second;
}

StdStreams parse_std_streams(const std::string& flag, const std::string& text) {
  StdStreams streams;
  if (text.find(':') == std::string::npos) {
    streams.all = parse_std_digit(flag, text, text);
    return streams;
  }
  streams.per_rank_given = true;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t colon = item.find(':');
    const std::string rank = colon == std::string::npos ? "" : item.substr(0, colon);
    if (rank.empty() || rank.size() > 5 || rank.find_first_not_of("0123456789") != std::string::npos) {
      throw errors::invalid_argument(flag + " " + quote(text) + ": " + quote(item) + " is not <local rank>:<0-3>");
    }
    streams.per_rank[static_cast<uint32_t>(std::stoul(rank))] = parse_std_digit(flag, text, item.substr(colon + 1));
    begin = end + 1;
  }
  return streams;
}

std::string make_run_log_dir(const std::string& log_dir, const std::string& run_id) {
  DAGSIM_ASSERT(!log_dir.empty());
  // The id is one path component: a '/' would make the folder somewhere else (launch refuses
  // such an id first, naming the flag).
  if (run_id.empty() || run_id.find('/') != std::string::npos || run_id.find('\0') != std::string::npos) {
    throw errors::invalid_argument("the run id " + quote(run_id) + " cannot name a folder: it must be non-empty, without '/'");
  }
  make_dir(log_dir);
  std::string pattern = log_dir + "/" + run_id + "_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw errors::invalid_argument("cannot make a run folder in " + printable(log_dir, kPathMax) + ": " + std::strerror(errno));
  }
  return pattern;
}

// A teed stream: the file the worker writes, how far it has been copied, and the line not yet ended.
struct ProcessWorkerGroup::Tee {
  std::string path;
  std::string prefix;  // "[<role><local rank>]:"
  bool to_err = false;
  std::streamoff copied = 0;
  std::string partial = {};
};

ProcessWorkerGroup::ProcessWorkerGroup(runtime::Clock& clock, const ProcessWorkerConfig& config,
                                       const elastic::WorkerGroupSpec& spec)
    : clock_(clock), config_(config), spec_(spec) {
  DAGSIM_ASSERT(!config.run_log_dir.empty());
  attempt_dir_ = config.run_log_dir + "/attempt_" + std::to_string(spec.round.restart_count);
  make_dir(attempt_dir_);
  elastic::WorkerRound round = spec.round;
  round.attempt_dir = attempt_dir_;
  std::vector<WorkerProcessSpec> processes;
  for (const elastic::WorkerRanks& worker : spec.workers) {
    const std::string dir = attempt_dir_ + "/" + std::to_string(worker.local_rank);
    make_dir(dir);
    // A file left by an earlier start of this attempt (a restart for waiting nodes keeps the
    // count) must not be taken for this start's error.
    ::unlink((dir + "/error.json").c_str());
    environments_.push_back(elastic::worker_environment(config.agent_env, round, worker));
    WorkerProcessSpec process;
    process.argv = config.argv;
    process.env = elastic::environ_strings(environments_.back());
    // A teed stream goes to its file too, which the group copies from (torchrun's TailLog).
    const uint8_t to_files = config.redirects.of(worker.local_rank) | config.tee.of(worker.local_rank);
    if (to_files & StdStreams::kOut) process.stdout_path = dir + "/stdout.log";
    if (to_files & StdStreams::kErr) process.stderr_path = dir + "/stderr.log";
    const std::string prefix = "[" + spec.round.role + std::to_string(worker.local_rank) + "]:";
    if (config.tee.of(worker.local_rank) & StdStreams::kOut) tees_.push_back({process.stdout_path, prefix, false, file_size(process.stdout_path)});
    if (config.tee.of(worker.local_rank) & StdStreams::kErr) tees_.push_back({process.stderr_path, prefix, true, file_size(process.stderr_path)});
    processes.push_back(std::move(process));
  }
  processes_ = std::make_unique<WorkerProcesses>(processes);
}

ProcessWorkerGroup::~ProcessWorkerGroup() {
  if (processes_ && config_.orphans) config_.orphans->push_back(std::move(processes_));
}

void ProcessWorkerGroup::copy_tees() {
  for (Tee& tee : tees_) {
    std::ifstream in(tee.path, std::ios::binary);
    if (!in) continue;
    in.seekg(tee.copied);
    std::string chunk(64 * 1024, '\0');
    std::ostream& out = tee.to_err ? std::cerr : std::cout;
    for (;;) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const std::streamsize got = in.gcount();
      if (got <= 0) break;
      tee.copied += got;
      tee.partial.append(chunk.data(), static_cast<size_t>(got));
      size_t begin = 0;
      for (size_t nl; (nl = tee.partial.find('\n', begin)) != std::string::npos; begin = nl + 1) {
        out << tee.prefix << tee.partial.substr(begin, nl + 1 - begin);
      }
      tee.partial.erase(0, begin);
    }
    out.flush();
  }
}

elastic::WorkerGroupStatus ProcessWorkerGroup::poll() {
  DAGSIM_ASSERT(processes_ != nullptr);
  const WorkerGroupPoll p = processes_->poll();
  copy_tees();
  elastic::WorkerGroupStatus status;
  status.state = p.state;
  if (p.first_failure) {
    const auto error_file = [&](uint32_t local_rank) { return attempt_dir_ + "/" + std::to_string(local_rank) + "/error.json"; };
    const uint32_t rank = p.first_failure->local_rank;
    const WorkerErrorFile error = read_worker_error_file(error_file(rank));
    const std::string message = !error.message.empty() ? error.message : error.text;
    status.failure = elastic::worker_failure(spec_, rank, p.first_failure->describe(), printable(message, kErrorMessageMax));
    if (config_.failures) {
      std::vector<WorkerFailureRecord> records;
      const auto seen = std::chrono::system_clock::now();
      for (const WorkerExit& exit : p.exited) {
        if (!exit.failed()) continue;
        WorkerFailureRecord r;
        r.global_rank = spec_.workers.at(exit.local_rank).global_rank;
        r.local_rank = exit.local_rank;
        r.pid = exit.pid;
        r.exit_code = exit.exit_code;
        r.signal = exit.signal;
        r.error = exit.local_rank == rank ? error : read_worker_error_file(error_file(exit.local_rank));
        if (r.error.exists) r.error_file = error_file(exit.local_rank);
        r.seen = seen;
        records.push_back(std::move(r));
      }
      // In rank order, as torchrun's failures (a dict by local rank): its root cause among equal
      // timestamps is the lowest rank, not whichever worker was reaped first.
      std::stable_sort(records.begin(), records.end(),
                       [](const WorkerFailureRecord& a, const WorkerFailureRecord& b) { return a.global_rank < b.global_rank; });
      *config_.failures = std::move(records);
    }
  }
  return status;
}

void ProcessWorkerGroup::stop() {
  if (!processes_) return;
  processes_->stop(clock_, config_.grace);
  copy_tees();
  for (Tee& tee : tees_) {
    if (!tee.partial.empty()) (tee.to_err ? std::cerr : std::cout) << tee.prefix << tee.partial << "\n";
    tee.partial.clear();
  }
  processes_.reset();
}

elastic::WorkerGroupFactory process_worker_group(runtime::Clock& clock, const ProcessWorkerConfig& config) {
  return [&clock, &config](const elastic::WorkerGroupSpec& spec) -> std::unique_ptr<elastic::WorkerGroup> {
    return std::make_unique<ProcessWorkerGroup>(clock, config, spec);
  };
}

}  // namespace dagsim::net
