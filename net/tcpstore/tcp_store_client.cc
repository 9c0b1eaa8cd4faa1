#include "net/tcpstore/tcp_store_client.h"

#include <optional>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/fiber_context.h"
#include "net/crypto.h"
#include "net/tcpstore/fiber_stream.h"
#include "net/tcpstore/watch_channel.h"

namespace dagsim::net::tcpstore {

using runtime::TimePoint;
using store::CasOutcome;
using store::Versioned;

namespace {

constexpr size_t kRemembered = 8;  // values remembered per key, for compare_set_version's tokens

runtime::Clock& fiber_clock() {
  runtime::FiberContext* self = runtime::current_fiber();
  if (self == nullptr || self->clock == nullptr) {
    throw errors::internal_error("TcpStoreClient: calls need a fiber with a Clock (one started by a Spawner)");
  }
  return *self->clock;
}

std::string millis(runtime::Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

Query query(QueryType type, std::vector<std::string> keys, std::vector<Bytes> values = {}, int64_t delta = 0) {
  Query q;
  q.type = type;
  q.keys = std::move(keys);
  q.values = std::move(values);
  q.delta = delta;
  return q;
}

std::string key_names(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i > 0 ? ", " : "") + printable(keys[i], 80);
  if (keys.size() > 8) out += ", and " + std::to_string(keys.size() - 8) + " more";
  return out + "]";
}

}  // namespace

// One call's exchange on the main connection: what it sends and the replies it reads, each read
// bounded by the call's deadline.
class TcpStoreClient::Call {
 public:
  Call(FiberStream& stream, TimePoint deadline, runtime::Duration budget, const WireLimits& limits)
      : stream_(stream), deadline_(deadline), budget_(budget), limits_(limits) {}

  void send(const Query& q) { stream_.send(encode_query(q)); }
  uint8_t u8() {
    need(1);
    const uint8_t v = stream_.data()[0];
    stream_.consume(1);
    return v;
  }
  int64_t i64() {
    need(8);
    const uint64_t v = read_u64(stream_.data());
    stream_.consume(8);
    return static_cast<int64_t>(v);
  }
  Bytes blob() {
    need(8);
    const uint64_t n = read_u64(stream_.data());
    if (n > limits_.max_value_bytes) {
      throw errors::protocol_error("a reply of " + std::to_string(n) + " bytes from " + stream_.peer() +
                                   ", over the limit of " + std::to_string(limits_.max_value_bytes));
    }
    need(8 + n);
    const auto data = stream_.data();
    Bytes out(data.begin() + 8, data.begin() + 8 + static_cast<ptrdiff_t>(n));
    stream_.consume(8 + n);
    return out;
  }
  // SET has no reply: a GETNUMKEYS behind it on the same connection is answered only once the
  // server applied the SET, so set() returns when the write is visible to every other client
  // (PyTorch's own set returns as soon as its bytes are sent, and a read on another connection
  // may still miss it). Only a query of 1.13's protocol, so any server answers it.
  void fence() {
    send(query(QueryType::get_num_keys, {}));
    (void)i64();
  }
  // WAIT's answer, which comes when every key is present.
  void stop_waiting(const std::vector<std::string>& keys) {
    if (!stream_.fill(1, deadline_)) {
      throw errors::timed_out("keys " + key_names(keys) + " still missing after " + millis(budget_));
    }
    if (u8() != static_cast<uint8_t>(WaitResponse::stop_waiting)) {
      throw errors::protocol_error("a WAIT answered with other than STOP_WAITING by " + stream_.peer());
    }
  }

 private:
  void need(size_t n) {
    if (!stream_.fill(n, deadline_)) {
      throw errors::timed_out("no reply from " + stream_.peer() + " within " + millis(budget_));
    }
  }

