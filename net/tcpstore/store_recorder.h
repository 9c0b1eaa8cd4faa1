// StoreRecorder: `dagsim store --record FILE` (issue 24 item 6), one JSON line per thing a client
// did to the store, so that PyTorch's own elastic stack, which keeps its rendezvous state in the
// store, can be judged afterwards from the store's side alone (scenarios/workloads/rendezvous/
// store_records.h reads these lines).
//
// Lines (times are the store host's wall clock, integer nanoseconds since the Unix epoch, the clock
// PyTorch's agents write their heartbeats and deadlines with; values are hex, as they may be any
// bytes, or a summary, below):
//   {"op":"start","t":T,"pid":P}                                the store began serving
//   {"op":"connect","t":T,"conn":C,"peer":"IP:PORT","pid":P}    P: the client's process, or null
//   {"op":"close","t":T,"conn":C}
//   {"op":"set","t":T,"conn":C,"key":K,"value":HEX}
//   {"op":"compare_set","t":T,"conn":C,"key":K,"expected":HEX,"desired":HEX,"written":B,"value":HEX}
//   {"op":"get","t":T,"conn":C,"key":K,"value":HEX}             value null: absent (the connection closes)
//   {"op":"add","t":T,"conn":C,"key":K,"delta":N,"value":HEX}
//   {"op":"delete_key","t":T,"conn":C,"key":K,"deleted":B}
//   {"op":"check"|"wait"|"watch_key"|"get_num_keys","t":T,"conn":C,"keys":[K...]}
//   {"op":"fault","t":T,"conn":C,"fault":"delay"|"drop"|"reset","query":OP}
//                                                               the store's fault layer hit query
//                                                               OP (store_faults.h): no "key", so
//                                                               readers of keys skip it
//   {"op":"stop","t":T}                                         the store stopped (a clean end)
//   {"op":"cut","t":T,"max_bytes":N}                            the record reached its cap: the last line
// `written` says whether the compare_set changed the key; `value` is the key after the query, what
// the client was answered for get, compare_set and add. The store answers each query at once, in
// the order of these lines, so the order is the store's serialisation order. Each write's line
// (set, compare_set, add, delete_key) is flushed in the same step of the store's thread that
// applies and answers it, so a store killed later leaves every write in the record.
//
// Bounded (issue 49): a client's query of a few bytes can ask for a value of 256 MiB, so the
// record would grow by a million times what clients send (a GET of a large value, again and
// again). So:
//  - A value longer than RecorderLimits::value_bytes (1 KiB by default) is written as a summary,
//    {"bytes":LENGTH,"sha256":HEX} (a digest to tell values apart), instead of its hex. The values
//    `dagsim judge` decodes are kept whole: what a client writes to a rendezvous state key (a key
//    beginning with kRecordStatePrefix, with or without PyTorch's "/"): set's value,
//    compare_set's expected and desired, and its value when written, up to kRecordStateMax; what
//    the store answered (get, a compare_set that did not write, add) is summarised past the limit.
//    So a line is at most a few times the query a client sent, or a summary's length.
//  - A key longer than kRecordKeyMax, or not UTF-8 text (JSON's strings are), is a summary too:
//    no state key is either (a run id is at most 256 bytes of text).
//  - The file is at most RecorderLimits::max_bytes (1 GiB by default): the line that would pass
//    it is not written; a cut line ends the record there instead, with one log line saying so,
//    and nothing more is recorded (the store serves on). The cut and stop lines fit in room kept
//    for them.
//
// Who: a client is known by its connection, and, when it runs on the store's host, by its process
// id, found from the kernel's socket tables (/proc/net/tcp{,6} and /proc/PID/fd), so each write is
// tied to the agent that sent it (PyTorch's node descriptor holds that pid). Peers on other hosts
// get "pid": null.
//
// Errors: a file that cannot be opened, or limits too small to hold a start and a cut line, throw
// Error(invalid_argument) naming them; a write that fails later is kept as `error()` (the store
// serves on: losing the record must not fail the job), and `dagsim store` exits 2 naming the file.
//
// Threading: the store's thread (the server calls it from its fibers).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/store/key_value_table.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::tcpstore {

