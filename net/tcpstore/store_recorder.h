// StoreRecorder: `dagsim store --record FILE` (issue 24 item 6), one JSON line per thing a client
// did to the store, so that PyTorch's own elastic stack, which keeps its rendezvous state in the
// store, can be judged afterwards from the store's side alone (scenarios/workloads/rendezvous/
// store_records.h reads these lines).
//
// Lines (times are the store host's wall clock, integer nanoseconds since the Unix epoch, the clock
// PyTorch's agents write their heartbeats and deadlines with; values are hex, as they may be any
// bytes):
//   {"op":"start","t":T,"pid":P}                                the store began serving
//   {"op":"connect","t":T,"conn":C,"peer":"IP:PORT","pid":P}    P: the client's process, or null
//   {"op":"close","t":T,"conn":C}
//   {"op":"set","t":T,"conn":C,"key":K,"value":HEX}
//   {"op":"compare_set","t":T,"conn":C,"key":K,"expected":HEX,"desired":HEX,"written":B,"value":HEX}
//   {"op":"get","t":T,"conn":C,"key":K,"value":HEX}             value null: absent (the connection closes)
//   {"op":"add","t":T,"conn":C,"key":K,"delta":N,"value":HEX}
//   {"op":"delete_key","t":T,"conn":C,"key":K,"deleted":B}
//   {"op":"check"|"wait"|"watch_key"|"get_num_keys","t":T,"conn":C,"keys":[K...]}
//   {"op":"stop","t":T}                                         the store stopped (a clean end)
// `written` says whether the compare_set changed the key; `value` is the key after the query, what
// the client was answered for get, compare_set and add. The store answers each query at once, in
// the order of these lines, so the order is the store's serialisation order.
//
// Who: a client is known by its connection, and, when it runs on the store's host, by its process
// id, found from the kernel's socket tables (/proc/net/tcp{,6} and /proc/PID/fd), so each write is
// tied to the agent that sent it (PyTorch's node descriptor holds that pid). Peers on other hosts
// get "pid": null.
//
// Errors: a file that cannot be opened throws Error(invalid_argument) naming it; a write that fails
// later is kept as `error()` (the store serves on: losing the record must not fail the job), and
// `dagsim store` exits 2 naming the file.
//
// Threading: the store's thread (the server calls it from its fibers).
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "core/store/key_value_table.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::tcpstore {

// The process on this host holding the TCP connection whose far end is `local` and near end
// `remote` (as the store sees it: the client's endpoint, then the store's), or nullopt.
std::optional<int64_t> local_peer_pid(const boost::asio::ip::tcp::endpoint& client,
                                      const boost::asio::ip::tcp::endpoint& server);

class StoreRecorder {
 public:
  explicit StoreRecorder(const std::string& path);
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

  void stop();  // writes the stop line and flushes
  const std::string& path() const { return path_; }
  // The first write that failed, or empty.
  const std::string& error() const { return error_; }

 private:
  void write(const std::string& line);

  std::string path_;
  std::ofstream out_;
  std::string error_;
};

}  // namespace dagsim::net::tcpstore
