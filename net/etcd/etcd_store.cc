// EtcdStore's implementation: each Store call as etcd requests. See etcd_store.h for the mapping
// and for where it differs from the built-in store.
#include "net/etcd/etcd_store.h"

#include <limits>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/base/printable.h"
#include "core/runtime/cancel_scope.h"
#include "core/store/store_integer.h"

namespace dagsim::net::etcd {

namespace {

std::string ms(Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms"; }

std::string one_key(const std::string& key) { return printable(key, 80); }

// "[a, b, c]" for messages (the first 8 keys, then "and N more"), as the built-in store writes them.
std::string keys_text(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i > 0 ? ", " : "") + printable(keys[i], 80);
  if (keys.size() > 8) out += ", and " + std::to_string(keys.size() - 8) + " more";
  return out + "]";
}

Bytes text_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

Json txn(Json compares, Json success, Json failure) {
  return {{"compare", std::move(compares)}, {"success", std::move(success)}, {"failure", std::move(failure)}};
}

}  // namespace

EtcdStore::EtcdStore(boost::asio::io_context& io, runtime::Clock& clock, EtcdStoreOptions options)
    : clock_(clock), prefix_(std::move(options.prefix)), http_(io, clock, std::move(options.endpoint)) {}

bool EtcdStore::back_off(runtime::Duration& backoff, runtime::TimePoint deadline) {
  DAGSIM_ASSERT(backoff >= kFirstBackoff && backoff <= kLastBackoff);
  if (clock_.now() + backoff >= deadline) return false;
  clock_.sleep(backoff);
  const runtime::Duration slept = backoff;
  backoff = std::min(backoff * 2, kLastBackoff);
  // The back-off only grows, to its cap: a flapping etcd is asked ever less often.
  DAGSIM_ASSERT(backoff >= slept);
  return true;
}

Reply EtcdStore::call(const char* path, const Json& body, runtime::TimePoint deadline, const std::string& what, Resend resend) {
  runtime::Duration backoff = kFirstBackoff;
  for (;;) {
    try {
      return Reply(http_.post(path, body, deadline, what, /*idempotent=*/resend == Resend::yes), endpoint().name() + ": " + what);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (e.code() != ErrorCode::connection_failed || resend == Resend::no || !back_off(backoff, deadline)) throw;
      DAGSIM_PROBE("etcd.request_resent_after_connection_failure");
    }
  }
}

EtcdStore::Read EtcdStore::read(const std::string& key, runtime::TimePoint deadline, const std::string& what) {
  const Reply reply = call("/v3/kv/range", range_request(full(key)), deadline, what);
  return {reply.first_kv(), reply.revision()};
}

KeyState EtcdStore::read_at(const std::string& key, uint64_t revision, runtime::TimePoint deadline, const std::string& what) {
  Json request = range_request(full(key));
  request["revision"] = std::to_string(revision);
  return call("/v3/kv/range", request, deadline, what).first_kv();
}

KeyState EtcdStore::first_change_after(const std::string& key, uint64_t expected, const KeyState& current,
                                       runtime::TimePoint deadline, const std::string& what) {
  // REQUIRES: the key moved on past `expected` (the caller read it so).
  DAGSIM_ASSERT(expected < current.mod_revision);
  KeyState change = current;
  // Each step reads the key just before the change in hand; etcd's revisions only rise, so the walk
  // ends at `expected` (or the key's absence) within as many steps as the key changed since. An
  // answer that does not go back is etcd's fault, named, never a loop.
  for (;;) {
    KeyState before = read_at(key, change.mod_revision - 1, deadline, what);
    if (before.mod_revision <= expected) {
      DAGSIM_ASSERT(change.mod_revision > expected);
      return change;
    }
    if (before.mod_revision >= change.mod_revision) {
      throw errors::protocol_error(endpoint().name() + ": " + what + ": the key at revision " +
                                   std::to_string(change.mod_revision - 1) + " has mod_revision " +
                                   std::to_string(before.mod_revision));
    }
    change = std::move(before);
  }
}

std::vector<KeyState> EtcdStore::read_all(const std::vector<std::string>& keys, runtime::TimePoint deadline,
                                          const std::string& what) {
  Json ranges = Json::array();
  for (const std::string& k : keys) ranges.push_back({{"request_range", range_request(full(k))}});
  // No compare: the success branch always runs, as one consistent read.
  const Reply reply = call("/v3/kv/txn", {{"success", std::move(ranges)}}, deadline, what);
  std::vector<KeyState> states;
  for (size_t i = 0; i < keys.size(); ++i) states.push_back(reply.txn_range(i));
  return states;
}

void EtcdStore::set(const std::string& key, Bytes value) {
  call("/v3/kv/put", put_request(full(key), value), deadline(), "store set of key " + one_key(key));
}

Bytes EtcdStore::get(const std::string& key) {
  const std::string what = "store get of key " + one_key(key);
  std::optional<Versioned> v = wait_for_change(key, 0, deadline(), what);
  if (!v) {
    throw errors::timed_out(endpoint().name() + ": store get for keys [" + one_key(key) + "] timed out after " +
                            ms(timeout()) + "; still missing: [" + one_key(key) + "]");
  }
  return std::move(v->value);
}

Bytes EtcdStore::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  const std::string what = "store compare_set of key " + one_key(key);
  const runtime::TimePoint until = deadline();
  const Json put = Json::array({{{"request_put", put_request(full(key), desired)}}});
  const Json range = Json::array({{{"request_range", range_request(full(key))}}});
  for (;;) {
    const Reply by_value = call("/v3/kv/txn", txn(Json::array({value_equals(full(key), expected)}), put, range), until, what);
    if (by_value.succeeded()) return desired;
    const KeyState current = by_value.txn_range(0);
    if (current.present()) return current.value;
    if (!expected.empty()) return expected;  // PyTorch: an absent key answers `expected`
    // Absent, and an empty `expected` creates it: only if it is still absent.
    const Reply create = call("/v3/kv/txn", txn(Json::array({mod_revision_equals(full(key), 0)}), put, range), until, what);
    if (create.succeeded()) return desired;
    DAGSIM_PROBE("etcd.compare_set_lost_the_create");
    const KeyState now = create.txn_range(0);
    if (now.present() && !now.value.empty()) return now.value;
    // Someone created it empty (which `expected` matches) or deleted it again: decide afresh.
    if (clock_.now() >= until) throw errors::timed_out(endpoint().name() + ": " + what + ": contended past " + ms(timeout()));
  }
}

