// WatchChannel: a TCPStore client's second connection, the one PyTorch 1.13 calls its callback
// socket: WATCH_KEY queries go out on it, and the server pushes an event on it for every change
// of every key registered there (tcp_store_protocol.h). TcpStoreClient's watch waits on it
// instead of polling.
//
// What it promises: register() returns once the server has acknowledged the key (so no change
// after that is missed); events(key) counts the events seen for the key, and wait_for_event()
// blocks the calling fiber until that count moves, the deadline passes, or the channel fails. A
// key is registered once per channel (1.13's server never forgets a registration and repeats
// events for repeated ones). A failed channel stays failed and every waiter throws
// connection_failed naming the server; the client opens a new one.
//
// Threading: the node's thread. A reader fiber (spawned from the fiber that opens the channel, in
// its node's lifetime) decodes what arrives; close() ends it.
#pragma once

#include <boost/asio/io_context.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/runtime/wait.h"
#include "net/tcpstore/fiber_stream.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::tcpstore {

class WatchChannel {
 public:
  // Serves watches on `stream` (connected to the server, unused) and starts its reader.
  // REQUIRES: a fiber started by a Spawner.
  static std::shared_ptr<WatchChannel> open(std::shared_ptr<FiberStream> stream, WireLimits limits);
  ~WatchChannel();

  // Registers `key` (once) and waits for the server's acknowledgement. False at the deadline (the
  // channel is closed then); throws connection_failed when the channel failed.
  bool register_key(const std::string& key, runtime::TimePoint deadline);
  uint64_t events(const std::string& key) const;
  // Blocks until events(key) differs from `seen` (true) or `deadline` passes (false); throws
  // connection_failed naming the server when the channel fails first.
  bool wait_for_event(const std::string& key, uint64_t seen, runtime::TimePoint deadline);

  bool failed() const { return failed_; }
  void close();

  struct Reader;  // the reader fiber's body (in the .cc)

 private:
  WatchChannel(std::shared_ptr<FiberStream> stream, WireLimits limits);
  void fail(const std::string& why);
  [[noreturn]] void throw_failed() const;

  std::shared_ptr<FiberStream> stream_;
  WireLimits limits_;
  runtime::FiberMutex mutex_;
  runtime::FiberCondition cv_;
  std::map<std::string, uint64_t> events_;
  std::set<std::string> registered_;
  uint64_t registrations_sent_ = 0;
  uint64_t registrations_acked_ = 0;
  bool failed_ = false;
  std::string reason_;
};

}  // namespace dagsim::net::tcpstore
