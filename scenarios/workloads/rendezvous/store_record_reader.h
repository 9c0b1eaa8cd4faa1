// Reading a store's record (`dagsim store --record`, net/tcpstore/store_recorder.h writes it) line
// by line, for `dagsim judge` (store_records.h), trusting nothing in it: any client of the store
// chose most of what it holds, and the file itself may be anything.
//
// Promises:
//  - Bounded: a line is at most kMaxStoreRecordLineBytes (the longest the recorder writes), read
//    without ever holding more of it; its JSON nests at most kMaxStoreRecordDepth deep (the
//    recorder's nest 3: the line, its list of keys, a summary), through parse_bounded_json
//    (scenarios/format/bounded_json.h). job.json is read by read_bounded_file (at most
//    kMaxStoreJobBytes, a regular file only: a FIFO would block the judge) and nests at most
//    kMaxStoreJobDepth deep. Past any bound: Error(invalid_records) naming it.
//  - Values: a value is its hex, or the recorder's summary of a long one ({"bytes", "sha256"});
//    read_value gives either, and refuses anything else naming `what`. A key is its text, or a
//    summary of a long or non-UTF-8 one (never a rendezvous state's key).
//  - Messages name the file and line as "PATH:LINE: ...", the path escaped (printable()).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>

#include "core/runtime/transport.h"

namespace dagsim::scenarios {

inline constexpr size_t kMaxStoreRecordLineBytes = (size_t{96} << 20) + (size_t{1} << 20);
inline constexpr size_t kMaxStoreRecordDepth = 4;
inline constexpr size_t kMaxStoreJobBytes = size_t{16} << 20;
inline constexpr size_t kMaxStoreJobDepth = 8;

// A value as the record holds it.
struct RecordedValue {
  std::optional<runtime::Bytes> bytes;  // nullopt: summarised
  uint64_t size = 0;
  std::string sha256;  // a summary's digest (hex); empty for a whole value
};

class StoreRecordReader {
 public:
  // `path` names the input in messages.
  StoreRecordReader(std::istream& in, std::string path) : in_(in), path_(std::move(path)) {}

  // The next line that is not empty, parsed; nullopt at the end of the input.
  std::optional<nlohmann::json> next();
  // "PATH:LINE: what", for the line last read.
  std::string at(const std::string& what) const;
  size_t line() const { return line_; }

 private:
  bool read_line(std::string& line);

  std::istream& in_;
  std::string path_;
  size_t line_ = 0;
};

// The value in `v` (hex or a summary); throws Error(invalid_records) naming `what`.
RecordedValue read_value(const nlohmann::json& v, const std::string& what);
// The key in `v`: its text, or nullopt when it was summarised. Throws for anything else.
std::optional<std::string> read_key(const nlohmann::json& v, const std::string& what);

}  // namespace dagsim::scenarios
