// KeyValueTable: the in-memory keys of a built-in store, with store.h's semantics, shared by every
// way of serving them: StoreService (dagsim's RPC) and TcpStoreServer (PyTorch's TCPStore wire,
// net/tcpstore/). One table, one set of rules: PyTorch's compare_set, add as decimal text, versions
// from one store-wide revision counter that every write raises by one (store.h, "Versions"),
// waiters that block their fiber until keys appear or a key's version moves, and observers that
// hear of every change with the value before and after (TCPStore's watch_key pushes them).
//
// Note [value history]
// ~~~~~~~~~~~~~~~~~~~~~
// A write moves the value it replaces into the key's history (no copy), when that value is large
// enough for a delta to pay (kMinDeltaBytes). At most kHistoryVersions values and
// kHistoryBytesPerKey bytes are kept per key, the oldest dropped first; deleting the key drops
// them all. A rendezvous state is rewritten by every join: a waiter a few writes behind is
// answered with the edits since the version it holds (StoreService), not the whole state again.
//
// Nothing here knows about the wire or about timeouts' error texts: callers decode, call, and say
// what a timeout means to their client. Operations other than the waits never block.
//
// Threading: the node's fibers. Waiters read the table under mutex_, and every change is made and
// told under it (see Note [wake-ups under the lock] in core/runtime/wait.h). Observers run after
// the change, outside the mutex, on the writer's fiber before it yields (so before any waiter it
// woke runs); they must not block.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/wait.h"
#include "core/store/store.h"

namespace dagsim::store {

// One change of one key, as an observer hears of it. `before` is empty when the key was created,
// `after` when it was deleted; `version` is the key's version after the change (0: deleted).
struct KeyChange {
  const std::string& key;
  const std::optional<Bytes>& before;
  const std::optional<Bytes>& after;
  uint64_t version = 0;
};

inline constexpr size_t kHistoryVersions = 64;
inline constexpr size_t kHistoryBytesPerKey = size_t{16} << 20;

class KeyValueTable {
 public:
  using Observer = std::function<void(const KeyChange&)>;

  KeyValueTable() = default;
  // Versions start above `first_revision`. A store that restarts empty must not hand out a version
  // it handed out in an earlier life: a client holding that version as a compare-and-set token
  // would then overwrite a value it never read (ABA). The built-in store passes its node's
  // incarnation in the high bits, as ids do (ids.h).
  explicit KeyValueTable(uint64_t first_revision) : revision_(first_revision) {}
  KeyValueTable(const KeyValueTable&) = delete;
  KeyValueTable& operator=(const KeyValueTable&) = delete;

  void set(const std::string& key, Bytes value);
  // The value now, or nullopt if the key is absent; never waits.
  std::optional<Bytes> get(const std::string& key) const;
  // PyTorch's compare_set (store.h): the key's value after the call.
  Bytes compare_set(const std::string& key, const Bytes& expected, Bytes desired);
  // PyTorch's add (store_integer.h): the held text read as std::stoll reads it, the sum wrapping at
  // 2^63. Throws invalid_argument when the text has no leading integer or one outside int64.
  int64_t add(const std::string& key, int64_t delta);
  bool check(const std::vector<std::string>& keys) const;
  // True if the key existed.
  bool erase(const std::string& key);
  void multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values);
  size_t size() const { return data_.size(); }
  uint64_t revision() const { return revision_; }
  // The keys of `keys` that are absent now, in order (for error messages).
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

  Versioned get_versioned(const std::string& key) const;
  // The bytes `key` held at `version`: its value now, or one of the last kHistoryVersions values
  // it held before (Note [value history]); nullptr when they are no longer kept.
  const Bytes* value_at(const std::string& key, uint64_t version) const;
  // The key's version now (0: absent).
  uint64_t version_of(const std::string& key) const;
  // Writes `desired` if the key's version is `expected_version` (0: absent); returns the new
  // version, or nullopt when the key was at another version and nothing was written.
  std::optional<uint64_t> compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired);

  // Blocks the calling fiber until every key is present (true), or `deadline` passes or
  // `abandon()` holds (false). `abandon` is re-read whenever wake_all() or a write wakes waiters.
  // Throws node_killed / cancelled as every primitive does.
  bool wait_for_keys(const std::vector<std::string>& keys, std::optional<runtime::TimePoint> deadline,
                     const std::function<bool()>& abandon = nullptr);
  // Blocks until the key's version differs from `known_version` (true) or `deadline` passes (false).
  bool wait_for_change(const std::string& key, uint64_t known_version, runtime::TimePoint deadline);
  // Wakes every waiter to re-read its condition (an `abandon` that may now hold).
  void wake_all();

  // Calls `observer` after every change of every key, until unobserve(id). Returns the id.
  uint64_t observe(Observer observer);
  void unobserve(uint64_t id);

 private:
  struct Entry {
    Bytes value;
    uint64_t version = 0;
  };
  // Writes (or, with nullopt, erases) under the mutex, wakes the waiters, then tells observers.
  void change(const std::string& key, std::optional<Bytes> after);
  bool all_present(const std::vector<std::string>& keys) const;

  // Note [value history]: a key's earlier values, oldest first, kept for values of at least
  // kMinDeltaBytes (value_delta.h) so a client holding one can be answered with a delta.
  struct Past {
    uint64_t version = 0;
    Bytes value;
  };
  struct History {
    std::deque<Past> values;
    size_t bytes = 0;
  };
  void remember(const std::string& key, Entry& entry);

  std::map<std::string, Entry> data_;
  std::map<std::string, History> history_;
  uint64_t revision_ = 0;
  runtime::FiberMutex mutex_;
  // Note [a watch wakes on its key]: wait_for_keys' waiters sleep on changed_, which every write
  // and wake_all() wakes; a watch sleeps on its key's own condition, which only writes of that key
  // wake. A rendezvous of N nodes has N watchers of one key and O(N) writes of another; on one
  // condition every write woke every watcher to find nothing changed for it, N^2 wake-ups that
  // kept 4,096 simulated nodes from forming in 15 minutes. Waiters of one key still wake in the
  // order they began to wait. An entry lives while a fiber waits on it (node-based map: stable).
  struct KeyWatchers {
    runtime::FiberCondition moved;
    size_t waiting = 0;
  };
  runtime::FiberCondition changed_;
  std::map<std::string, KeyWatchers> watchers_;
  std::map<uint64_t, Observer> observers_;
  uint64_t next_observer_ = 1;
};

}  // namespace dagsim::store
