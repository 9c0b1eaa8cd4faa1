// EtcdStore: a store::Store kept in etcd v3 (issue 11's etcd backend), spoken to through etcd's
// JSON gateway (EtcdHttp: POST /v3/kv/range, put, txn, deleterange and the /v3/watch stream). Every
// key lives under the prefix given at construction ("/dagsim/<run>/"), so runs sharing one etcd
// never see each other's keys.
//
// How each call maps (one HTTP request unless said otherwise):
//  - version = the key's mod_revision, 0 while it is absent. compare_set_version is one txn
//    comparing mod_revision (0 matches only an absent key, in etcd as here); the version of a
//    write is the txn's revision.
//  - compare_set (PyTorch's, by value): a txn comparing the value; when the key is absent and
//    `expected` is empty, a second txn that creates it only if still absent (etcd cannot compare
//    the value of an absent key). A race between the two re-reads, bounded by timeout().
//  - add: a compare-and-set loop on the mod_revision (read, add, write if unchanged), bounded by
//    timeout(); the value is decimal text, as PyTorch keeps it.
//  - get, wait, multi_get: a read, then for each missing key a watch from the read's revision + 1
//    until it is created, all within timeout(); multi_get then reads every key in one txn.
//  - watch, watch_at_most: a read (answered at once when the version already differs), then a
//    watch from the read's revision + 1, so no write after the read is missed; a delete answers
//    version 0. A watch that etcd cancels (compaction) starts again from a fresh read.
//  - check and multi_set are one txn (atomic); num_keys counts the keys under the prefix.
//
// Where it differs from the built-in store (store.h) and PyTorch's stores:
//  - Versions are etcd's cluster-wide revision: they rise on every write of any key in that etcd
//    (other prefixes, other runs), so they rise by one or more, never by exactly one; a version
//    still names one value of one key, and a later write always has a larger one.
//  - multi_set is one txn: every key it writes gets the same version (the built-in gives each key
//    its own). A reader sees all of the keys or none of them.
//  - A compaction of etcd's history makes a watch start again from a fresh read: a change and its
//    undoing, both compacted away, are not seen (the built-in has no history to compact).
//  - num_keys counts this prefix's keys only (the built-in counts its whole table).
//  - add is optimistic: under heavy contention on one key it can run out of timeout() and fail
//    with timed_out (the built-in serialises adds in the service).
//  - Outages: a refused connect is tried again until the call's deadline (EtcdHttp); a connection
//    lost after the request was sent is sent again for reads, set, multi_set, delete_key and
//    compare_set (whose second try finds its own write and answers as if it had compared: the
//    value is `desired` either way), and watches open again from a fresh read, so a write during
//    the outage is seen. compare_set_version, lost after sending, reads the key: still at the
//    expected version, it is sent again; holding `desired` at a newer version, it is taken as
//    written at that version (etcd made exactly that write: ours, or an identical one); anything
//    else is a lost race. add, lost after sending, fails with connection_failed: it may have been
//    applied, and a second add could count twice. So an etcd restarted (with its data) within a
//    call's timeout costs the call a delay, not a failure.
//  - A value, or a multi_set, larger than etcd's request limit (--max-request-bytes, 1.5 MiB by
//    default) is refused (protocol_error naming etcd's message): a rendezvous state of about
//    10,000 nodes (1.6 MB) needs that limit raised.
//  - Each waiting call opens a watch stream of its own (one TCP connection, closed when the call
//    ends); the built-in store's waits cost nothing beyond their request.
//  - Errors name the endpoint ("etcd at 127.0.0.1:2379") where the built-in names its node.
//
// Errors: connection_failed (cannot connect, connection lost, etcd without quorum), timed_out
// (no answer, or a waiting call's keys never came), invalid_argument (bad arguments, add on a key
// that holds no integer), protocol_error (a reply that makes no sense: over a bound, not JSON, a
// field of the wrong type or out of range; named with the endpoint, the call and the field, never
// asked again).
//
// Threading: all calls from fibers (started by a Spawner) of the thread whose io_context it was
// given; several fibers may call at once. The Clock bounds every call.
#pragma once