  FiberStream& stream_;
  TimePoint deadline_;
  runtime::Duration budget_;
  const WireLimits& limits_;
};

TcpStoreClient::TcpStoreClient(boost::asio::io_context& io, TcpStoreClientOptions options)
    : io_(io), options_(std::move(options)), address_(options_.host + ":" + std::to_string(options_.port)) {
  const std::string marker = "\x01" "dagsim-tcpstore-probe:";
  probe_.assign(marker.begin(), marker.end());
  const std::vector<uint8_t> nonce = random_bytes(16);
  probe_.insert(probe_.end(), nonce.begin(), nonce.end());
}

TcpStoreClient::~TcpStoreClient() { disconnect(); }

void TcpStoreClient::disconnect() {
  if (stream_) stream_->close("the client disconnected");
  stream_.reset();
  if (watch_) watch_->close();
  watch_.reset();
}

// Note [a store that served and now refuses]: a refused connect is retried until the call's
// deadline because the server may not listen yet (agents start before their store host). Once the
// server has answered this client, a refusal means its process ended: a TCPStore keeps its keys in
// its process, so whatever listens on the port later is a new, empty store, and the rendezvous
// state, its rounds and the agents' keys died with the old one. Waiting out the store's timeout
// (60 s by default, per call) then only delays what the caller must learn: a launch whose store
// host left sat silent for minutes where torchrun's client, which never reconnects, fails at
// once. A refusal after a first answer therefore fails the call at once, and gone() says so, so
// a caller can explain it without reading the message.
std::shared_ptr<FiberStream> TcpStoreClient::connect(TimePoint deadline) {
  try {
    std::shared_ptr<FiberStream> stream = FiberStream::connect(io_, options_.host, options_.port, deadline, !served_);
    served_ = true;
    gone_ = false;
    return stream;
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    if (!served_ || e.code() != ErrorCode::connection_failed) throw;
    gone_ = true;
    throw errors::connection_failed(e.detail() + " (it served this client before: its server is gone, and its keys with it)");
  }
}

// Runs `body` with the main connection held (connected first if need be). Any failure drops the
// connection (a reply may still be on its way) and is rethrown naming the call and the server.
template <typename F>
auto TcpStoreClient::exchange(const std::string& what, TimePoint deadline, runtime::Duration budget, F&& body) {
  if (!mutex_.lock_until(deadline)) {
    throw errors::timed_out("store " + what + " at " + address_ + ": other calls held the connection for " + millis(budget));
  }
  std::unique_lock<runtime::Mutex> held(mutex_, std::adopt_lock);
  try {
    if (!stream_ || stream_->closed()) stream_ = connect(deadline);
    Call call(*stream_, deadline, budget, options_.limits);
    return body(call);
  } catch (const Error& e) {
    if (stream_) stream_->close("a call failed: " + e.detail());
    stream_.reset();
    runtime::rethrow_if_unwinding(e);
    throw Error(e.code(), "store " + what + " at " + address_ + ": " + e.detail());
  }
}

void TcpStoreClient::set(const std::string& key, Bytes value) {
  const runtime::Duration budget = timeout();
  exchange("set of key " + printable(key, 80), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::set, {wire_key(key)}, {std::move(value)}));
    c.fence();
  });
}

Bytes TcpStoreClient::get(const std::string& key) {
  const runtime::Duration budget = timeout();
  const std::string k = wire_key(key);
  // PyTorch's get: WAIT for the key, then GET it (GET of an absent key fails the connection).
  return exchange("get of key " + printable(key, 80), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::wait, {k}));
    c.stop_waiting({key});
    c.send(query(QueryType::get, {k}));
    return c.blob();
  });
}

Bytes TcpStoreClient::compare_set_at(const std::string& wire, const Bytes& expected, Bytes desired, TimePoint deadline) {
  return exchange("compare_set of key " + printable(wire, 80), deadline, deadline - fiber_clock().now(), [&](Call& c) {
    c.send(query(QueryType::compare_set, {wire}, {expected, std::move(desired)}));
    return c.blob();
  });
}

Bytes TcpStoreClient::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  return compare_set_at(wire_key(key), expected, std::move(desired), fiber_clock().now() + timeout());
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  const runtime::Duration budget = timeout();
  return exchange("add to key " + printable(key, 80), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::add, {wire_key(key)}, {}, delta));
    return c.i64();
  });
}

void TcpStoreClient::wait(const std::vector<std::string>& keys) {
  const runtime::Duration budget = timeout();
  std::vector<std::string> wire;
  for (const std::string& k : keys) wire.push_back(wire_key(k));
  exchange("wait for keys " + key_names(keys), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::wait, std::move(wire)));
    c.stop_waiting(keys);
  });
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  const runtime::Duration budget = timeout();
  std::vector<std::string> wire;
  for (const std::string& k : keys) wire.push_back(wire_key(k));
  return exchange("check of keys " + key_names(keys), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::check, std::move(wire)));
    const uint8_t answer = c.u8();
    if (answer > static_cast<uint8_t>(CheckResponse::not_ready)) {
      throw errors::protocol_error("CHECK answered with " + std::to_string(answer));
    }
    return answer == static_cast<uint8_t>(CheckResponse::ready);
  });
}

