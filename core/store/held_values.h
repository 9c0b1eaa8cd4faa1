// HeldValues: the values store clients hold for deltas (store_client.h), shared between the clients
// of one OS thread that hold the same bytes. A simulated rendezvous of N nodes has N clients each
// holding the state, O(N) bytes: N^2 in all (36 MB of a 1,000-node formation's 213 MB peak heap,
// most of it copies of the same few versions). A client hands the value it would hold to intern(),
// which returns the copy already held by another client of the thread when the bytes are equal
// (compared, not trusted to a hash), else keeps the new one. Sharing changes no byte anyone reads:
// the values are immutable once held.
//
// Threading: one table per OS thread (a client never leaves the thread its node runs on); the
// entries are weak, so a value lives exactly as long as some client holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "core/store/store.h"

namespace dagsim::store {

class HeldValues {
 public:
  // An equal value (same bytes and version) some client of this thread holds, else a copy of `value`.
  std::shared_ptr<const Versioned> intern(const Versioned& value);
  // Entries whose value is still held (tests).
  size_t live() const;

  static HeldValues& for_this_thread();

 private:
  void drop_expired();
  // By (version, hash of the bytes): equal values share a key; unequal ones may too (a collision,
  // or two stores' values at one version), hence the multimap and the byte compare.
  std::multimap<std::pair<uint64_t, uint64_t>, std::weak_ptr<const Versioned>> entries_;
  size_t purge_at_ = 64;
};

}  // namespace dagsim::store