int64_t EtcdStore::add(const std::string& key, int64_t delta) {
  const std::string what = "store add to key " + one_key(key);
  const runtime::TimePoint until = deadline();
  KeyState current = read(key, until, what).state;
  for (;;) {
    const int64_t sum = store::wrapping_add(current.present() ? store::stored_integer(key, current.value) : 0, delta);
    const Reply reply = call("/v3/kv/txn",
                            txn(Json::array({mod_revision_equals(full(key), current.mod_revision)}),
                                Json::array({{{"request_put", put_request(full(key), text_bytes(std::to_string(sum)))}}}),
                                Json::array({{{"request_range", range_request(full(key))}}})),
                            until, what, Resend::no);
    if (reply.succeeded()) return sum;
    DAGSIM_PROBE("etcd.add_lost_txn_retried");
    current = reply.txn_range(0);  // the winner's value: try again from it
    if (clock_.now() >= until) throw errors::timed_out(endpoint().name() + ": " + what + ": contended past " + ms(timeout()));
  }
}

void EtcdStore::wait(const std::vector<std::string>& keys) { wait_present(keys, deadline(), "wait"); }

bool EtcdStore::check(const std::vector<std::string>& keys) {
  if (keys.empty()) throw errors::invalid_argument("store check: expected at least one key and no values");
  for (const KeyState& s : read_all(keys, deadline(), "store check of keys " + keys_text(keys))) {
    if (!s.present()) return false;
  }
  return true;
}

bool EtcdStore::delete_key(const std::string& key) {
  return call("/v3/kv/deleterange", range_request(full(key)), deadline(), "store delete_key of key " + one_key(key))
             .number("deleted") > 0;
}

int64_t EtcdStore::num_keys() {
  Json count = range_request(prefix_, /*count_only=*/true);
  count["range_end"] = base64_encode(prefix_end(prefix_));
  if (prefix_.empty()) count["key"] = base64_encode(std::string(1, '\0'));
  const uint64_t count_of = call("/v3/kv/range", count, deadline(), "store num_keys under prefix " + one_key(prefix_)).number("count");
  // etcd counts in int64: a larger count is no count etcd gives.
  if (count_of > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw errors::protocol_error(endpoint().name() + ": store num_keys under prefix " + one_key(prefix_) + ": the reply's count is " +
                                 std::to_string(count_of) + ", past int64");
  }
  return static_cast<int64_t>(count_of);
}