bool TcpStoreClient::delete_key(const std::string& key) {
  const runtime::Duration budget = timeout();
  return exchange("delete_key of key " + printable(key, 80), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::delete_key, {wire_key(key)}));
    return c.i64() == 1;
  });
}

int64_t TcpStoreClient::num_keys() {
  const runtime::Duration budget = timeout();
  return exchange("num_keys", fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::get_num_keys, {}));
    return c.i64();
  });
}

std::vector<Bytes> TcpStoreClient::multi_get(const std::vector<std::string>& keys) {
  const runtime::Duration budget = timeout();
  std::vector<std::string> wire;
  for (const std::string& k : keys) wire.push_back(wire_key(k));
  return exchange("multi_get of keys " + key_names(keys), fiber_clock().now() + budget, budget, [&](Call& c) {
    c.send(query(QueryType::wait, wire));
    c.stop_waiting(keys);
    for (const std::string& k : wire) c.send(query(QueryType::get, {k}));  // pipelined
    std::vector<Bytes> out;
    for (size_t i = 0; i < wire.size(); ++i) out.push_back(c.blob());
    return out;
  });
}

void TcpStoreClient::multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) {
  if (keys.size() != values.size()) throw errors::invalid_argument("store multi_set: as many values as keys are needed");
  const runtime::Duration budget = timeout();
  exchange("multi_set of keys " + key_names(keys), fiber_clock().now() + budget, budget, [&](Call& c) {
    for (size_t i = 0; i < keys.size(); ++i) c.send(query(QueryType::set, {wire_key(keys[i])}, {std::move(values[i])}));
    c.fence();
  });
}

uint64_t TcpStoreClient::new_version(const std::string& key, const Bytes& value) {
  std::deque<Seen>& seen = seen_[key];
  const uint64_t before = last_version_;
  seen.push_back({++last_version_, value});
  if (seen.size() > kRemembered) seen.pop_front();
  // Written: this client's versions only grow, so a token names one value it saw, never two.
  DAGSIM_ASSERT(last_version_ > before);
  DAGSIM_ASSERT(seen.size() <= kRemembered);
  return last_version_;
}

uint64_t TcpStoreClient::version_of(const std::string& key, const Bytes& value) {
  const auto it = seen_.find(key);
  if (it != seen_.end() && !it->second.empty() && it->second.back().value == value) {
    // Read back: a version this client handed out, the newest for the key.
    DAGSIM_ASSERT(it->second.back().version != 0);
    DAGSIM_ASSERT(it->second.back().version <= last_version_);
    return it->second.back().version;
  }
  return new_version(key, value);
}

const Bytes* TcpStoreClient::remembered(const std::string& key, uint64_t version) const {
  const auto it = seen_.find(key);
  if (it == seen_.end()) return nullptr;
  for (const Seen& s : it->second) {
    if (s.version == version) {
      DAGSIM_ASSERT(s.version <= last_version_);  // read back: handed out by this client
      return &s.value;
    }
  }
  return nullptr;
}

Versioned TcpStoreClient::read_versioned(const std::string& key, TimePoint deadline) {
  // compare_set(probe, probe): 1.13 answers `expected` (the probe) for an absent key and writes
  // nothing; a present key answers its value (nobody writes the probe, so it never equals it).
  Bytes now = compare_set_at(wire_key(key), probe_, probe_, deadline);
  if (now == probe_) return {};
  const uint64_t version = version_of(key, now);
  return {std::move(now), version};
}

Versioned TcpStoreClient::get_versioned(const std::string& key) {
  return read_versioned(key, fiber_clock().now() + timeout());
}