// The process on this host holding the TCP connection whose far end is `local` and near end
// `remote` (as the store sees it: the client's endpoint, then the store's), or nullopt. A client
// in another network namespace of this host (reached without NAT, as a job's agents are) is
// found too, through that namespace's tables.
std::optional<int64_t> local_peer_pid(const boost::asio::ip::tcp::endpoint& client,
                                      const boost::asio::ip::tcp::endpoint& server);

// Keys of rendezvous states (core/rendezvous/rendezvous_backend.h's state_key).
inline constexpr std::string_view kRecordStatePrefix = "torch.rendezvous.";
// The largest state value written whole: a PyTorch state of 10,000 nodes is about 2 MB.
inline constexpr size_t kRecordStateMax = size_t{16} << 20;
inline constexpr size_t kRecordKeyMax = 4096;
// The smallest cap: room for the start line and the cut line.
inline constexpr uint64_t kRecordMinBytes = 4096;
// The longest line the recorder writes: a compare_set's three values whole, in hex, and its key
// (each character escaped at most six times over).
inline constexpr size_t kRecordMaxLineBytes = 3 * 2 * kRecordStateMax + 6 * kRecordKeyMax + 1024;

struct RecorderLimits {
  uint64_t max_bytes = uint64_t{1} << 30;  // the file's cap (--record-max-bytes)
  size_t value_bytes = 1024;              // values past this are summarised (--record-value-bytes;
                                          // at most kRecordStateMax)
};

// The form the record gives a value: its hex when at most `whole_max` bytes, else a summary.
nlohmann::json recorded_value(std::span<const uint8_t> value, size_t whole_max);
// The form the record gives a key: the text, or a summary when long or not UTF-8.
nlohmann::json recorded_key(const std::string& key);

class StoreRecorder {
 public:
  // `log` gets the line that says the record reached its cap.
  explicit StoreRecorder(const std::string& path, RecorderLimits limits = {},
                         std::function<void(const std::string&)> log = {});
  ~StoreRecorder();
  StoreRecorder(const StoreRecorder&) = delete;
  StoreRecorder& operator=(const StoreRecorder&) = delete;

  void connected(uint64_t conn, const std::string& peer, std::optional<int64_t> pid);
  void closed(uint64_t conn);

  // Around one query: begin() before the server applies it (it may move the query's values),
  // end() after, with the table as the query left it.
  struct Pending {
    uint64_t conn = 0;
    int64_t t = 0;
    Query query;
    std::optional<Bytes> before;
  };
  Pending begin(uint64_t conn, const Query& q, const store::KeyValueTable& table) const;
  void end(const Pending& p, const store::KeyValueTable& table);
  // The fault layer (store_faults.h) hit a query of `conn`: delay, drop or reset.
  void fault(uint64_t conn, std::string_view kind, QueryType type);

  void stop();  // writes the stop line (unless the record was cut) and flushes
  const std::string& path() const { return path_; }
  // The first write that failed, or empty.
  const std::string& error() const { return error_; }
  // Whether the record reached its cap; the bytes written.
  bool cut() const { return cut_; }
  uint64_t bytes() const { return written_; }

 private:
  // `closing`: the cut or stop line, written into the room kept for it.
  void write(const nlohmann::json& line, bool closing = false);
  // What `key` holds now, as the record gives it (null when absent). A client that reads a large
  // value again and again costs one SHA-256 of it, not one per read.
  nlohmann::json value_now(const std::string& key, const store::KeyValueTable& table, size_t whole_max);
  static constexpr size_t kDigestsKept = 1024;

  std::string path_;
  RecorderLimits limits_;
  std::function<void(const std::string&)> log_;
  std::ofstream out_;
  std::string error_;
  uint64_t written_ = 0;
  bool cut_ = false;
  std::unordered_map<std::string, std::pair<uint64_t, std::string>> digests_;  // key: its version's digest
};

}  // namespace dagsim::net::tcpstore
