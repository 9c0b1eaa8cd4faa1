// TcpStoreServer: the built-in store served over PyTorch 1.13's TCPStore protocol
// (tcp_store_protocol.h), so an unmodified torch.distributed.TCPStore(is_master=False) client can
// use a dagsim process as its store. The keys are a KeyValueTable (core/store/key_value_table.h):
// the same rules as StoreService, which serves them over dagsim's RPC.
//
// What it promises:
//  - Every query of 1.13 answered as 1.13's server answers it, including WAIT's late reply (the
//    connection goes on serving queries while its WAIT is pending) and WATCH_KEY's events.
//  - A waiting query blocks no other connection: each connection is a fiber, each pending WAIT
//    another, and a WAIT's fiber ends when its connection closes.
//  - Bad input closes only that connection, with one log line naming the peer and why: a frame
//    whose length is over the limits (checked before anything is allocated), an unknown query
//    type, GET of an absent key or ADD on a key that holds no integer (1.13's server closes the
//    connection on those too: its protocol has no error reply).
//  - Bounded memory for what waits to be sent: every byte queued to a connection counts against
//    it, whoever queued it (its own reply, a late WAIT reply, another client's SET raising a watch
//    event). A connection past max_queued_bytes is closed, its watches and waits cancelled, with a
//    log line naming it; while all connections together pass max_total_queued_bytes, the one with
//    the most bytes unread (the slowest reader) is closed the same way. So a client that watches
//    and never reads costs at most max_total_queued_bytes, however many such clients there are.
//  - Room for honest clients: at max_connections, a new connection is always let in, and the
//    server closes one to make room, with a log line: the peer address holding the most
//    connections gives one up, its connection idle longest (by its last query) that waits on
//    nothing, else its waiter (a WAIT or a watch, cancelled) idle longest. Neither idle nor
//    waiting connections held open can lock others out: a client is served as soon as it
//    connects; a flood from one address displaces its own connections before any other
//    address's (until it holds no more than they do); and within an address, a connection is
//    closed only after every one of that address that went longer without a query.
//  - With options.faults, the store's fault layer (store_faults.h) may delay a query, drop it (read,
//    never applied nor answered) or reset its connection, each with one log line (and a fault line
//    in the record).
//  - There are no server-side timeouts, as in PyTorch: a client times out on its own. (PyTorch's
//    1.13 server has no bounds either: it queues without limit and refuses nothing past its
//    file-descriptor limit. We differ where that lets one client exhaust or lock out the others.)
//
// Threading: the thread of `io` and of the node that `spawner` belongs to (the same thread, the
// process's IoScheduler). The server's fibers live in its own CancelScope; destroying it (or
// close()) cancels them, and they hold what they touch, so the server may go before them.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <memory>
#include <string>

#include "core/runtime/spawner.h"
#include "core/store/key_value_table.h"
#include "net/tcpstore/store_faults.h"
#include "net/tcpstore/store_recorder.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::tcpstore {

struct TcpStoreServerOptions {
  WireLimits limits;
  size_t max_connections = 4096;
  // Per connection, replies and watch events not yet sent: room for the largest watch event (a key
  // and two values of WireLimits::max_value_bytes), and a little more.
  size_t max_queued_bytes = size_t{640} << 20;
  // All connections together; past it the slowest reader is closed. With the table itself, this is
  // what bounds the store's memory (docs/cli.md, dagsim store).
  size_t max_total_queued_bytes = size_t{1} << 30;
  // One line per connection closed for bad input, and other things an operator should see.
  std::function<void(const std::string&)> log;
  // When set, every connection and query is recorded (store_recorder.h; `dagsim store --record`).
  std::shared_ptr<StoreRecorder> recorder;
  // When set, asked for every query before it is applied: delay, drop or reset it (store_faults.h).
  std::shared_ptr<StoreFaults> faults;
};

struct TcpStoreServerStats {
  uint64_t accepted = 0;
  uint64_t queries = 0;
  uint64_t refused = 0;  // connections closed for bad input or over a limit
};

class TcpStoreServer {
 public:
  // Serves `table` on `acceptor` (open and listening) with fibers of `spawner`'s node.
  TcpStoreServer(boost::asio::io_context& io, runtime::Spawner& spawner, boost::asio::ip::tcp::acceptor acceptor,
                 std::shared_ptr<store::KeyValueTable> table, TcpStoreServerOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const;
  // Stops accepting and closes every connection. Idempotent.
  void close();
  TcpStoreServerStats stats() const;
  size_t connections() const;
  // Bytes queued to all connections and not yet written (bounded by max_total_queued_bytes).
  size_t queued_bytes() const;
  store::KeyValueTable& table();

  struct State;  // public only so that the .cc's helpers can name it

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dagsim::net::tcpstore