CasOutcome TcpStoreClient::compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) {
  const TimePoint deadline = fiber_clock().now() + timeout();
  const std::string wire = wire_key(key);
  std::optional<Bytes> expected;  // the value the token names; nullopt: absent
  if (expected_version != 0) {
    const Bytes* value = remembered(key, expected_version);
    if (value == nullptr) {
      DAGSIM_PROBE("store.tcpstore_cas_token_forgotten");
      return {false, read_versioned(key, deadline)};  // forgotten: stale
    }
    expected = *value;
  }
  // compare_set cannot tell absent from empty: check the token first in those cases.
  if (!expected || expected->empty()) {
    Versioned current = read_versioned(key, deadline);
    if (current.version != expected_version && !(expected && current.version != 0 && current.value.empty())) {
      return {false, std::move(current)};
    }
  }
  const Bytes compare = expected.value_or(Bytes{});
  const Bytes after = compare_set_at(wire, compare, desired, deadline);
  if (compare == desired) {
    // Writing the value it holds: written when it holds it; a new version all the same, as a
    // write (later tokens must differ from the one that wrote).
    Versioned current = read_versioned(key, deadline);
    if (current.version == 0 || current.value != desired) return {false, std::move(current)};
    const uint64_t version = new_version(key, desired);
    return {true, {std::move(desired), version}};
  }
  if (after == desired) {
    const uint64_t version = new_version(key, desired);
    return {true, {std::move(desired), version}};
  }
  // Not written. 1.13 answers `expected` for an absent key (and a present key never holds the
  // value it was compared with here, or it would have been written).
  if (expected && after == *expected) return {false, {}};
  const uint64_t version = version_of(key, after);
  return {false, {after, version}};
}

Versioned TcpStoreClient::watch_until(const std::string& key, uint64_t known_version, TimePoint deadline, bool quiet) {
  // `deadline` bounds the wait for a change. A read is a query, and gets a query's time (the
  // store's timeout) even when the wait's is nearly spent: a watch whose registration took until
  // its deadline must answer "unchanged" or the value, not time out its own read.
  const auto read_deadline = [&] { return std::max(deadline, fiber_clock().now() + timeout()); };
  std::optional<Bytes> known;
  if (known_version != 0) {
    const Bytes* value = remembered(key, known_version);
    if (value == nullptr) return read_versioned(key, read_deadline());  // forgotten: it changed since
    known = *value;
  }
  auto unchanged = [&](const Versioned& v) { return known ? v.version != 0 && v.value == *known : v.version == 0; };
  const std::string wire = wire_key(key);
  const std::string what = "watch of key " + printable(key, 80);
  for (;;) {
    uint64_t seen = 0;
    bool registered = false;
    try {
      if (!watch_ || watch_->failed()) watch_ = WatchChannel::open(connect(deadline), options_.limits);
      // Registered before the read below, so a change after the read is an event.
      registered = watch_->register_key(wire, deadline);
      if (registered) seen = watch_->events(wire);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      throw Error(e.code(), "store " + what + " at " + address_ + ": " + e.detail());
    }
    if (!registered) {
      DAGSIM_PROBE("store.tcpstore_watch_registration_timed_out");
      if (quiet) return {known.value_or(Bytes{}), known_version};
      throw errors::timed_out("store " + what + " at " + address_ + " timed out registering the watch");
    }
    Versioned now = read_versioned(key, read_deadline());
    if (!unchanged(now)) return now;
    bool moved = false;
    try {
      moved = watch_ && !watch_->failed() && watch_->wait_for_event(wire, seen, deadline);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      throw Error(e.code(), "store " + what + " at " + address_ + ": " + e.detail());
    }
    if (moved) continue;
    if (fiber_clock().now() < deadline) {
      DAGSIM_PROBE("store.tcpstore_watch_channel_reopened");
      continue;  // the channel closed itself: open another
    }
    if (quiet) return {known.value_or(Bytes{}), known_version};
    throw errors::timed_out("store " + what + " at " + address_ + " timed out: no change in " + millis(timeout()));
  }
}

Versioned TcpStoreClient::watch(const std::string& key, uint64_t known_version) {
  return watch_until(key, known_version, fiber_clock().now() + timeout(), false);
}

Versioned TcpStoreClient::watch_at_most(const std::string& key, uint64_t known_version, runtime::Duration timeout) {
  if (timeout < runtime::Duration::zero()) throw errors::invalid_argument("store watch_at_most: negative timeout");
  return watch_until(key, known_version, fiber_clock().now() + timeout, true);
}

}  // namespace dagsim::net::tcpstore