std::vector<Bytes> EtcdStore::multi_get(const std::vector<std::string>& keys) {
  const runtime::TimePoint until = deadline();
  for (;;) {
    wait_present(keys, until, "multi_get");
    std::vector<KeyState> states = read_all(keys, until + kRequestGrace, "store multi_get of keys " + keys_text(keys));
    std::vector<Bytes> values;
    for (KeyState& s : states) {
      if (!s.present()) break;  // deleted since it was seen: wait again
      values.push_back(std::move(s.value));
    }
    if (values.size() == keys.size()) return values;
  }
}

void EtcdStore::multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) {
  if (keys.empty() || keys.size() != values.size()) {
    throw errors::invalid_argument("store multi_set: expected as many values as keys, at least one");
  }
  Json puts = Json::array();
  for (size_t i = 0; i < keys.size(); ++i) puts.push_back({{"request_put", put_request(full(keys[i]), values[i])}});
  call("/v3/kv/txn", {{"success", std::move(puts)}}, deadline(), "store multi_set of keys " + keys_text(keys));
}

Versioned EtcdStore::get_versioned(const std::string& key) {
  Read r = read(key, deadline(), "store get_versioned of key " + one_key(key));
  return {std::move(r.state.value), r.state.mod_revision};
}

CasOutcome EtcdStore::compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) {
  const std::string what = "store compare_set_version of key " + one_key(key);
  const runtime::TimePoint until = deadline();
  // etcd's revisions are int64: a larger version was never issued, so it is stale like any other
  // (etcd itself would refuse the request as malformed).
  if (expected_version > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    KeyState current = read(key, until, what).state;
    return {false, {std::move(current.value), current.mod_revision}};
  }
  runtime::Duration backoff = kFirstBackoff;
  for (;;) {
    std::optional<Reply> reply;
    try {
      reply = call("/v3/kv/txn",
                   txn(Json::array({mod_revision_equals(full(key), expected_version)}),
                       Json::array({{{"request_put", put_request(full(key), desired)}}}),
                       Json::array({{{"request_range", range_request(full(key))}}})),
                   until, what, Resend::no);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (e.code() != ErrorCode::connection_failed) throw;
      // Lost after sending: what etcd holds now says whether the write happened.
      DAGSIM_PROBE("etcd.txn_lost");
      KeyState current = read(key, until, what).state;
      if (current.mod_revision == expected_version) {
        if (!back_off(backoff, until)) throw;
        DAGSIM_PROBE("etcd.txn_lost_not_applied_resent");
        continue;  // not applied: send it again
      }
      // The key moved on. Only its first change after expected_version can be this write; other
      // writers may have changed it since (a write that committed, lost its reply, and was then
      // overwritten must still say it committed, or the history behind it has a hole).
      if (current.present() && expected_version < current.mod_revision) {
        const KeyState first = first_change_after(key, expected_version, current, until, what);
        if (first.present() && first.value == desired) {
          DAGSIM_PROBE("etcd.txn_lost_found_committed");
          return {true, {std::move(desired), first.mod_revision}};
        }
      }
      return {false, {std::move(current.value), current.mod_revision}};
    }
    // A txn that wrote has the write's revision, which is the key's new mod_revision.
    if (reply->succeeded()) return {true, {std::move(desired), reply->revision()}};
    KeyState current = reply->txn_range(0);
    return {false, {std::move(current.value), current.mod_revision}};
  }
}

Versioned EtcdStore::watch(const std::string& key, uint64_t known_version) {
  const std::string what = "store watch of key " + one_key(key);
  std::optional<Versioned> v = wait_for_change(key, known_version, deadline(), what);
  if (!v) throw errors::timed_out(endpoint().name() + ": " + what + " timed out after " + ms(timeout()));
  return std::move(*v);
}

