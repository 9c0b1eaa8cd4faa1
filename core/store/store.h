// Store: the key-value store rendezvous runs on (issue 11), with PyTorch's c10d Store API (set, get,
// compare_set, add, wait, check, delete_key, num_keys, multi_get, multi_set) and what dagsim's
// rendezvous needs beyond it: every value carries a version, a compare-and-set can take the
// version as its token instead of the whole value, and a watch wakes a waiter when a key changes
// instead of polling.
//
// Versions: a store-wide counter that every write (set, compare_set that writes, add, delete,
// multi_set) raises by one; a key's version is the counter's value at its last write, 0 while the
// key is absent. So a version names one value of one key exactly, a later write always has a
// larger one, and etcd's mod revisions are the same thing (the etcd backend maps them).
//
// Blocking: get, wait and watch wait up to the store's timeout (PyTorch's default: 300 s) and then
// throw Error(timed_out) naming the keys; a store that cannot be reached throws
// Error(connection_failed) naming it. Nothing waits forever. Calls block the calling fiber only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/transport.h"

namespace dagsim::store {

using runtime::Bytes;
using runtime::Duration;

struct Versioned {
  Bytes value;
  uint64_t version = 0;  // 0: the key is absent
};

struct CasOutcome {
  bool written = false;
  Versioned current;  // the key after the call (the desired value and its new version if written)
};

inline constexpr Duration kDefaultStoreTimeout = std::chrono::seconds(300);

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, Bytes value) = 0;
  // The key's value, waiting up to timeout() for it to be set.
  virtual Bytes get(const std::string& key) = 0;
  // PyTorch's compare_set: writes `desired` if the key holds `expected`, or if it is absent and
  // `expected` is empty; returns the key's value after the call (`expected` when it is absent and
  // `expected` is not empty).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, Bytes desired) = 0;
  // Adds `delta` to the integer the key holds (as decimal text, as PyTorch: absent is 0, the text
  // read and the sum wrapped by store_integer.h's rule); returns it.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits up to timeout() until every key is set.
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // True if the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  // Every key's value, waiting up to timeout() for all of them.
  virtual std::vector<Bytes> multi_get(const std::vector<std::string>& keys) = 0;
  virtual void multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) = 0;

  // The key's value and version now (version 0: absent); never waits.
  virtual Versioned get_versioned(const std::string& key) = 0;
  // Writes `desired` if the key's version is `expected_version` (0: if it is absent).
  virtual CasOutcome compare_set_version(const std::string& key, uint64_t expected_version, Bytes desired) = 0;
  // Waits up to timeout() until the key's version differs from `known_version`; returns it then.
  virtual Versioned watch(const std::string& key, uint64_t known_version) = 0;
  // watch() bounded by `timeout` instead of the store's, and quiet about it: when `timeout` passes
  // with no change it returns the key as it is (version still `known_version`) rather than throwing.
  // A waiter with its own deadline (the rendezvous executor's next time-based transition) waits
  // this way; a store that cannot be reached still throws, about `timeout` later at most.
  virtual Versioned watch_at_most(const std::string& key, uint64_t known_version, Duration timeout) = 0;

  Duration timeout() const { return timeout_; }
  void set_timeout(Duration timeout) { timeout_ = timeout; }

 private:
  Duration timeout_ = kDefaultStoreTimeout;
};

}  // namespace dagsim::store
