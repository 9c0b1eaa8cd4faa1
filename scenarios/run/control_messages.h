// The control protocol between the TCP launcher and its node processes (control_link.h carries
// it), defined once: every message is one of the structs below, written by encode() and read by
// decode_command() / decode_event(), the only code that touches the JSON. A message travels as one
// JSON object, {"op": ...} from the launcher and {"event": ...} from a node, with the fields named
// here; nothing on it is ever executed.
//
//   launcher -> node (Command)
//     setup    the run: the scenario's bytes, their sha256, the seed, the file's name, the run id
//     start    run the node's main; scenario time 0 is start_wall_ns on the wall clock
//     kill     die now (SIGKILL of itself: a node on another host)
//     crash    go silent and end the incarnation
//     block    hold (or release) traffic to worker `peer`
//     struck   the answer to workload event `id`: its faults have struck; `more` whether a fault
//              still waits for that kind of event
//     finish   settle (at most drain_ms), take the final snapshot, send the record
//     exit     close and exit 0
//   node -> launcher (Event)
//     hello             node index, incarnation and pid of a running incarnation
//     refused           the node will not run this scenario or seed (`why`)
//     busy / idle       foreground work began / all of it ended
//     workload          a workload event a fault may wait for (`what`, `value`; `id` when the node
//                       waits for the answer)
//     stats             the transport's figures so far
//     record            what the incarnation observed so far (the workload's record, an object)
//     failure           an exception ended a fiber: when (ns of scenario time), which, what
//     connection_failed a link to `peer` failed at `time_ns` of wall time
//     finished          the final figures, after the final snapshot
//
// Decoding trusts nothing: a message that is not an object, names no known op or event, lacks a
// field, has one of the wrong type or out of range, is nested deeper than kMaxControlDepth or
// carries a string over kMaxControlString throws Error(protocol_error) naming the message and the
// field. Unknown extra fields are ignored (a later launcher may add some). encode(decode(m)) of a
// valid message holds the same fields.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace dagsim::scenarios::control {

// std::visit over a message with one lambda per kind.
template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

inline constexpr int kMaxControlDepth = 64;                 // a record's nesting (tensors are 2-3 deep)
inline constexpr size_t kMaxControlString = 16u << 20;      // a scenario's text, a failure's message

// launcher -> node
struct Setup {
  std::string scenario;  // the file's bytes
  std::string digest;    // their sha256, hex
  uint64_t seed = 1;
  std::string file;      // the file's name, for messages
  std::string run;       // the run's id (incarnations are numbered within it)
  friend bool operator==(const Setup&, const Setup&) = default;
};
struct Start {
  int64_t start_wall_ns = 0;
  friend bool operator==(const Start&, const Start&) = default;
};
struct Kill {
  friend bool operator==(const Kill&, const Kill&) = default;
};
struct Crash {
  friend bool operator==(const Crash&, const Crash&) = default;
};
struct Block {
  uint32_t peer = 0;
  bool blocked = false;
  friend bool operator==(const Block&, const Block&) = default;
};
struct Struck {
  uint64_t id = 0;
  bool more = true;
  friend bool operator==(const Struck&, const Struck&) = default;
};
struct Finish {
  int64_t drain_ms = 0;  // >= 0
  friend bool operator==(const Finish&, const Finish&) = default;
};
struct Exit {
  friend bool operator==(const Exit&, const Exit&) = default;
};
using Command = std::variant<Setup, Start, Kill, Crash, Block, Struck, Finish, Exit>;

// node -> launcher
struct Hello {
  uint32_t node = 0;
  uint32_t incarnation = 0;
  int64_t pid = 0;
  friend bool operator==(const Hello&, const Hello&) = default;
};
struct Refused {
  std::string why;
  friend bool operator==(const Refused&, const Refused&) = default;
};
struct Busy {
  friend bool operator==(const Busy&, const Busy&) = default;
};
struct Idle {
  friend bool operator==(const Idle&, const Idle&) = default;
};
struct WorkloadReport {
  std::string what;  // a WorkloadEvent's name (workloads/workload.h); the launcher checks it
  uint64_t value = 0;
  std::optional<uint64_t> id;  // set: the node waits for a Struck with this id
  friend bool operator==(const WorkloadReport&, const WorkloadReport&) = default;
};
// The transport's figures (net::TcpTransportStats), summed over a run's incarnations.
struct NodeStats {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t dropped = 0;
  uint64_t connection_failures = 0;
  uint64_t refused = 0;
  uint64_t bytes_sent = 0;
  uint64_t writes = 0;
  friend bool operator==(const NodeStats&, const NodeStats&) = default;
};
struct Stats {
  NodeStats stats;
  friend bool operator==(const Stats&, const Stats&) = default;
};
struct Record {
  nlohmann::json data;  // an object
  friend bool operator==(const Record&, const Record&) = default;
};
struct Failure {
  int64_t time_ns = 0;
  std::string fiber;
  std::string what;
  friend bool operator==(const Failure&, const Failure&) = default;
};
struct ConnectionFailed {
  uint32_t peer = 0;
  int64_t time_ns = 0;
  friend bool operator==(const ConnectionFailed&, const ConnectionFailed&) = default;
};
struct Finished {
  NodeStats stats;
  friend bool operator==(const Finished&, const Finished&) = default;
};
using Event = std::variant<Hello, Refused, Busy, Idle, WorkloadReport, Stats, Record, Failure, ConnectionFailed, Finished>;

nlohmann::json encode(const Command& command);
nlohmann::json encode(const Event& event);
Command decode_command(const nlohmann::json& message);
Event decode_event(const nlohmann::json& message);

// A message's text as it arrives, parsed with the depth bound, then decoded.
nlohmann::json parse_message(std::string_view text);

// "setup", "hello", ...: the name a message travels under.
std::string_view name_of(const Command& command);
std::string_view name_of(const Event& event);

}  // namespace dagsim::scenarios::control
