// TcpStoreClient: a store.h Store whose keys live in a PyTorch 1.13 TCPStore server (PyTorch's own,
// torch.distributed.TCPStore(is_master=True), or dagsim's TcpStoreServer), spoken to over its
// protocol (tcp_store_protocol.h) and nothing else, so it works against an unmodified PyTorch.
//
// Calls block the calling fiber only: Asio operations on the thread's io_context, awaited through
// the runtime's primitives, with the store's timeout() as each call's deadline on the fiber's
// Clock. One query at a time on the main connection (replies carry no tag); watch() waits on a
// second connection (WatchChannel), as PyTorch's callback socket. A connection is made on first
// use and again after any failure; a refused connect is retried until the deadline while this
// client has never been served (the server may not listen yet). Once it has been, a refusal fails
// the call at once and the client is gone() (Note [a store that served and now refuses]). Errors name
// the server as host:port: connection_failed (unreachable, closed mid-call; PyTorch's server
// closes a connection on a query it cannot answer, such as add on a key that holds no integer),
// timed_out (a waiting call, or a reply that did not come). After a failure or timeout the
// connection is dropped: a late reply (WAIT's) must never answer the next query.
//
// Keys carry PyTorch's "/" prefix on the wire (options.key_prefix), so a dagsim client and a
// PyTorch client of one server see the same keys; num_keys() counts every key of the server.
//
// Gaps, because 1.13's protocol has no versions, no MULTI_GET/MULTI_SET and no error replies:
//  - Versions are this client's own: it numbers the values it sees of each key, in the order it
//    sees them, with one counter (0: absent), and remembers the last few values per key. A version
//    so names one value exactly and rises with every change this client sees, but versions are
//    not comparable between clients, and a change and its undoing between two reads (A, B, A) is
//    invisible: the key reads as unchanged. compare_set_version is PyTorch's compare_set on the
//    whole value the token names (as PyTorch's own rendezvous backend compares its state), so a
//    stale token never writes; a token this client no longer remembers is treated as stale.
//    Writes of an empty value are indistinguishable from absence to compare_set (PyTorch's rule),
//    so compare-and-set from "absent" may overwrite a key that appeared empty in the meantime.
//  - get_versioned reads without waiting through compare_set(key, probe, probe) with a random
//    probe no one writes: 1.13 answers an absent key's compare_set with `expected`, never writes
//    it, and its GET of an absent key would close the connection.
//  - multi_get is WAIT on every key, then one GET per key (pipelined); multi_set is one SET per key.
//    Neither is atomic across keys.
//  - watch() re-reads the key after each event of its WATCH_KEY registration: correct, not fast.
//  - set and multi_set are followed by a GETNUMKEYS on the same connection, whose answer says the
//    server applied them (SET has no reply): a set that returned is visible to every client.
//
// Threading: the node's thread; any of its fibers may call (calls on the main connection queue).
#pragma once

#include <boost/asio/io_context.hpp>

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "core/runtime/mutex.h"
#include "core/store/store.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::tcpstore {

class FiberStream;
class WatchChannel;

struct TcpStoreClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string key_prefix = "/";  // PyTorch's clients' prefix
  WireLimits limits;             // what replies may hold
};

class TcpStoreClient final : public store::Store {
 public:
  TcpStoreClient(boost::asio::io_context& io, TcpStoreClientOptions options);
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, Bytes value) override;
  Bytes get(const std::string& key) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, Bytes desired) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) override;
  store::Versioned get_versioned(const std::string& key) override;
  store::CasOutcome compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) override;
  store::Versioned watch(const std::string& key, uint64_t known_version) override;
  store::Versioned watch_at_most(const std::string& key, uint64_t known_version, runtime::Duration timeout) override;

  // "host:port", as errors name the server.
  const std::string& address() const { return address_; }
  // Drops the connections (the next call connects again).
  void disconnect();
  // True when the server that served this client refused its last connection: its process ended,
  // and a TCPStore's keys end with it. A later call that connects again clears it.
  bool gone() const { return gone_; }

 private:
  class Call;

  // Runs `body(Call&)` holding the main connection; see the .cc.
  template <typename F>
  auto exchange(const std::string& what, runtime::TimePoint deadline, runtime::Duration budget, F&& body);
  Bytes compare_set_at(const std::string& wire_key, const Bytes& expected, Bytes desired, runtime::TimePoint deadline);
  // The key as it is now (version per this client's numbering), read without waiting.
  store::Versioned read_versioned(const std::string& key, runtime::TimePoint deadline);
  store::Versioned watch_until(const std::string& key, uint64_t known_version, runtime::TimePoint deadline, bool quiet);
  // The version this client gives `value` of `key`: the newest one it remembers if the value is
  // the same, else a new one.
  uint64_t version_of(const std::string& key, const Bytes& value);
  uint64_t new_version(const std::string& key, const Bytes& value);
  const Bytes* remembered(const std::string& key, uint64_t version) const;
  std::string wire_key(const std::string& key) const { return options_.key_prefix + key; }
  // A new connection to the server by `deadline`, retrying refusals only until it first answered.
  std::shared_ptr<FiberStream> connect(runtime::TimePoint deadline);

  boost::asio::io_context& io_;
  TcpStoreClientOptions options_;
  std::string address_;
  Bytes probe_;  // see get_versioned in the header comment
  runtime::Mutex mutex_;  // one query at a time on stream_
  std::shared_ptr<FiberStream> stream_;
  std::shared_ptr<WatchChannel> watch_;
  struct Seen {
    uint64_t version = 0;
    Bytes value;
  };
  std::map<std::string, std::deque<Seen>> seen_;  // newest last, at most kRemembered per key
  uint64_t last_version_ = 0;
  bool served_ = false;  // a connection to the server was ever made
  bool gone_ = false;    // see gone()
};

}  // namespace dagsim::net::tcpstore