#include <boost/asio/io_context.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/store/store.h"
#include "net/etcd/etcd_codec.h"
#include "net/etcd/etcd_http.h"
#include "net/etcd/etcd_reply.h"

namespace dagsim::net::etcd {

using runtime::Duration;
using store::CasOutcome;
using store::Versioned;

// Requests made inside a waiting call (its reads, opening its watch) get the wait and this much
// more, so that a wait about to end still reads the key, as the built-in client's kReplyGrace.
inline constexpr Duration kRequestGrace = std::chrono::seconds(1);

struct EtcdStoreOptions {
  EtcdEndpoint endpoint;
  // Prepended to every key; "" shares the whole keyspace. A trailing "/" keeps "/a" from
  // covering "/ab".
  std::string prefix = "/dagsim/";
};

class EtcdStore final : public store::Store {
 public:
  EtcdStore(boost::asio::io_context& io, runtime::Clock& clock, EtcdStoreOptions options);

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
  Versioned get_versioned(const std::string& key) override;
  CasOutcome compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) override;
  Versioned watch(const std::string& key, uint64_t known_version) override;
  Versioned watch_at_most(const std::string& key, uint64_t known_version, Duration timeout) override;

  const EtcdEndpoint& endpoint() const { return http_.endpoint(); }
  const std::string& prefix() const { return prefix_; }
  EtcdHttp& http() { return http_; }

 private:
  // The key's state and the store's revision when it was read.
  struct Read {
    KeyState state;
    uint64_t revision = 0;
  };

  std::string full(const std::string& key) const { return prefix_ + key; }
  runtime::TimePoint deadline() const { return clock_.now() + timeout(); }
  // Whether a request lost after it was sent may be sent again: reads and plain writes, yes; a
  // write whose effect depends on what it finds (add's compare-and-set), no.
  enum class Resend : uint8_t { yes, no };
  // One request; its reply's readers name the endpoint and `what` (etcd_reply.h).
  Reply call(const char* path, const Json& body, runtime::TimePoint deadline, const std::string& what, Resend resend = Resend::yes);
  // Sleeps `backoff` (then doubles it, up to kLastBackoff) and returns true when that leaves time
  // before `deadline`; false when the caller should give up.
  bool back_off(runtime::Duration& backoff, runtime::TimePoint deadline);
  Read read(const std::string& key, runtime::TimePoint deadline, const std::string& what);
  // The key as it was at store revision `revision` (etcd's history; a compacted revision fails).
  KeyState read_at(const std::string& key, uint64_t revision, runtime::TimePoint deadline, const std::string& what);
  // After a compare-and-set on `expected` whose reply was lost, with the key now at `current`
  // (another version): the key's first change after `expected`, found by walking etcd's history
  // back from `current`. Only that change can be the lost write's; it is, when it holds `desired`.
  KeyState first_change_after(const std::string& key, uint64_t expected, const KeyState& current, runtime::TimePoint deadline,
                              const std::string& what);
  // Reads every key in one txn (a consistent snapshot), in order.
  std::vector<KeyState> read_all(const std::vector<std::string>& keys, runtime::TimePoint deadline, const std::string& what);
  // The key once its version differs from `known`, or nullopt when `deadline` passes first; then
  // `last` holds the key as last read. The requests may go on until `fail_at` (at least `deadline`
  // and a grace): a wait that ends while etcd is restarting reads the key once etcd is back, rather
  // than failing because its own window was shorter than the store's timeout.
  std::optional<Versioned> wait_for_change(const std::string& key, uint64_t known, runtime::TimePoint deadline,
                                           const std::string& what, Versioned* last = nullptr,
                                           runtime::TimePoint fail_at = runtime::TimePoint{});
  // Blocks until every key is present, up to timeout(); throws timed_out naming the missing ones.
  void wait_present(const std::vector<std::string>& keys, runtime::TimePoint deadline, const char* op);

  runtime::Clock& clock_;
  std::string prefix_;
  EtcdHttp http_;
};

}  // namespace dagsim::net::etcd
