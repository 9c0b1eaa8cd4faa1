#include "net/tcpstore/tcp_store_server.h"

#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <map>
#include <utility>
#include <vector>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/base/probe.h"
#include "core/runtime/cancel_scope.h"
#include "core/store/store_wait.h"
#include "net/tcpstore/fiber_stream.h"

namespace dagsim::net::tcpstore {

namespace asio = boost::asio;
using asio::ip::tcp;
using store::KeyChange;

namespace {

Bytes one_byte(uint8_t b) { return Bytes{b}; }

}  // namespace

// Everything the server's fibers and handlers touch: they hold it, so it outlives the server
// object until the last of them has unwound.
struct TcpStoreServer::State : std::enable_shared_from_this<TcpStoreServer::State> {
  State(asio::io_context& io_, runtime::Spawner& spawner_, tcp::acceptor acceptor_,
        std::shared_ptr<store::KeyValueTable> table_, TcpStoreServerOptions options_)
      : io(io_), spawner(spawner_), scope("tcpstore server", spawner_), acceptor(std::move(acceptor_)),
        table(std::move(table_)), options(std::move(options_)), port(acceptor.local_endpoint().port()) {}

  // A WAIT not yet answered: its connection and keys. It ends satisfied (on_change answers it) or
  // cancelled (its connection closed, forget()); PyTorch's client times out on its own side.
  struct PendingWait {
    uint64_t connection = 0;
    std::vector<std::string> keys;
    store::WaitState state = store::WaitState::pending;
  };

