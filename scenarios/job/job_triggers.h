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

// Reads a growing file's whole lines as they come (a line not yet ended waits for its end).
class LineTail {
 public:
  explicit LineTail(std::string path) : path_(std::move(path)) {}
  // Calls `line` for each whole line added since the last call.
  void poll(const std::function<void(const std::string& line)>& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

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
