// What a job run watches for its triggers (job_spec.h's JobTrigger): the store's record as it is
// written (keys written, rounds formed), and each agent's output, line by line.
//
// StoreTail reads only the lines added since its last call, parsing each as the judge does
// (store_record_reader.h's read_value/read_key, pytorch_state.h's decode_stored_state), so a
// trigger costs a line's parse once, never a re-judging of the whole record.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace dagsim::scenarios::job {

// What a run reads of a file inside its folder: the job itself may write there (DAGSIM_JOB_DIR), so
// such a file is opened O_NONBLOCK|O_NOFOLLOW (a FIFO never blocks the open, a link is refused) and
// must be a regular file, and no line is held past a bound.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;    // a line read from a run's file
inline constexpr size_t kMaxTriggerLineBytes = size_t{4} << 10;  // what an output trigger's regex sees

// An fd of `path` opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC, or -1 when it cannot be opened
// or is not a regular file (a FIFO, a socket, a device, a directory, a symbolic link).
int open_regular(const std::string& path);

// The first `max` bytes of a regular file (nullopt: not one, or cannot be read).
std::optional<std::string> read_head(const std::string& path, size_t max);
// Reads at most `max` bytes of `fd` and closes it; the buffer starts at `initial` bytes and grows
// only as the file does (a /proc file says size 0 and may be long).
std::string read_fd(int fd, size_t max, size_t initial);

// Reads a growing file's lines as they come. A line ends at '\n', '\r' or "\r\n" (a progress
// bar's '\r' ends its line); a line not yet ended waits for its end. A line longer than max_line
// is handed on as its first max_line bytes as soon as they are there, and the rest of it, up to
// its end, is skipped (never taken as a line of its own).
class LineTail {
 public:
  explicit LineTail(std::string path, size_t max_line = kMaxLineBytes) : path_(std::move(path)), max_line_(max_line) {}
  // Calls `line` for each whole line added since the last call (at most 8 MiB read per call);
  // returns the bytes read. A path that is not a regular file is not read (0).
  uint64_t poll(const std::function<void(const std::string& line)>& line);
  // Hands on the last line if it has no end yet (a file read whole).
  void finish(const std::function<void(const std::string& line)>& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  size_t max_line_;
  uint64_t offset_ = 0;
  std::string partial_;
  bool skipping_ = false;  // in the rest of an over-long line
  bool after_cr_ = false;  // the last byte was '\r' (a '\n' right after it ends nothing)
};

// Every line of a regular file, read in bounded pieces (lines as LineTail's); false when `path`
// is not a regular file or cannot be opened.
bool for_each_line(const std::string& path, const std::function<void(const std::string& line)>& line,
                   size_t max_line = kMaxLineBytes);

// The store's record: keys written and rounds formed, as the store wrote them.
class StoreTail {
 public:
  StoreTail(std::string path, std::string run_id);
  // Reads new lines; `key_written` for each key a client set, compare_set (written) or add.
  void poll(const std::function<void(const std::string& key)>& key_written);
  // The highest round seen complete in the state key (nullopt: none yet).
  std::optional<uint64_t> highest_complete_round() const { return highest_round_; }
  // Each round first seen complete, with when the record wrote it (ms since the Unix epoch).
  struct Formed {
    uint64_t round = 0;
    int64_t t_ns = 0;
    std::vector<std::string> participants;
  };
  const std::vector<Formed>& formed() const { return formed_; }
  // Follows a new record (the store started again): reads it from its beginning.
  void follow(std::string path);

 private:
  void line(const std::string& text, const std::function<void(const std::string& key)>& key_written);

  LineTail tail_;
  std::string state_key_;
  std::optional<int64_t> origin_;
  std::optional<uint64_t> highest_round_;
  std::set<uint64_t> seen_rounds_;
  std::vector<Formed> formed_;
};

// A store key's glob (* and ?, nothing else special); PyTorch's leading "/" is ignored on both.
bool glob_matches(const std::string& pattern, const std::string& key);

// An agent's line split as torchrun's tee prefixes it: "[default1]:text" is worker 1's "text".
struct AgentLine {
  std::optional<uint32_t> local_rank;  // nullopt: the agent's own line
  std::string text;
};
AgentLine split_agent_line(const std::string& line);

}  // namespace dagsim::scenarios::job