Versioned EtcdStore::watch_at_most(const std::string& key, uint64_t known_version, Duration timeout) {
  if (timeout < Duration::zero()) throw errors::invalid_argument("store watch_at_most: negative timeout");
  Versioned last;
  // Its window may be far shorter than the store's timeout (the rendezvous waits up to its next
  // deadline): an etcd restarting when the window ends costs a delay, not a failure, as every other
  // call's outage does (etcd_restart_property_test found joins failing 1 s into an outage).
  std::optional<Versioned> v = wait_for_change(key, known_version, clock_.now() + timeout,
                                               "store watch of key " + one_key(key), &last, deadline());
  return v ? std::move(*v) : std::move(last);
}

void EtcdStore::wait_present(const std::vector<std::string>& keys, runtime::TimePoint until, const char* op) {
  if (keys.empty()) throw errors::invalid_argument(std::string("store ") + op + ": expected at least one key and no values");
  const std::string what = std::string("store ") + op + " for keys " + keys_text(keys);
  for (const std::string& k : keys) {
    if (wait_for_change(k, 0, until, what)) continue;
    // Timed out: name what is still missing, if etcd still answers at once.
    std::string missing = "[" + one_key(k) + ", ...]";
    try {
      std::vector<std::string> absent;
      const std::vector<KeyState> states = read_all(keys, clock_.now() + kRequestGrace, what);
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!states[i].present()) absent.push_back(keys[i]);
      }
      missing = keys_text(absent);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
    }
    throw errors::timed_out(endpoint().name() + ": " + what + " timed out after " + ms(timeout()) + "; still missing: " + missing);
  }
}

std::optional<Versioned> EtcdStore::wait_for_change(const std::string& key, uint64_t known, runtime::TimePoint until,
                                                    const std::string& what, Versioned* last, runtime::TimePoint fail_at) {
  // Requests get the wait and then some, so that a wait about to end still reads the key.
  const runtime::TimePoint request_until = std::max(until + kRequestGrace, fail_at);
  DAGSIM_ASSERT(request_until > until);
  runtime::Duration backoff = kFirstBackoff;
  for (;;) {
    Read r = read(key, request_until, what);
    Versioned seen{std::move(r.state.value), r.state.mod_revision};
    if (seen.version != known) return seen;
    if (last != nullptr) *last = seen;
    if (clock_.now() >= until) return std::nullopt;
    // From the read's revision on, so that no write after the read is missed.
    const Json create = {{"create_request", {{"key", base64_encode(full(key))}, {"start_revision", std::to_string(r.revision + 1)}}}};
    std::unique_ptr<EtcdHttp::Stream> stream;
    try {
      stream = http_.open_stream("/v3/watch", create, request_until, what);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (e.code() != ErrorCode::connection_failed || !back_off(backoff, request_until)) throw;
      DAGSIM_PROBE("etcd.watch_open_failed_retried");
      continue;  // etcd went away: read again and watch from there
    }
    for (bool cancelled = false; !cancelled;) {
      std::optional<Json> message;
      try {
        message = stream->next(until);
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        if (e.code() != ErrorCode::connection_failed || !back_off(backoff, request_until)) throw;
        DAGSIM_PROBE("etcd.watch_stream_broke");
        break;  // the stream broke (etcd restarting): read again, and watch from that read
      }
      if (!message) return std::nullopt;
      const WatchMessage m = Reply(std::move(*message), endpoint().name() + ": " + what).watch();
      if (m.error) throw errors::connection_failed(endpoint().name() + ": " + what + ": the watch failed: " + *m.error);
      // Cancelled by etcd (its history was compacted past our revision): read again.
      cancelled = m.canceled;
      if (cancelled) DAGSIM_PROBE("etcd.watch_revision_compacted");
      if (m.created) {
        // A watch that starts in the past (a write landed between our read and the watch's
        // creation) gets that event from etcd's unsynced-watcher loop, which runs every 100 ms:
        // agents of a rendezvous returned 90 ms late. Now that the watch exists, read once more.
        Read again = read(key, request_until, what);
        if (again.state.mod_revision != known) {
          DAGSIM_PROBE("etcd.write_landed_before_watch_created");
          return Versioned{std::move(again.state.value), again.state.mod_revision};
        }
      }
      for (const KeyState& event : m.events) {
        if (event.mod_revision != known) return Versioned{event.value, event.mod_revision};
      }
    }
  }
}

}  // namespace dagsim::net::etcd