  asio::io_context& io;
  runtime::Spawner& spawner;
  runtime::CancelScope scope;
  tcp::acceptor acceptor;
  std::shared_ptr<store::KeyValueTable> table;
  TcpStoreServerOptions options;
  uint16_t port;
  TcpStoreServerStats stats;
  bool closed = false;
  bool out_of_descriptors = false;  // the last accept failed for want of one (logged once a spell)
  uint64_t observer = 0;
  uint64_t next_id = 1;
  // A connection and what decides whether it is evicted to make room (evict_one): its peer's
  // address, whether it waits on something (watches and pending waits), and how recently it sent a
  // query (a tick of the server's own count, no clock needed).
  struct Connection {
    std::shared_ptr<FiberStream> stream;
    uint64_t active = 0;
    std::string address;  // the peer's IP address, without its port
    size_t watches = 0;
    size_t waits = 0;
  };
  std::map<uint64_t, Connection> connections;
  std::map<std::string, size_t> per_address;  // open connections by peer address
  uint64_t tick = 0;
  // Bytes queued to every connection together (each FiberStream counts its own into it).
  std::shared_ptr<size_t> queued_total = std::make_shared<size_t>(0);
  // Key -> connections that asked to watch it, once per WATCH_KEY (1.13 keeps repeats, and so
  // sends an event once per registration).
  std::map<std::string, std::vector<uint64_t>> watchers;
  std::map<uint64_t, PendingWait> waits;
  std::map<std::string, std::vector<uint64_t>> waits_by_key;  // absent keys -> pending waits
  uint64_t next_wait = 1;

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  void accept_loop();
  void serve(uint64_t id, const std::shared_ptr<FiberStream>& stream);
  // Answers one query; false when the connection must close (it was refused).
  bool handle(uint64_t id, FiberStream& stream, Query& q);
  void refuse(FiberStream& stream, const std::string& why) {
    ++stats.refused;
    log("tcpstore: closing the connection from " + stream.peer() + ": " + why);
    stream.close(why);
  }
  // Queues `bytes` to connection `id` (if still open) and sheds what is over the bounds: this
  // connection past max_queued_bytes, then the slowest readers while all together pass
  // max_total_queued_bytes. Every byte the server sends goes through here, whoever queues it.
  void deliver(uint64_t id, Bytes bytes);
  // When full: closes one connection to make room for a new one (the rule: the header, "Room for
  // honest clients"); false only when there is none to close.
  bool evict_one();
  void on_change(const KeyChange& c);
  // Blocks the calling fiber for `d` of real time.
  void pause(std::chrono::milliseconds d) {
    asio::steady_timer timer(io, d);
    (void)await_io([&](auto handler) { timer.async_wait([handler](auto e) { handler(e); }); }, std::nullopt);
  }
  void forget(uint64_t id);
  void close_all();
};

void TcpStoreServer::State::accept_loop() {
  for (;;) {
    auto socket = std::make_shared<tcp::socket>(io);
    const std::optional<boost::system::error_code> ec = await_io(
        [&](auto handler) { acceptor.async_accept(*socket, [socket, handler](auto e) { handler(e); }); }, std::nullopt);
    if (closed) return;
    if (*ec) {
      if (*ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (*ec == asio::error::no_descriptors || ec->value() == ENFILE) {
        // Out of file descriptors (max_connections is kept below the process's limit, but other
        // descriptors count too): the connection waits in the backlog. Make room by closing the
        // connection idle longest, or else wait, rather than retry at once in a loop.
        if (!out_of_descriptors) log("tcpstore: cannot accept a connection: " + ec->message());
        out_of_descriptors = true;
        if (!evict_one()) pause(std::chrono::milliseconds(100));
        continue;
      }
      log("tcpstore: accept failed: " + ec->message());
      continue;
    }
    out_of_descriptors = false;
    boost::system::error_code endpoint_error;
    const tcp::endpoint remote = socket->remote_endpoint(endpoint_error);
    const std::string address = endpoint_error ? "an unknown peer" : remote.address().to_string();
    const std::string peer = endpoint_error ? address : address + ":" + std::to_string(remote.port());
    std::optional<int64_t> peer_pid;
    if (options.recorder && !endpoint_error) {
      boost::system::error_code local_error;
      const tcp::endpoint local = socket->local_endpoint(local_error);
      if (!local_error) peer_pid = local_peer_pid(remote, local);
    }
    auto stream = std::make_shared<FiberStream>(std::move(*socket), peer);
    if (connections.size() >= options.max_connections && !evict_one()) {
      refuse(*stream, "over the limit of " + std::to_string(options.max_connections) + " connections");
      continue;
    }
    ++stats.accepted;
    const uint64_t id = next_id++;
    stream->count_queued_in(queued_total);
    connections.emplace(id, Connection{stream, ++tick, address});
    ++per_address[address];
    if (options.recorder) options.recorder->connected(id, peer, peer_pid);
    stream->set_on_close([weak = weak_from_this(), id] {
      if (auto self = weak.lock()) {
        if (self->options.recorder) self->options.recorder->closed(id);
        self->forget(id);
      }
    });
    spawner.spawn(scope, "tcpstore " + peer, [self = shared_from_this(), id, stream] { self->serve(id, stream); });
  }
}

void TcpStoreServer::State::serve(uint64_t id, const std::shared_ptr<FiberStream>& stream) {
  Query q;
  try {
    for (;;) {
      const Decoded d = decode_query(stream->data(), options.limits, q);
      if (d.status == Decoded::Status::malformed) return refuse(*stream, d.error);
      if (d.status == Decoded::Status::incomplete) {
        stream->fill(d.needed, std::nullopt);
        continue;
      }
      stream->consume(d.consumed);
      ++stats.queries;
      if (const auto c = connections.find(id); c != connections.end()) c->second.active = ++tick;
      if (options.faults) {
        if (const FaultDecision hit = options.faults->decide(q.type)) {
          // A copy: the rules may be replaced while this query is delayed.
          const StoreFaultRule rule = *hit.rule;
          const char* kind = fault_kind_name(rule.kind);
          log("tcpstore: fault " + std::string(kind) + (rule.name.empty() ? "" : " (" + rule.name + ")") + " on " +
              query_name(q.type) + " from " + stream->peer() +
              (rule.kind == StoreFaultRule::Kind::delay ? " for " + std::to_string(rule.delay.count()) + " ms" : ""));
          if (options.recorder) options.recorder->fault(id, kind, q.type);
          if (rule.kind == StoreFaultRule::Kind::drop) continue;  // read, never applied nor answered
          if (rule.kind == StoreFaultRule::Kind::reset) {
            stream->close(std::string("the store's fault layer reset the connection at a ") + query_name(q.type));
            return;
          }
          pause(rule.delay);
          if (stream->closed()) return;
        }
      }
      if (options.recorder) {
        const StoreRecorder::Pending pending = options.recorder->begin(id, q, *table);
        const bool served = handle(id, *stream, q);
        options.recorder->end(pending, *table);
        if (!served || stream->closed()) return;
        continue;
      }
      if (!handle(id, *stream, q) || stream->closed()) return;
    }
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    if (e.code() != ErrorCode::connection_failed) throw;
    // A client leaving closes its connection: news only when it left in the middle of a query.
    if (!stream->data().empty()) {
      log("tcpstore: " + stream->peer() + " closed its connection in the middle of a query (" +
          std::to_string(stream->data().size()) + " bytes of it arrived): " + stream->close_reason());
    }
    stream->close(e.detail());
  }
}

bool TcpStoreServer::State::handle(uint64_t id, FiberStream& stream, Query& q) {
  Bytes reply;
  switch (q.type) {
    case QueryType::set:
      table->set(q.keys[0], std::move(q.values[0]));
      return true;
    case QueryType::compare_set:
      append_blob(reply, table->compare_set(q.keys[0], q.values[0], std::move(q.values[1])));
      break;
    case QueryType::get: {
      // PyTorch's clients WAIT before they GET; 1.13's server fails the connection otherwise.
      const std::optional<Bytes> value = table->get(q.keys[0]);
      if (!value) {
        refuse(stream, "GET of the absent key " + printable(q.keys[0], 80));
        return false;
      }
      append_blob(reply, *value);
      break;
    }
    case QueryType::add:
      try {
        append_i64(reply, table->add(q.keys[0], q.delta));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::invalid_argument) throw;
        refuse(stream, e.detail());
        return false;
      }
      break;
    case QueryType::check:
      reply = one_byte(static_cast<uint8_t>(table->check(q.keys) ? CheckResponse::ready : CheckResponse::not_ready));
      break;
    case QueryType::wait: {
      if (table->check(q.keys)) {
        reply = one_byte(static_cast<uint8_t>(WaitResponse::stop_waiting));
        break;
      }
      // Answered from on_change when the last missing key appears; the connection serves on.
      const uint64_t wait = next_wait++;
      DAGSIM_ASSERT(!waits.contains(wait));  // ids only grow: never one still pending
      for (const std::string& k : table->missing(q.keys)) waits_by_key[k].push_back(wait);
      waits.emplace(wait, PendingWait{id, std::move(q.keys)});
      ++connections.at(id).waits;
      return true;
    }
    case QueryType::get_num_keys:
      append_i64(reply, static_cast<int64_t>(table->size()));
      break;
    case QueryType::watch_key:
      watchers[q.keys[0]].push_back(id);
      ++connections.at(id).watches;
      reply = one_byte(static_cast<uint8_t>(WatchResponse::callback_registered));
      break;
    case QueryType::delete_key:
      append_i64(reply, table->erase(q.keys[0]) ? 1 : 0);
      break;
  }
  deliver(id, std::move(reply));
  return true;
}

void TcpStoreServer::State::deliver(uint64_t id, Bytes bytes) {
  const auto it = connections.find(id);
  if (it == connections.end()) return;
  const std::shared_ptr<FiberStream> stream = it->second.stream;  // refuse() erases the entry
  stream->send(std::move(bytes));
  if (stream->queued_bytes() > options.max_queued_bytes) {
    refuse(*stream, std::to_string(stream->queued_bytes()) + " bytes of replies and watch events wait for it to read them, " +
                        "over the limit of " + std::to_string(options.max_queued_bytes) + " per connection");
  }
  while (*queued_total > options.max_total_queued_bytes) {
    // The slowest reader: the most bytes waiting. Closing it frees them (FiberStream::close).
    auto slowest = connections.begin();
    for (auto c = connections.begin(); c != connections.end(); ++c) {
      if (c->second.stream->queued_bytes() > slowest->second.stream->queued_bytes()) slowest = c;
    }
    DAGSIM_ASSERT(slowest != connections.end() && slowest->second.stream->queued_bytes() > 0);
    const std::shared_ptr<FiberStream> victim = slowest->second.stream;
    refuse(*victim, "the store's connections hold " + std::to_string(*queued_total) + " bytes their peers have not read, " +
                        "over its limit of " + std::to_string(options.max_total_queued_bytes) + "; this one, the slowest reader, holds " +
                        std::to_string(victim->queued_bytes()));
  }
}

bool TcpStoreServer::State::evict_one() {
  // The peer address holding the most connections gives one up, so a flood from one address
  // displaces its own connections before anyone else's. Within it: the connection idle longest
  // that waits on nothing, else the waiter idle longest (its WAIT or watch is cancelled; PyTorch's
  // client then fails that call as it would on a store restart). Idle longest: by its last query,
  // so a connection that keeps asking stays, and one that just came (and was served) is the last.
  size_t most = 0;
  for (const auto& [address, n] : per_address) most = std::max(most, n);
  auto victim = connections.end();
  const auto waiting = [](const Connection& c) { return c.watches != 0 || c.waits != 0; };
  for (auto c = connections.begin(); c != connections.end(); ++c) {
    if (per_address.at(c->second.address) != most) continue;
    if (victim == connections.end() || std::pair(waiting(c->second), c->second.active) <
                                           std::pair(waiting(victim->second), victim->second.active)) {
      victim = c;
    }
  }
  if (victim == connections.end()) return false;
  const bool waited = waiting(victim->second);
  if (waited) DAGSIM_PROBE("store.tcpstore_evicted_a_waiter");
  const std::shared_ptr<FiberStream> stream = victim->second.stream;  // refuse() erases the entry
  refuse(*stream, "the store holds its limit of " + std::to_string(options.max_connections) +
                      " connections and a new one came: this one was idle longest of the " + std::to_string(most) +
                      " from " + victim->second.address + ", the address holding the most, " +
                      (waited ? "and waited on a watch or a WAIT (cancelled)" : "waiting on nothing"));
  return true;
}

void TcpStoreServer::State::on_change(const KeyChange& c) {
  if (c.after && !c.before) {
    // A key appeared: the waits it was missing from may be complete.
    const auto it = waits_by_key.find(c.key);
    if (it != waits_by_key.end()) {
      std::vector<uint64_t> ids = std::move(it->second);
      waits_by_key.erase(it);
      for (uint64_t wait : ids) {
        const auto w = waits.find(wait);
        if (w == waits.end()) continue;
        const std::vector<std::string> still = table->missing(w->second.keys);
        if (!still.empty()) {
          // Deleted again meanwhile: wait for it anew.
          DAGSIM_PROBE("store.tcpstore_wait_rearmed_after_delete");
          for (const std::string& k : still) waits_by_key[k].push_back(wait);
          continue;
        }
        transition(w->second.state, store::WaitState::satisfied, store::WaitFacts{true, false, false});
        // Erased before the reply goes: delivering it may close (and so forget) its connection.
        const uint64_t connection = w->second.connection;
        waits.erase(w);
        if (const auto conn = connections.find(connection); conn != connections.end()) {
          DAGSIM_ASSERT(conn->second.waits > 0);
          --conn->second.waits;
        }
        deliver(connection, one_byte(static_cast<uint8_t>(WaitResponse::stop_waiting)));
      }
    }
  }
  const auto watching = watchers.find(c.key);
  if (watching == watchers.end()) return;
  WatchEvent event;
  event.type = !c.before ? WatchResponse::key_created : !c.after ? WatchResponse::key_deleted : WatchResponse::key_updated;
  event.key = c.key;
  if (c.before) event.old_value = *c.before;
  if (c.after) event.new_value = *c.after;
  const Bytes bytes = encode_watch_event(event);
  // A copy: delivering may close a watcher, whose forget() edits the list.
  const std::vector<uint64_t> ids = watching->second;
  for (uint64_t id : ids) deliver(id, bytes);
}

void TcpStoreServer::State::forget(uint64_t id) {
  if (const auto c = connections.find(id); c != connections.end()) {
    if (const auto a = per_address.find(c->second.address); a != per_address.end() && --a->second == 0) per_address.erase(a);
    connections.erase(c);
  }
  for (auto it = watchers.begin(); it != watchers.end();) {
    std::erase(it->second, id);
    it = it->second.empty() ? watchers.erase(it) : std::next(it);
  }
  // Its pending waits go; their entries in waits_by_key are skipped when met.
  for (auto w = waits.begin(); w != waits.end();) {
    if (w->second.connection != id) {
      ++w;
      continue;
    }
    DAGSIM_PROBE("store.tcpstore_wait_cancelled_by_close");
    transition(w->second.state, store::WaitState::cancelled,
               store::WaitFacts{table->check(w->second.keys), false, /*abandoned=*/true});
    w = waits.erase(w);
  }
  DAGSIM_ASSERT(!connections.contains(id));
}

void TcpStoreServer::State::close_all() {
  if (closed) return;
  closed = true;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  if (observer != 0) table->unobserve(observer);
  observer = 0;
  // close() calls forget(), which edits the map: close a copy.
  const auto open = connections;
  for (const auto& [id, c] : open) c.stream->close("the store server closed");
  scope.cancel();
}

TcpStoreServer::TcpStoreServer(asio::io_context& io, runtime::Spawner& spawner, tcp::acceptor acceptor,
                               std::shared_ptr<store::KeyValueTable> table, TcpStoreServerOptions options)
    : state_(std::make_shared<State>(io, spawner, std::move(acceptor), std::move(table), std::move(options))) {
  state_->observer = state_->table->observe([weak = std::weak_ptr<State>(state_)](const KeyChange& c) {
    if (auto self = weak.lock()) self->on_change(c);
  });
  state_->spawner.spawn(state_->scope, "tcpstore accept", [self = state_] { self->accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() { close(); }

uint16_t TcpStoreServer::port() const { return state_->port; }
void TcpStoreServer::close() { state_->close_all(); }
TcpStoreServerStats TcpStoreServer::stats() const { return state_->stats; }
size_t TcpStoreServer::connections() const { return state_->connections.size(); }
size_t TcpStoreServer::queued_bytes() const { return *state_->queued_total; }
store::KeyValueTable& TcpStoreServer::table() { return *state_->table; }

}  // namespace dagsim::net::tcpstore
