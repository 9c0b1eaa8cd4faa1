// CountingStore: a Store that forwards every call to another Store (a node's StoreClient) and
// counts it, for the rendezvous benchmark. It sits on the client side, so the store service stays
// untouched: what the clients of one store asked of it is, absent failures, what it served.
//
// Promises: it changes no call's arguments, result or error; the counts (StoreCounts, which any
// number of CountingStores of one world may share) say how many requests were made, how many
// versioned compare-and-sets lost their race, and how many watches came back with a changed key.
//
// Threading: the fibers of one simulated world (one OS thread), so plain counters suffice.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/store/store.h"

namespace dagsim::bench {

struct StoreCounts {
  uint64_t requests = 0;       // every call, whatever its kind
  uint64_t reads = 0;          // get_versioned
  uint64_t cas = 0;            // compare_set_version
  uint64_t cas_conflicts = 0;  // compare_set_version that did not write (another writer won)
  uint64_t watches = 0;        // watch and watch_at_most
  uint64_t watch_changes = 0;  // watches answered with a version other than the one known
  uint64_t reply_bytes = 0;    // value bytes in versioned replies (the state blobs moved)
  // reply_bytes by what asked for them: reads, lost and won compare-and-sets, watches.
  uint64_t read_reply_bytes = 0;
  uint64_t cas_lost_reply_bytes = 0;
  uint64_t cas_won_reply_bytes = 0;
  uint64_t watch_reply_bytes = 0;
  // Every compare-and-set that wrote: (the version it named, the version it wrote), in call order.
  // The formation's S1 check (a write lands only on the version it read) chains them.
  std::vector<std::pair<uint64_t, uint64_t>> commits;
};

class CountingStore final : public store::Store {
 public:
  // `inner` and `counts` outlive this. The timeout is the inner store's (watch bounds read it).
  CountingStore(store::Store& inner, StoreCounts& counts) : inner_(inner), counts_(counts) {
    set_timeout(inner.timeout());
  }

  void set(const std::string& key, store::Bytes value) override {
    ++counts_.requests;
    inner_.set(key, std::move(value));
  }
  store::Bytes get(const std::string& key) override {
    ++counts_.requests;
    return inner_.get(key);
  }
  store::Bytes compare_set(const std::string& key, const store::Bytes& expected, store::Bytes desired) override {
    ++counts_.requests;
    return inner_.compare_set(key, expected, std::move(desired));
  }
  int64_t add(const std::string& key, int64_t delta) override {
    ++counts_.requests;
    return inner_.add(key, delta);
  }
  void wait(const std::vector<std::string>& keys) override {
    ++counts_.requests;
    inner_.wait(keys);
  }
  bool check(const std::vector<std::string>& keys) override {
    ++counts_.requests;
    return inner_.check(keys);
  }
  bool delete_key(const std::string& key) override {
    ++counts_.requests;
    return inner_.delete_key(key);
  }
  int64_t num_keys() override {
    ++counts_.requests;
    return inner_.num_keys();
  }
  std::vector<store::Bytes> multi_get(const std::vector<std::string>& keys) override {
    ++counts_.requests;
    return inner_.multi_get(keys);
  }
  void multi_set(const std::vector<std::string>& keys, std::vector<store::Bytes> values) override {
    ++counts_.requests;
    inner_.multi_set(keys, std::move(values));
  }
  store::Versioned get_versioned(const std::string& key) override {
    ++counts_.requests;
    ++counts_.reads;
    store::Versioned v = inner_.get_versioned(key);
    counts_.read_reply_bytes += v.value.size();
    return moved(std::move(v));
  }
  store::CasOutcome compare_set_version(const std::string& key, uint64_t expected_version,
                                        store::Bytes desired) override {
    ++counts_.requests;
    ++counts_.cas;
    store::CasOutcome outcome = inner_.compare_set_version(key, expected_version, std::move(desired));
    if (!outcome.written) ++counts_.cas_conflicts;
    if (outcome.written) counts_.commits.emplace_back(expected_version, outcome.current.version);
    counts_.reply_bytes += outcome.current.value.size();
    (outcome.written ? counts_.cas_won_reply_bytes : counts_.cas_lost_reply_bytes) += outcome.current.value.size();
    return outcome;
  }
  store::Versioned watch(const std::string& key, uint64_t known_version) override {
    return watched(known_version, inner_.watch(key, known_version));
  }
  store::Versioned watch_at_most(const std::string& key, uint64_t known_version, store::Duration timeout) override {
    return watched(known_version, inner_.watch_at_most(key, known_version, timeout));
  }

 private:
  store::Versioned moved(store::Versioned v) {
    counts_.reply_bytes += v.value.size();
    return v;
  }
  store::Versioned watched(uint64_t known_version, store::Versioned v) {
    ++counts_.requests;
    ++counts_.watches;
    if (v.version != known_version) ++counts_.watch_changes;
    counts_.watch_reply_bytes += v.value.size();
    return moved(std::move(v));
  }

  store::Store& inner_;
  StoreCounts& counts_;
};

}  // namespace dagsim::bench
